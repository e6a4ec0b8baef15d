"""Fuzz the command line itself: random argument lists over every command (flags in any
order, missing or repeated, values of the wrong kind, odd store URLs). Each run ends with
a documented exit code, no traceback, one printable first line on failure, and the
existing store is left as it was and still verifies."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import all_commands, build_parser
from engine.session import Session, StepClock
from engine.store import open_store
from engine.store.verify import verify
from tests.support.cli_run import run_cli, scratch_dir

TALLY: Counter[int] = Counter()
TRIALS = 300
# The plugged-in verbs too (fork is left out: it may add a session, which is its job).
COMMANDS = ["append", "anchor", "demo", "repair", "show", "tail", "verify", "export", "diff",
            "sessions"]
# --follow is left out: without an idle timeout it waits for new events by design.
FLAGS = ["--session", "--at", "--as", "--json", "--every", "--store", "--key-file",
         "--against", "--dry-run", "--from", "--idle-timeout", "-v", "--log-json",
         "--log-level", "--version", "-h", "--bogus", "-", "--"]


def _own_flags() -> dict[str, list[str]]:
    top = build_parser(all_commands())
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [f for a in p._actions for f in a.option_strings if f not in ("--follow", "-f")]
            for name, p in sub.choices.items()}


OWN_FLAGS = _own_flags()


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Path, str, str]]:
    with scratch_dir("argv-fuzz") as root:
        yield _world(root)


def _world(root: Path) -> tuple[Path, str, str]:
    url = f"sqlite:///{root}/there.db"
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        s.user_message("hello")
    finally:
        store.close()
    (root / "notes.txt").write_text("not a store\n")
    (root / "key").write_text("0123456789abcdef0123\n")
    return root, url, s.id


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    for code, n in sorted(TALLY.items()):
        print(f"argv fuzz: exit {code}: {n}")


def _values(root: Path, url: str, sid: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from([
            url, url.upper().replace(str(root).upper(), str(root)), f"sqlite:///{root}/none.db",
            f"jsonl:///{root}/none", f"jsonl:///{root}", f"sqlite:///{root}/notes.txt",
            f"{url}?max_event_bytes=-1", f"{url}?batch_ms=x", "memory://", "mysql://db",
            "sqlite:///", "jsonl:///", "", sid, sid.upper(), "../../etc/passwd", "0", "-1",
            "1e999", "nan", "9" * 30, "events", "withparts", "debug", str(root / "key"),
            str(root / "notes.txt"), "convlog-anchor-1/x/1/00", "\x00", "é", "\udcff",
        ]),
        st.text(max_size=12),
    )


@settings(max_examples=TRIALS, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_argument_list_ends_cleanly(world: tuple[Path, str, str], data: st.DataObject,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root, url, sid = world
    monkeypatch.chdir(root)  # a demo without --store writes here, not in the repository
    values = _values(root, url, sid)
    command = data.draw(st.one_of(st.sampled_from(COMMANDS), st.sampled_from(["", "x"]),
                                  st.text(max_size=6)))
    own = OWN_FLAGS.get(command, FLAGS)
    flag = st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(FLAGS))
    pairs = data.draw(st.lists(st.tuples(flag, values, st.booleans()), max_size=4))
    words = [w for f, v, with_value in pairs for w in ((f, v) if with_value else (f,))]
    if command == "demo" and "--store" not in words:
        words += ["--store", f"sqlite:///{root}/demo.db"]
    argv = [command, *words]
    if data.draw(st.integers(0, 3)):
        argv.insert(1, data.draw(st.one_of(st.just(url), values)))
    # As given: a byte that is no UTF-8 reaches Python's argv as a lone surrogate
    # ("\udcff"), which a store's SQL or a file name cannot take.
    done = run_cli(argv)
    done.assert_clean()
    TALLY[done.code] += 1
    store = open_store(url, create=False)
    try:
        report = verify(store)
        assert report.ok, report.first
        assert [(s.id, store.version(s.id)) for s in store.sessions()] == [(sid, 4)]
    finally:
        store.close()


SESSION_COMMANDS = sorted(name for name, flags in OWN_FLAGS.items() if "--session" in flags)
EXTRA = {"diff": ["1", "1"], "fork": ["--at", "1"]}  # their other required arguments


@pytest.mark.parametrize("command", SESSION_COMMANDS)
@pytest.mark.parametrize("bad", ["\udcff", "a/b", "x y", ""])
def test_a_malformed_session_is_exit_2_in_every_command(
        command: str, bad: str, world: tuple[Path, str, str]) -> None:
    """``diff --session $'\\xc3'`` (a byte that is no UTF-8) was exit 1: the plug-in's
    --session had no type, so the id reached the store's SQL."""
    _, url, _ = world
    done = run_cli([command, url, "--session", bad, *EXTRA.get(command, [])])
    done.assert_clean()
    assert done.code == 2, done
    assert "--session" in done.err, done
