"""Torn writes: the files a killed writer left, cut or flipped at a drawn offset.

A writer is killed (SIGKILL, at a drawn write step: see ``test_store_crash_points``),
then one file of what it left is damaged the way a lost page or a torn sector would:

- SQLite's ``-wal`` cut or flipped: SQLite keeps the committed prefix its frame
  checksums vouch for. The store must still verify, hold at least every event that
  was already in the main file (intact on disk), and take the next append.
- a JSONL session file (the live tail) cut: the whole lines before the cut are intact
  on disk and must all survive; the next append moves the torn bytes aside and
  continues right after them.
- a JSONL ``.blocks`` file (sealed gzip members) cut or flipped: events may be gone
  from disk. Every command answers with one line and a documented code, and after
  the next append, ``verify`` never calls a log with a hole sound.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK
from engine.errors import CorruptLog
from engine.session import Session
from engine.store import open_store
from tests.store.test_store_crash_points import run_until_killed
from tests.support.cli_run import run_cli, scratch_dir
from tests.support.crash_child import _open_text

SID = "0190a000-0000-7000-8000-0000000c0003"
_RUNS = itertools.count()
TORN = settings(max_examples=20, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with scratch_dir("torn-writes") as root:
        yield root


@pytest.fixture(scope="module")
def killed(scratch: Path) -> dict[str, Path]:
    """One store of each kind, its writer killed mid-append after some seals."""
    out = {}
    for kind, name, step in (("sqlite", "s.db", 1900), ("jsonl", "log", 1300)):
        path = scratch / "killed" / name
        path.parent.mkdir(exist_ok=True)
        url = f"sqlite:///{path}" if kind == "sqlite" else f"jsonl:///{path}"
        for _ in range(3):
            assert run_until_killed(url, SID, step)
        out[kind] = path
    assert Path(f"{out['sqlite']}-wal").stat().st_size > 0  # SIGKILL: nothing checkpointed
    return out


def _copy(src: Path, base: Path) -> Path:
    root = base / str(next(_RUNS))
    root.mkdir(parents=True)
    dst = root / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:  # the main file and its WAL; SQLite rebuilds the -shm index from the WAL
        shutil.copy(src, dst)
        shutil.copy(f"{src}-wal", f"{dst}-wal")
    return dst


def _damage(path: Path, op: str, at: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    i = at % (len(data) + 1)
    if op == "cut":
        del data[i:]
    elif data:
        data[i % len(data)] ^= mask
    path.write_bytes(bytes(data))


def _events_in_main_file(db: Path) -> int:
    """The events the main database file holds without its WAL (intact on disk)."""
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        row = con.execute("SELECT version FROM sessions WHERE id=?", (SID,)).fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def _append_one(url: str) -> int:
    """The next writer's append (one more delta to the open text part): its seq."""
    store = open_store(url)
    try:
        s = Session.open(store, SID)
        return s.text_delta(_open_text(s), "after the tear")
    finally:
        store.close()


DAMAGE = st.tuples(st.sampled_from(["cut", "cut", "flip"]), st.integers(0, 1 << 30),
                   st.integers(1, 255))


@TORN
@given(damage=DAMAGE)
def test_a_torn_sqlite_wal_keeps_a_sound_committed_prefix(
        damage: tuple[str, int, int], killed: dict[str, Path], scratch: Path) -> None:
    db = _copy(killed["sqlite"], scratch / "torn")
    floor = _events_in_main_file(db)
    _damage(Path(f"{db}-wal"), *damage)
    url = f"sqlite:///{db}"
    for argv in (["verify", url], ["verify", url, "--fast"]):
        outcome = run_cli(argv)
        assert outcome.code == EXIT_OK, (argv, outcome)
    store = open_store(url)
    try:
        version = store.version(SID)
    finally:
        store.close()
    assert version >= floor  # what the main file held is never lost
    assert _append_one(url) == version + 1
    assert run_cli(["verify", url]).code == EXIT_OK


def _whole_lines(data: bytes) -> list[int]:
    return [json.loads(line)["event"]["seq"] for line in data.split(b"\n")[:-1]]


@TORN
@given(at=st.integers(0, 1 << 30))
def test_a_cut_jsonl_tail_keeps_every_whole_line(
        at: int, killed: dict[str, Path], scratch: Path) -> None:
    root = _copy(killed["jsonl"], scratch / "torn")
    tail = root / "sessions" / f"{SID}.jsonl"
    data = tail.read_bytes()
    cut = data[:at % (len(data) + 1)]
    tail.write_bytes(cut)
    kept = _whole_lines(cut)
    url = f"jsonl:///{root}"
    for argv in (["verify", url], ["verify", url, "--fast"], ["show", url, "--session", SID]):
        outcome = run_cli(argv)
        outcome.assert_clean()
        # A cut tail is damage verify names (the head file records more), never a crash.
        assert outcome.code in (EXIT_OK, EXIT_CORRUPT), (argv, outcome)
    store = open_store(url)
    try:
        sealed_to = max((e.seq for e in store.read(SID)), default=0) if not kept else kept[0] - 1
    finally:
        store.close()
    expected = kept[-1] if kept else sealed_to
    assert _append_one(url) == expected + 1  # none lost, none resurrected
    store = open_store(url)
    try:
        assert [e.seq for e in store.read(SID)] == list(range(1, expected + 2))
    finally:
        store.close()


@TORN
@given(damage=DAMAGE)
def test_a_torn_jsonl_blocks_file_is_never_called_sound_with_a_hole(
        damage: tuple[str, int, int], killed: dict[str, Path], scratch: Path) -> None:
    root = _copy(killed["jsonl"], scratch / "torn")
    _damage(root / "sessions" / f"{SID}.blocks", *damage)
    url = f"jsonl:///{root}"
    for argv in (["verify", url], ["verify", url, "--fast"], ["show", url, "--session", SID],
                 ["export", url, "--session", SID, "--as", "events"], ["tail", url]):
        run_cli(argv).assert_clean()
    # Refusing to write on top of a damaged log is fine; any other exception is not.
    with contextlib.suppress(CorruptLog):
        _append_one(url)
    after = run_cli(["verify", url])
    after.assert_clean()
    if after.code == EXIT_OK:  # then the session reads gaplessly up to its head
        store = open_store(url)
        try:
            assert [e.seq for e in store.read(SID)] == list(range(1, store.version(SID) + 1))
        finally:
            store.close()
