"""The block codec is one swappable object: a SQL store built with another codec
(a JSONL store with another member codec) writes, reads and verifies through it,
byte for byte as with the default.

The codecs here wrap :mod:`engine.store.blocks` (:mod:`engine.store.jsonl_blocks`)
and count the calls they see: a store that kept calling the module by name would
leave the counts at zero.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from engine.events import AnyEvent
from engine.session import Session, StepClock
from engine.store import JSONLStore, MemoryStore, SQLiteStore, blocks, jsonl_blocks
from engine.store.codec_protocol import BlockCodec, MemberCodec
from engine.store.postgres import PostgresStore
from engine.store.sql import SQLStore
from engine.store.verify import verify


class Counting:
    """Delegates every member to a codec module (``engine.store.blocks`` by default),
    counting each call."""

    def __init__(self, codec: ModuleType = blocks) -> None:
        self.codec = codec
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        member = getattr(self.codec, name)
        if not callable(member):
            return member  # a constant (SEAL_AT, BLOCK_MAX, TAIL, SEAL_BYTES)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return member(*args, **kwargs)
        return counted


def _events() -> tuple[str, int, list[AnyEvent]]:
    """A session long enough to seal blocks (past blocks.SEAL_AT) and keep a tail."""
    source = MemoryStore()
    s = Session.create(source, clock=StepClock())
    s.user_message("one")
    m = s.start_message("assistant")
    part = s.add_text(m)
    for i in range(blocks.SEAL_AT * 2 + 17):
        s.text_delta(part, f"d{i} ")
    return s.id, s.info.created, list(source.read(s.id))


def _fill(store: SQLStore, sid: str, created: int, events: list[AnyEvent]) -> None:
    store.create_session(sid, created=created)
    for start in range(0, len(events), 50):  # several appends: tails, then merges
        store.append(sid, events[start:start + 50], start)


def _reads(store: SQLStore, sid: str) -> tuple[object, ...]:
    n = len(list(store.read(sid)))
    return (list(store.read(sid)), list(store.read(sid, 5, n - 5)),
            list(store.read_exact(sid, 130, 140)), list(store.read_runs(sid)),
            list(store.read_runs(sid, 3, n - 3, ids=False)),
            [r.event for r in store.read_all(session_id=sid)],
            store.find_event(store_event_id(store, sid, 7)))


def store_event_id(store: SQLStore, sid: str, seq: int) -> str:
    return next(iter(store.read(sid, seq, seq))).id


def _compare(make: Callable[[BlockCodec], SQLStore], bodies: Callable[[SQLStore], list[bytes]]
             ) -> None:
    sid, created, events = _events()
    counting = Counting()
    plain, swapped = make(blocks), make(cast(BlockCodec, counting))
    try:
        for store in (plain, swapped):
            _fill(store, sid, created, events)
        assert counting.calls["encode"] > 0
        assert counting.calls["sealed_rows"] > 0
        assert counting.calls["id_key"] > 0
        writes = sum(counting.calls.values())
        assert _reads(swapped, sid) == _reads(plain, sid)
        assert sum(counting.calls.values()) > writes  # the reads went through it too
        assert counting.calls["decode"] > 0
        assert counting.calls["decode_runs"] > 0
        before = counting.calls.copy()
        reports = [verify(store) for store in (plain, swapped)]
        assert all(r.ok for r in reports), reports
        assert reports[0].events == reports[1].events
        assert counting.calls["link_holds"] > before["link_holds"]
        assert counting.calls["typed_events"] > before["typed_events"]  # the deep walk
        assert bodies(swapped) == bodies(plain)  # the same bytes stored
    finally:
        plain.close()
        swapped.close()


def test_sqlite_store_with_a_swapped_codec_is_the_same_store(tmp_path: Path) -> None:
    def make(codec: BlockCodec) -> SQLStore:
        return SQLiteStore(str(tmp_path / f"{id(codec)}.db"), codec=codec)

    def bodies(store: SQLStore) -> list[bytes]:
        assert isinstance(store, SQLiteStore)
        with sqlite3.connect(store.path) as db:
            rows = db.execute("SELECT first_seq, last_seq, body FROM blocks "
                              "ORDER BY first_seq").fetchall()
        db.close()
        return [bytes(r[2]) for r in rows]

    _compare(make, bodies)


@pytest.fixture
def two_pg_urls(pg_url: str) -> list[str]:
    """Two fresh schemas of the throwaway cluster: the fixture's, and one beside it."""
    import psycopg  # noqa: PLC0415 - only once the cluster exists

    base, sep, schema = pg_url.partition("?options=-csearch_path%3D")
    assert sep, pg_url
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}b")
    return [pg_url, f"{base}{sep}{schema}b"]


def test_postgres_store_with_a_swapped_codec_is_the_same_store(two_pg_urls: list[str]) -> None:
    urls = iter(two_pg_urls)

    def make(codec: BlockCodec) -> SQLStore:
        return PostgresStore(next(urls), codec=codec)

    def bodies(store: SQLStore) -> list[bytes]:
        rows = store.recorder._rows("SELECT body FROM convlog_blocks ORDER BY first_seq", ())
        return [bytes(r[0]) for r in rows]

    _compare(make, bodies)


def _jsonl_reads(store: JSONLStore, sid: str) -> tuple[object, ...]:
    n = len(list(store.read(sid)))
    return (list(store.read(sid)), list(store.read(sid, 5, n - 5)),
            list(store.read(sid, 250, 270)),  # across the first member's end
            [r.event for r in store.read_all(session_id=sid)],
            store.find_event(next(iter(store.read(sid, 7, 7))).id))


def _files(root: Path) -> dict[str, bytes]:
    """Every session file's bytes (the lock, txn and format files aside)."""
    return {p.name: p.read_bytes() for p in sorted((root / "sessions").iterdir())}


def test_jsonl_store_with_a_swapped_member_codec_is_the_same_store(tmp_path: Path) -> None:
    sid, created, events = _events()
    counting = Counting(jsonl_blocks)
    plain = JSONLStore(str(tmp_path / "plain"))
    swapped = JSONLStore(str(tmp_path / "swapped"), codec=cast(MemberCodec, counting))
    try:
        for store in (plain, swapped):
            store.create_session(sid, created=created)
            for start in range(0, len(events), 50):  # several appends, several seals
                store.append(sid, events[start:start + 50], start)
        assert counting.calls["encode"] > 0  # sealed through it
        assert counting.calls["scan"] > 0
        # A fresh store object over the same files indexes the members through it too.
        reopened = JSONLStore(str(tmp_path / "swapped"), codec=cast(MemberCodec, counting))
        before = counting.calls.copy()
        assert _jsonl_reads(reopened, sid) == _jsonl_reads(plain, sid)
        assert counting.calls["decode"] > before["decode"]  # the members' ids indexed
        assert counting.calls["decode_range"] > before["decode_range"]
        assert counting.calls["payload"] > before["payload"]
        before = counting.calls.copy()
        reports = [verify(store) for store in (plain, reopened)]
        assert all(r.ok for r in reports), reports
        assert reports[0].events == reports[1].events == len(events)
        assert counting.calls["link_holds"] > before["link_holds"]
        assert counting.calls["decode"] > before["decode"]  # the deep walk
        before = counting.calls.copy()
        assert verify(reopened, deep=False).ok
        assert counting.calls["link_holds"] > before["link_holds"]
        reopened.close()
        assert _files(tmp_path / "swapped") == _files(tmp_path / "plain")  # the same bytes
    finally:
        plain.close()
        swapped.close()
