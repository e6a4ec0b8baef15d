"""A store written by the release before schema 3 (``tests/fixtures/store-v2.db``, per
event ``log`` and ``ids`` rows, format 2 sealed blocks) opens, migrates, reads,
verifies and takes appends; a schema 1 store is refused with a clear error."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK, EXIT_UNREADABLE
from engine.errors import StoreError
from engine.session import Session
from engine.store import Store, blocks, open_store
from engine.store.sqlite import PAGE_SIZE as SQLITE_PAGE_SIZE
from engine.store.sqlite import SQLiteStore
from engine.store.verify import verify
from projections.withparts import WithPartsProjection
from tests.support.cli_run import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store-v2.db"
ROOT = "0190b000-0000-7000-8000-0000000000a1"
OTHER = "0190b000-0000-7000-8000-0000000000b2"
# `convlog verify` of the fixture as its release wrote it (before any migration).
HEADS = {
    ROOT: (308, "c916c639d42cb975fc4e753954cd7e58"),
    OTHER: (32, "bcadfbbebce147501da4bb7c63e4b70e"),
    "01977420-e496-725e-991c-45274418769e": (10, "308f2b9c5d7eab751869adedcebae02c"),
}


@pytest.fixture
def old(tmp_path: Path) -> Path:
    path = tmp_path / "v2.db"
    shutil.copy(FIXTURE, path)
    return path


def _read_everything(store: Store, log_before: list[Any], ids_before: list[Any]) -> None:
    for deep in (True, False):
        report = verify(store, deep=deep)
        assert report.ok, report.problems
        assert report.heads == HEADS
    assert report.events == 344
    # The same events at the same positions; every id found where it was.
    records = list(store.read_all())
    assert [(r.position, r.event.seq) for r in records] == [(p, q) for p, _, q in log_before]
    by_position = {r.position: r.event for r in records}
    for key, position in ids_before:
        e = by_position[position]
        assert blocks.id_key(e.id) == bytes(key)
        assert store.find_event(e.id) == (e.session_id, e.seq)
    assert store.latest_snapshot(ROOT, "fixture.v1", 100) == (4, b"snapshot bytes")
    # A bulk replay of the old blocks (no runs in them) folds what the events fold.
    for sid in HEADS:
        bulk = WithPartsProjection.replay(store, sid)
        per_event = WithPartsProjection(sid).apply_all(store.read(sid))
        assert msgspec.json.encode(bulk.to_json()) == msgspec.json.encode(per_event.to_json())
        assert bulk.seq == per_event.seq == HEADS[sid][0]


def test_a_schema_2_store_is_read_as_it_is_and_migrates_on_its_first_write(old: Path) -> None:
    db = sqlite3.connect(old)
    before = db.execute("SELECT sid, last_seq, body FROM blocks ORDER BY 1, 2").fetchall()
    ids_before = db.execute("SELECT id, position FROM ids ORDER BY position").fetchall()
    log_before = db.execute("SELECT position, sid, seq FROM log ORDER BY position").fetchall()
    db.close()
    file_before = old.read_bytes()
    store = open_store(f"sqlite:///{old}")
    _read_everything(store, log_before, ids_before)
    store.close()
    # Reading changed no byte: the release before still opens the file.
    assert old.read_bytes() == file_before
    store = open_store(f"sqlite:///{old}")
    store.put_snapshot(ROOT, "after.upgrade", 5, b"a write")  # the first write migrates
    _read_everything(store, log_before, ids_before)
    store.close()
    db = sqlite3.connect(old)
    assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("4",)
    assert db.execute("SELECT sid, last_seq, body FROM blocks ORDER BY 1, 2").fetchall() == before
    assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] < len(log_before) / 10
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not {"log_v2", "ids_v2"} & tables
    db.close()


@pytest.mark.parametrize("argv", [["verify"], ["verify", "--fast"], ["sessions"],
                                  ["show", "--session", ROOT]])
def test_read_commands_leave_a_schema_2_file_unchanged(old: Path, argv: list[str]) -> None:
    file_before = old.read_bytes()
    command = [argv[0], f"sqlite:///{old}", *argv[1:]]
    outcome = run_cli(command)
    outcome.assert_clean()
    assert outcome.code == 0, outcome
    assert old.read_bytes() == file_before


def test_a_reader_of_schema_2_beside_a_writer_that_migrates(old: Path) -> None:
    """A reader that opened the file at schema 2 keeps its in-memory index while
    another connection migrates the file under it; both read the same events."""
    reader = open_store(f"sqlite:///{old}")
    writer = open_store(f"sqlite:///{old}")
    writer.put_snapshot(ROOT, "after.upgrade", 5, b"a write")
    assert list(reader.read(ROOT)) == list(writer.read(ROOT))
    assert reader.find_event(next(writer.read(ROOT, 3, 3)).id) == (ROOT, 3)
    reader.close()
    writer.close()


def test_a_migrated_store_takes_appends_past_its_old_sealed_blocks(old: Path) -> None:
    store = open_store(f"sqlite:///{old}")
    s = Session.open(store, ROOT)
    m = s.start_message("assistant")
    text = s.add_text(m)
    for i in range(300):  # seals the old tail (format 2 rows) into format 3 blocks
        s.text_delta(text, f"more {i} ")
    s.end_part(text)
    s.complete_message(m, finish="stop")
    retry = store.append(ROOT, [next(store.read(ROOT, 5, 5))])  # an old event, retried
    assert retry.retried
    assert retry.seqs == (5,)
    store.close()
    store = open_store(f"sqlite:///{old}")
    for deep in (True, False):
        report = verify(store, deep=deep)
        assert report.ok, report.problems
        assert report.heads[OTHER] == HEADS[OTHER]
    assert report.heads[ROOT][0] == 308 + 304
    assert isinstance(store, SQLiteStore)
    bodies = store.read_bodies(ROOT, 1, 10_000)
    assert {b[:1] for b in bodies[:2]} == {b"\x01"}  # old sealed blocks kept as they were
    assert any(blocks.is_sealed(b) for b in bodies)
    store.close()


def test_a_schema_1_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', '1')")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema 1"):
        open_store(f"sqlite:///{path}")


def _page_size(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA page_size").fetchone()[0])
    finally:
        db.close()


def test_new_files_get_the_small_page_size_and_old_files_keep_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = tmp_path / "new.db"
    open_store(f"sqlite:///{new}").close()
    assert _page_size(new) == SQLITE_PAGE_SIZE == 2048
    old_file = tmp_path / "old.db"
    with monkeypatch.context() as m:  # a file written before the page size was set
        m.setattr("engine.store.sqlite.PAGE_SIZE", 4096)
        store = open_store(f"sqlite:///{old_file}")
        Session.create(store).user_message("written at 4 KiB pages")
        store.close()
    store = open_store(f"sqlite:///{old_file}")
    Session.create(store).user_message("and appended to later")
    assert verify(store).ok
    store.close()
    assert _page_size(old_file) == 4096


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.integers(0, 1 << 30), mask=st.integers(1, 255),
       fast=st.booleans(), cut=st.booleans())
def test_a_damaged_schema_2_file_is_reported_never_raised(
        tmp_path_factory: pytest.TempPathFactory, where: int, mask: int, fast: bool,
        cut: bool) -> None:
    """Reading a schema 2 file builds its indexes in memory: damaged rows there are
    exit 4 or 5 with one line, never a traceback, and the file is not written."""
    path = tmp_path_factory.mktemp("v2-damaged") / "v2.db"
    data = bytearray(FIXTURE.read_bytes())
    at = where % len(data)
    if cut:
        del data[at:]
    else:
        data[at] ^= mask
    path.write_bytes(bytes(data))
    outcome = run_cli(["verify", f"sqlite:///{path}"] + (["--fast"] if fast else []))
    outcome.assert_clean()
    assert outcome.code in (EXIT_OK, EXIT_CORRUPT, EXIT_UNREADABLE), outcome
    assert path.read_bytes() == bytes(data)
