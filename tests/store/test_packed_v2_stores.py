"""Stores written by the release that introduced packed payload format 2 without raising
a store number (SQLite schema 3, JSONL format 2, PostgreSQL schema 3;
tests/fixtures/make_packed_v2.py) open, read, replay and verify with today's code,
and reads leave them as they were. The first write raises the number (SQLite and
PostgreSQL: any write; JSONL: the first seal, the only write of a packed payload),
so that the releases before refuse the store as newer instead of calling its
blocks damage; everything still reads and verifies after it."""

from __future__ import annotations

import functools
import gzip
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.session import Session
from engine.store import Store, blocks, open_store, packed
from engine.store import jsonl as jsonl_store
from engine.store import postgres as pg_store
from engine.store import sqlite as sqlite_store
from engine.store.jsonl_blocks import SEAL_AT as JSONL_SEAL_AT
from engine.store.verify import verify
from tests.support.cli_run import run_cli
from tests.support.packed_stores import (
    check_reads,
    enc,
    files,
    fixture_events,
    jsonl_payload_formats,
    pg_payload_formats,
    pg_rows,
    sqlite_payload_formats,
    store_number,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "packed-v2-stores"
KINDS = ["sqlite", "jsonl", "postgres"]


@attrs.frozen
class Old:
    """A copy of one fixture store: its URL, what it held as written (``state``: its
    files' bytes, or its tables' rows) and this release's number for its kind."""

    kind: str
    url: str
    state: Callable[[], Any]
    formats: Callable[[], set[int]]
    old_number: int
    new_number: int


@pytest.fixture(params=KINDS)
def old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Old]:
    kind = request.param
    if kind == "sqlite":
        path = tmp_path / "store.db"
        shutil.copy(FIXTURE / "store.db", path)
        yield Old(kind, f"sqlite:///{path}", path.read_bytes,
                  lambda: sqlite_payload_formats(path), 3, sqlite_store.SCHEMA_VERSION)
    elif kind == "jsonl":
        root = tmp_path / "jsonl"
        shutil.copytree(FIXTURE / "jsonl", root)
        yield Old(kind, f"jsonl:///{root}", lambda: files(root),
                  lambda: jsonl_payload_formats(root), 2, jsonl_store.FORMAT_VERSION)
    else:
        import psycopg  # noqa: PLC0415 - optional extra

        url: str = request.getfixturevalue("pg_url")
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(gzip.decompress((FIXTURE / "pg-store.sql.gz").read_bytes()).decode())
        yield Old(kind, url, lambda: pg_rows(url), lambda: pg_payload_formats(url), 3,
                  pg_store.SCHEMA_VERSION)


def _check_reads(store: Store, kind: str) -> dict[str, list[ev.AnyEvent]]:
    """Every read of the old store gives the old release's events (check_reads), its
    snapshot, and verifies; returns them by session."""
    want = check_reads(store, FIXTURE, kind)
    root_id = next(i.id for i in store.sessions() if i.parent is None)
    assert store.latest_snapshot(root_id, "fixture.v1", 10) == (4, "スナップショット".encode())
    for deep in (True, False):
        report = verify(store, deep=deep)
        assert report.ok, report.problems
        assert {sid: seq for sid, (seq, _) in report.heads.items()} == {
            sid: events[-1].seq for sid, events in want.items()}
    return want


def test_the_fixture_holds_packed_format_2_blocks_at_the_old_number(old: Old) -> None:
    assert old.formats() == {packed.FORMAT} == {2}  # the fixture keeps its meaning
    assert store_number(old.url) == old.old_number < old.new_number


def test_an_old_store_reads_replays_and_verifies_and_reads_change_nothing(old: Old) -> None:
    before = old.state()
    store = open_store(old.url)
    try:
        _check_reads(store, old.kind)
    finally:
        store.close()
    assert old.state() == before  # the release of the store still opens it
    assert store_number(old.url) == old.old_number


@pytest.mark.parametrize("argv", [
    ["verify"], ["verify", "--fast"], ["sessions"], ["tail"], ["show", "--session", "{root}"],
    ["show", "--session", "{root}", "--at", "1500"],
    ["export", "--session", "{root}", "--as", "opencode"]])
def test_read_commands_leave_an_old_store_unchanged(old: Old, argv: list[str]) -> None:
    root = fixture_events(FIXTURE, old.kind)[0][0].session_id
    before = old.state()
    outcome = run_cli([argv[0], old.url, *(a.format(root=root) for a in argv[1:])])
    outcome.assert_clean()
    assert outcome.code == 0, outcome
    assert old.state() == before


def test_the_first_write_raises_the_number_and_everything_still_verifies(old: Old) -> None:
    store = open_store(old.url)
    try:
        want = _check_reads(store, old.kind)
        root_id, fork_id = want
        Session.open(store, fork_id).user_message("一つ目の書き込み")  # seals nothing
        # SQLite and PostgreSQL: raised by any write. JSONL: by the first seal only.
        assert store_number(old.url) == (old.old_number if old.kind == "jsonl"
                                         else old.new_number)
        s = Session.open(store, root_id)
        m = s.start_message("assistant")
        part = s.add_text(m)
        for i in range(blocks.BLOCK_MAX + 300):  # seals, in every store
            s.text_delta(part, f"é{i} ")
        s.end_part(part)
        s.complete_message(m, finish="stop")
        assert store_number(old.url) == old.new_number
        assert old.formats() == {packed.FORMAT}
        after = list(store.read(root_id))
        assert enc(after[:len(want[root_id])]) == enc(want[root_id])
        assert "".join(e.delta for e in after[len(want[root_id]):]
                       if isinstance(e, ev.TextDelta)) == "".join(
            f"é{i} " for i in range(blocks.BLOCK_MAX + 300))
        fork_after = list(store.read(fork_id))
        assert enc(fork_after[:len(want[fork_id])]) == enc(want[fork_id])
        for deep in (True, False):
            report = verify(store, deep=deep)
            assert report.ok, report.problems
    finally:
        store.close()
    again = open_store(old.url)  # reopened at the new number: no migration left to do
    try:
        assert verify(again).ok
    finally:
        again.close()


def _blocks_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "sessions").glob("*.blocks"))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["sqlite", "jsonl"]),
       ops=st.lists(st.sampled_from(["read", "snapshot", "message", "seal"]), max_size=4))
def test_the_number_is_raised_exactly_by_the_writes_that_may_need_it(
        tmp_path_factory: pytest.TempPathFactory, kind: str, ops: list[str]) -> None:
    """Any mix of reads and writes on an old store: until the first write its bytes
    are as the old release wrote them; a SQLite store is raised by its first write
    of any kind, a JSONL store exactly when a seal has written members; and it
    verifies after them."""
    where = tmp_path_factory.mktemp("old")
    if kind == "sqlite":
        shutil.copy(FIXTURE / "store.db", where / "store.db")
        url, old_number, new_number = (f"sqlite:///{where / 'store.db'}", 3,
                                       sqlite_store.SCHEMA_VERSION)
        state: Callable[[], Any] = (where / "store.db").read_bytes
    else:
        shutil.copytree(FIXTURE / "jsonl", where / "jsonl")
        url, old_number, new_number = (f"jsonl:///{where / 'jsonl'}", 2,
                                       jsonl_store.FORMAT_VERSION)
        state = functools.partial(files, where / "jsonl")
    pristine = state()
    sealed_before = _blocks_bytes(where / "jsonl") if kind == "jsonl" else 0
    store = open_store(url)
    try:
        root_id, fork_id = (e[0].session_id for e in fixture_events(FIXTURE, kind))
        wrote = False
        for i, op in enumerate(ops):
            if op == "read":
                assert verify(store, deep=False).ok
                list(store.read(fork_id, 1, 50))
            elif op == "snapshot":
                store.put_snapshot(fork_id, "drawn", 3, f"書いた {i}".encode())
            elif op == "message":
                Session.open(store, fork_id).user_message(f"drawn {i} ü")
            else:
                s = Session.open(store, root_id)
                m = s.start_message("assistant")
                part = s.add_text(m)
                for j in range(max(blocks.SEAL_AT, JSONL_SEAL_AT)):
                    s.text_delta(part, f"{j}🙂")
                s.end_part(part)
                s.complete_message(m, finish="stop")
            wrote = wrote or op != "read"
            number = store_number(url)
            if not wrote:
                assert state() == pristine
                assert number == old_number
            elif kind == "sqlite":
                assert number == new_number
            else:
                sealed = _blocks_bytes(where / "jsonl") > sealed_before
                assert number == (new_number if sealed else old_number)
        assert verify(store).ok
    finally:
        store.close()
