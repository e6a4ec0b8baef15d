"""The block codec is one swappable object: a SQL store built with another codec
writes, reads and verifies through it, byte for byte as with the default.

The codec here wraps :mod:`engine.store.blocks` and counts the calls it sees: a
store that kept calling the module by name would leave the counts at zero.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from engine.events import AnyEvent
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore, blocks
from engine.store.codec_protocol import BlockCodec
from engine.store.postgres import PostgresStore
from engine.store.sql import SQLStore
from engine.store.verify import verify


class Counting:
    """Delegates every member to ``engine.store.blocks``, counting each call."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        member = getattr(blocks, name)
        if not callable(member):
            return member  # a constant (SEAL_AT, BLOCK_MAX, TAIL)

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
