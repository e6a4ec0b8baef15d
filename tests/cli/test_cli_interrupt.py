"""Ctrl-C during a long read: one line, exit 130, and the store as it was.

``test_cli_edges`` interrupts ``append`` while it waits on stdin. Here a real
``convlog`` process reads a store of 60,000 events (``verify``, ``verify --fast``,
``export``, ``show --as events``, ``tail``) and gets SIGINT at a drawn moment after
it opened the store: it must stop with ``convlog CMD: interrupted`` and exit 130 (or
finish first, exit 0), never print a traceback, and leave the store's files as they
were (the log still verifies).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_INTERRUPTED, EXIT_OK
from engine.session import Session, StepClock
from engine.store import open_store
from tests.support.cli_run import run_cli, scratch_dir

EVENTS = 60_000


@pytest.fixture(scope="module")
def stores() -> Iterator[dict[str, tuple[str, str, Path]]]:
    with scratch_dir("interrupt") as root:
        out = {}
        for kind, name in (("sqlite", "big.db"), ("jsonl", "big")):
            path = root / name
            url = f"sqlite:///{path}" if kind == "sqlite" else f"jsonl:///{path}"
            store = open_store(f"{url}?durability=batched")
            try:
                s = Session.create(store, clock=StepClock())
                mid = s.start_message("assistant")
                text = s.add_text(mid)
                for i in range(EVENTS):
                    s.text_delta(text, f"chunk {i} ")
            finally:
                store.close()
            out[kind] = (url, s.id, path)
        yield out


def _files(path: Path) -> dict[str, bytes]:
    found = [path] if path.is_file() else sorted(path.rglob("*"))
    return {str(p): p.read_bytes() for p in found if p.is_file() and p.name != "lock"}


def _wait_until_open(proc: subprocess.Popen[bytes], path: Path) -> None:
    """Until the process holds a file of the store open: its command has started (the
    interpreter's own start-up, before convlog runs, is not what this test is about)."""
    fds = Path(f"/proc/{proc.pid}/fd")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            targets = [os.readlink(fd) for fd in fds.iterdir()]
        except OSError:
            targets = []
        if any(t.startswith(str(path)) for t in targets):
            return
        time.sleep(0.002)


COMMANDS = ["verify", "verify --fast", "export", "show", "tail"]


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["sqlite", "jsonl"]), command=st.sampled_from(COMMANDS),
       delay=st.floats(0.0, 0.6))
def test_ctrl_c_during_a_long_read_is_one_line_and_changes_nothing(
        kind: str, command: str, delay: float,
        stores: dict[str, tuple[str, str, Path]]) -> None:
    url, sid, path = stores[kind]
    argv = {"verify": ["verify", url], "verify --fast": ["verify", url, "--fast"],
            "export": ["export", url, "--session", sid, "--as", "events"],
            "show": ["show", url, "--session", sid, "--as", "events"],
            "tail": ["tail", url]}[command]
    before = _files(path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", *argv], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # A child of a non-interactive shell may inherit SIGINT ignored: restore it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    _wait_until_open(proc, path)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    text = err.decode()
    assert "Traceback" not in text, text
    # Or killed by the signal itself (a shell shows 130 too), silently: it came while
    # the interpreter was exiting, its own handler already gone.
    assert proc.returncode in (EXIT_OK, EXIT_INTERRUPTED) \
        or (proc.returncode == -signal.SIGINT and not text), (proc.returncode, text)
    if proc.returncode == EXIT_INTERRUPTED:
        assert text == f"convlog {argv[0]}: interrupted\n", text
    assert _files(path) == before
    assert run_cli(["verify", url]).code == EXIT_OK
