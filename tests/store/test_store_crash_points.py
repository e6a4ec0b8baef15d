"""Crash points: a writer killed (SIGKILL) at a drawn write step, not a drawn time.

``test_store_crash.py`` kills after random delays, which land mostly between
appends. Here the child (``tests/support/crash_child.py point``) kills itself at its
N-th write step, N drawn by hypothesis: the N-th SQL statement on a SQLite store's
connection (so inside an append's transaction, the merge that seals 128 tail events
into a packed block or re-seals a last block with room, a commit, or a schema 2 ->
3 migration), or the N-th fsync/rename of a JSONL store (the intent record, the
lines, the head file, the gzip members of a seal, the emptied tail that rotates it).

After every kill: the store opens, the deep and the fast ``verify`` pass, every seq
the writer acknowledged (durable mode) is stored, the log replays gaplessly with
gapless global positions, and the next append works. Rounds continue one store, so
later kills meet earlier kills' leftovers.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_OK, EXIT_USAGE
from engine.session import Session
from engine.store import open_store
from engine.store.verify import verify
from tests.support.cli_run import run_cli, scratch_dir
from tests.support.crash_child import _open_text

CHILD = Path(__file__).resolve().parents[1] / "support" / "crash_child.py"
FIXTURE_V2 = Path(__file__).resolve().parents[1] / "fixtures" / "store-v2.db"
SID = "0190a000-0000-7000-8000-0000000c0002"
V2_ROOT = "0190b000-0000-7000-8000-0000000000a1"
V2_EVENTS = 344  # every session's events in the schema 2 fixture
_RUNS = itertools.count()


def run_until_killed(url: str, sid: str, step: int) -> list[int]:
    """The seqs a writer acknowledged before it killed itself at its ``step``-th write."""
    done = subprocess.run([sys.executable, str(CHILD), "point", url, sid, str(step)],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr.decode()[-2000:]  # killed, not failed
    return [int(x) for x in done.stdout.split(b"\n") if x.strip()]


def check_after_kill(url: str, sid: str, acked: list[int], floor: int) -> int:
    """The store is sound, holds every acknowledged seq, and takes the next append."""
    for argv in (["verify", url], ["verify", url, "--fast"]):
        outcome = run_cli(argv)
        if not acked and not floor and outcome.code == EXIT_USAGE:
            # Killed while creating the store: none yet, and the next writer makes it.
            assert "no such store" in outcome.err, outcome
            continue
        assert outcome.code == EXIT_OK, (argv, outcome)
    store = open_store(url)
    try:
        exists = any(i.id == sid for i in store.sessions())
        version = store.version(sid) if exists else 0
        assert version >= max(acked, default=floor), (acked[-3:], version)
        if exists:
            assert [e.seq for e in store.read(sid)] == list(range(1, version + 1))
        positions = [r.position for r in store.read_all()]
        assert positions == list(range(1, len(positions) + 1))
        s = Session.open_or_create(store, sid)
        seq = s.text_delta(_open_text(s), "after the crash")
        assert seq == s.version >= version + 1
        report = verify(store)
        assert report.ok, report.first
        return seq
    finally:
        store.close()


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with scratch_dir("crash-points") as root:
        yield root


@pytest.fixture(scope="module")
def floors() -> dict[str, int]:
    return {}


KILLS = settings(max_examples=14, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@KILLS
@given(step=st.integers(1, 2500))
def test_a_writer_killed_at_any_write_step_loses_nothing_acknowledged(
        kind: str, step: int, scratch: Path, floors: dict[str, int]) -> None:
    url = f"sqlite:///{scratch}/s.db" if kind == "sqlite" else f"jsonl:///{scratch}/log"
    acked = run_until_killed(url, SID, step)
    floors[kind] = check_after_kill(url, SID, acked, floors.get(kind, 0))


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.integers(1, 60))
def test_a_writer_killed_inside_the_schema_migration(step: int, scratch: Path) -> None:
    """The schema 2 -> 3 migration runs in the first write's transaction: killed at any
    statement of it, the file is still a readable schema 2 store (or a whole schema 3
    one) with all its events, and the next writer migrates it."""
    db = scratch / f"v2-{next(_RUNS)}.db"
    shutil.copy(FIXTURE_V2, db)
    url = f"sqlite:///{db}"
    acked = run_until_killed(url, V2_ROOT, step)
    before = 308  # the fixture's version of this session
    final = check_after_kill(url, V2_ROOT, acked, before)
    store = open_store(url)
    try:  # the fixture's events are all still there, beside the new ones
        assert verify(store).events == V2_EVENTS + final - before
    finally:
        store.close()
