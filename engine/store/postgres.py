"""``postgresql://user@host:port/db``: many processes and machines on one database (psycopg 3).

Same tables and block format as SQLite (prefixed ``convlog_``), created or
migrated on open under an advisory lock. An append is one transaction that
locks the session row (``FOR UPDATE``: writers of one session queue, the
expected-version check is exact), writes the blocks, then takes the next
positions from the one-row ``convlog_position`` counter. That row stays locked
until commit, so positions become visible in order and without gaps: a reader
of ``position > p`` never sees ``p + 2`` before ``p + 1``. The price is that
commits of different sessions serialize on that row (the append itself does
not). Each commit sends ``NOTIFY convlog`` with the last position, which
``subscribe`` waits on (LISTEN) instead of polling.

Durability: ``sync`` returns after the commit is flushed to the WAL.
``batched`` sets ``synchronous_commit = off``: the server acknowledges before
the WAL flush and its WAL writer flushes every ``wal_writer_delay``; a server
crash can lose the last ``3 x wal_writer_delay`` (600 ms by default) of
commits, never part of one and never a commit before a kept one. A client that
dies loses nothing it was told is committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from engine.codec import encode_msgpack
from engine.errors import BadBatch, ConcurrencyError, SessionExists, StoreError, UnknownSession
from engine.events import Event
from engine.store import blocks
from engine.store.base import (
    BATCHED,
    SYNC,
    Appended,
    Expected,
    Record,
    SessionInfo,
    check_chain,
    check_id,
)
from engine.store.blockread import BlockReader
from engine.store.chain import Chain

SCHEMA_VERSION = 1
CHANNEL = "convlog"
_MIGRATION_LOCK = 0x636F6E766C6F67  # "convlog": serializes schema creation across clients

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS convlog_meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS convlog_sessions (
        sid bigserial PRIMARY KEY, id text NOT NULL UNIQUE, created bigint NOT NULL,
        parent text, fork_seq integer, version integer NOT NULL DEFAULT 0,
        sealed integer NOT NULL DEFAULT 0, head bytea NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS convlog_blocks (
        sid bigint NOT NULL, last_seq integer NOT NULL, first_seq integer NOT NULL,
        t_max bigint NOT NULL, body bytea NOT NULL, PRIMARY KEY (sid, last_seq))""",
    """CREATE TABLE IF NOT EXISTS convlog_log (
        position bigint PRIMARY KEY, sid bigint NOT NULL, seq integer NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS convlog_log_sid ON convlog_log (sid, seq)""",
    "CREATE TABLE IF NOT EXISTS convlog_ids (id bytea PRIMARY KEY, position bigint NOT NULL)",
    """CREATE TABLE IF NOT EXISTS convlog_snapshots (
        sid bigint NOT NULL, name text NOT NULL, seq integer NOT NULL, body bytea NOT NULL,
        PRIMARY KEY (sid, name, seq))""",
    """CREATE TABLE IF NOT EXISTS convlog_position (
        one boolean PRIMARY KEY DEFAULT true CHECK (one), last bigint NOT NULL)""",
    "INSERT INTO convlog_position VALUES (true, 0) ON CONFLICT DO NOTHING",
]

_PAGE = 64


class PostgresStore(BlockReader):
    SEQ_MAX = 1 << 30  # a bound that every integer seq column and parameter accepts

    def __init__(self, dsn: str, *, url: str | None = None, durability: str = SYNC,
                 key: bytes | None = None, max_event_bytes: int | None = None,
                 connect_timeout: float = 10) -> None:
        self.url = url or dsn
        self.dsn = dsn
        if durability not in (SYNC, BATCHED):
            raise StoreError(f"unknown durability {durability!r}; use sync or batched")
        self.durability = durability
        self.chain = Chain(key)
        if max_event_bytes is not None:
            self.max_event_bytes = max_event_bytes
        self._lock = threading.RLock()
        try:
            self._db = psycopg.connect(dsn, autocommit=True,
                                       connect_timeout=int(connect_timeout))
            if durability == BATCHED:
                self._db.execute("SET synchronous_commit = off")
            self._refuse = self._migrate()
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {self.url}: {exc}".strip()) from None
        self._sids: dict[str, int] = {}
        self._names: dict[int, str] = {}

    def _migrate(self) -> str | None:
        # The DDL below locks tables even when they exist (deadlocking with running
        # appends), so a store that is already current skips it.
        row = self._db.execute("SELECT to_regclass('convlog_meta')").fetchone()
        if row is not None and row[0] is not None:
            meta: dict[str, str] = dict(
                self._db.execute("SELECT key, value FROM convlog_meta").fetchall())
            if meta.get("schema") == str(SCHEMA_VERSION) and "chain" in meta:
                return check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            for statement in _SCHEMA:
                self._db.execute(statement)
            meta = dict(self._db.execute("SELECT key, value FROM convlog_meta").fetchall())
            old = int(meta.get("schema", SCHEMA_VERSION))
            if old > SCHEMA_VERSION:
                raise StoreError(f"{self.url} has schema {old}, newer than {SCHEMA_VERSION}")
            if "chain" not in meta:
                meta = {"schema": str(SCHEMA_VERSION), "chain": self.chain.algorithm,
                        "key": self.chain.fingerprint()}
                for k, v in meta.items():
                    self._db.execute("INSERT INTO convlog_meta VALUES (%s, %s)", (k, v))
        return check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ sessions

    def _query_sid(self, session_id: str) -> int | None:
        with self._lock:
            row = self._db.execute("SELECT sid FROM convlog_sessions WHERE id=%s",
                                   (session_id,)).fetchone()
        return None if row is None else int(row[0])

    def _query_name(self, sid: int) -> str:
        with self._lock:
            row = self._db.execute("SELECT id FROM convlog_sessions WHERE sid=%s",
                                   (sid,)).fetchone()
        assert row is not None
        return str(row[0])

    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        check_id("session", session_id)
        with self._lock:
            if parent is not None:
                self.session_info(parent)
            genesis = self._genesis(parent, fork_seq)
            try:
                self._db.execute(
                    "INSERT INTO convlog_sessions (id, created, parent, fork_seq, sealed, head) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (session_id, created, parent, fork_seq, fork_seq or 0, genesis))
            except pg_errors.UniqueViolation:
                raise SessionExists(session_id) from None
        return SessionInfo(session_id, created, parent, fork_seq)

    def session_info(self, session_id: str) -> SessionInfo:
        with self._lock:
            row = self._db.execute(
                "SELECT id, created, parent, fork_seq FROM convlog_sessions WHERE id=%s",
                (session_id,)).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        return SessionInfo(row[0], row[1], row[2], row[3])

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            rows = self._db.execute("SELECT id, created, parent, fork_seq FROM convlog_sessions "
                                    "ORDER BY created, id").fetchall()
        return [SessionInfo(r[0], r[1], r[2], r[3]) for r in rows]

    # ------------------------------------------------------------------ writing

    def _head(self, session_id: str) -> tuple[int, bytes]:
        with self._lock:
            row = self._db.execute("SELECT version, head FROM convlog_sessions WHERE id=%s",
                                   (session_id,)).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        return int(row[0]), bytes(row[1])

    def _lookup(self, events: Sequence[Event]) -> dict[str, tuple[str, int, int]]:
        keys = [blocks.id_key(e.id) for e in events]
        by_key = {blocks.id_key(e.id): e.id for e in events}
        with self._lock:
            rows = self._db.execute(
                "SELECT i.id, l.sid, l.seq, l.position FROM convlog_ids i JOIN convlog_log l "
                "ON l.position = i.position WHERE i.id = ANY(%s)", (keys,)).fetchall()
        return {by_key[bytes(k)]: (self._name(int(s)), int(q), int(p)) for k, s, q, p in rows}

    def _append(self, session_id: str, events: Sequence[Event], expected: Expected) -> Appended:
        if self._refuse:
            raise StoreError(self._refuse)
        with self._lock:
            try:
                return self._append_tx(session_id, events, expected)
            except pg_errors.UniqueViolation:
                # The transaction is gone; decide from what is stored.
                retried = self._classify(session_id, events, self._lookup(events))
                if retried is not None:
                    return retried
                raise StoreError("id index conflict without a stored id") from None
            except psycopg.OperationalError as exc:
                raise StoreError(f"append to {session_id} failed: {exc}") from None

    def _append_tx(self, session_id: str, events: Sequence[Event],
                   expected: Expected) -> Appended:
        db = self._db
        with db.transaction():
            row = db.execute("SELECT sid, fork_seq, version, sealed, head FROM convlog_sessions "
                             "WHERE id=%s FOR UPDATE", (session_id,)).fetchone()
            if row is None:
                raise UnknownSession(session_id)
            sid, fork_seq, version, sealed, head = row
            actual = max(version, fork_seq or 0)
            try:
                self._check_expected(session_id, expected, actual)
                batch = self._prepare(session_id, events, actual, bytes(head))
            except (ConcurrencyError, BadBatch):
                # A retry of a batch that did land is neither a conflict nor out of order.
                retried = self._classify(session_id, events, self._lookup(events))
                if retried is not None:
                    return retried
                raise
            body = [encode_msgpack(e) for e in batch.events]
            sealed = self._write_blocks(sid, batch.events, body, batch.hashes, actual=actual,
                                        sealed=sealed)
            n = len(batch.events)
            first = batch.first_seq
            # Last: the counter row lock, held until commit (see the module doc).
            last = int(db.execute("UPDATE convlog_position SET last = last + %s RETURNING last",
                                  (n,)).fetchone()[0])  # type: ignore[index]
            positions = range(last - n + 1, last + 1)
            with db.cursor() as cur:
                cur.executemany("INSERT INTO convlog_ids VALUES (%s, %s)", [
                    (blocks.id_key(e.id), p)
                    for e, p in zip(batch.events, positions, strict=True)])
                cur.executemany("INSERT INTO convlog_log VALUES (%s, %s, %s)",
                                [(p, sid, first + i) for i, p in enumerate(positions)])
            db.execute("UPDATE convlog_sessions SET version=%s, head=%s, sealed=%s WHERE sid=%s",
                       (actual + n, batch.head, sealed, sid))
            db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(last)))
        return Appended(session_id, tuple(range(first, first + n)), tuple(positions))

    def _write_blocks(self, sid: int, events: Sequence[Event], body: Sequence[bytes],
                      hashes: Sequence[bytes], *, actual: int, sealed: int) -> int:
        db = self._db
        maxv = blocks.max_version(events)
        if actual + len(events) - sealed < blocks.SEAL_AT:
            db.execute("INSERT INTO convlog_blocks VALUES (%s, %s, %s, %s, %s)", (
                sid, actual + len(events), actual + 1, max(e.time for e in events),
                blocks.encode(body, hashes, maxv, compress=False)))
            return sealed
        tail: list[bytes] = []
        tail_hashes: list[bytes] = []
        times: list[int] = []
        for t_max, blob in db.execute("SELECT t_max, body FROM convlog_blocks WHERE sid=%s AND "
                                      "last_seq>%s ORDER BY last_seq", (sid, sealed)).fetchall():
            c, h = blocks.split(bytes(blob))
            tail += c
            tail_hashes += h
            times += [t_max] * len(c)
        db.execute("DELETE FROM convlog_blocks WHERE sid=%s AND last_seq>%s", (sid, sealed))
        all_body = tail + list(body)
        all_hashes = tail_hashes + list(hashes)
        times += [e.time for e in events]
        first = sealed + 1
        with db.cursor() as cur:
            cur.executemany("INSERT INTO convlog_blocks VALUES (%s, %s, %s, %s, %s)", [
                (sid, first + i + len(all_body[i:i + blocks.BLOCK_MAX]) - 1, first + i,
                 max(times[i:i + blocks.BLOCK_MAX]),
                 blocks.encode(all_body[i:i + blocks.BLOCK_MAX],
                               all_hashes[i:i + blocks.BLOCK_MAX], max(maxv, 1), compress=True))
                for i in range(0, len(all_body), blocks.BLOCK_MAX)])
        return actual + len(events)

    # ------------------------------------------------------------------ reading

    def _own_version(self, session_id: str) -> int:
        return self._head(session_id)[0]

    def _block_rows(self, sid: int, first: int, last: int) -> Iterator[tuple[int, int, bytes]]:
        """(first seq, last seq, body) of the blocks that hold seqs first..last: the
        bound on last_seq (the block holding ``last``) ends the index scan there."""
        lo = first
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT first_seq, last_seq, body FROM convlog_blocks WHERE sid=%(sid)s AND "
                    "last_seq>=%(lo)s AND last_seq<=COALESCE((SELECT last_seq FROM "
                    "convlog_blocks WHERE sid=%(sid)s AND last_seq>=%(last)s ORDER BY last_seq "
                    "LIMIT 1), %(last)s) ORDER BY last_seq LIMIT %(page)s",
                    {"sid": sid, "lo": lo, "last": last, "page": _PAGE}).fetchall()
            for first_seq, last_seq, body in rows:
                yield first_seq, last_seq, bytes(body)
            if len(rows) < _PAGE:
                return
            lo = rows[-1][1] + 1

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT l.sid, l.seq FROM convlog_ids i JOIN convlog_log l "
                "ON l.position = i.position WHERE i.id = %s", (blocks.id_key(event_id),)
            ).fetchone()
        return None if row is None else (self._name(int(row[0])), int(row[1]))

    def _bodies_after_time(self, sid: int, first: int, time_ms: int) -> list[bytes]:
        with self._lock:
            return [bytes(body) for (body,) in self._db.execute(
                "SELECT body FROM convlog_blocks WHERE sid=%s AND last_seq>=%s AND t_max>%s "
                "ORDER BY last_seq", (sid, first, time_ms)).fetchall()]

    def last_position(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(position), 0) FROM convlog_log"
                                   ).fetchone()
        return int(row[0]) if row else 0

    def _log_page(self, after: int, sid: int | None, page: int) -> list[tuple[int, int, int]]:
        with self._lock:
            if sid is None:
                return self._db.execute(
                    "SELECT position, sid, seq FROM convlog_log WHERE position>%s "
                    "ORDER BY position LIMIT %s", (after, page)).fetchall()
            return self._db.execute(
                "SELECT position, sid, seq FROM convlog_log WHERE position>%s AND "
                "sid=%s ORDER BY position LIMIT %s", (after, sid, page)).fetchall()

    def _positions(self, sid: int) -> dict[int, int]:
        with self._lock:
            return dict(self._db.execute(
                "SELECT seq, position FROM convlog_log WHERE sid=%s", (sid,)).fetchall())

    # ------------------------------------------------------------------ live

    def subscribe(self, after: int = 0, *, session_id: str | None = None,
                  idle_timeout: float | None = None, poll: float = 1.0,
                  stop: Callable[[], bool] | None = None) -> Iterator[Record]:
        """The backlog, then events as NOTIFY announces their commit (``poll`` is
        only the fallback re-check interval)."""
        listener = psycopg.connect(self.dsn, autocommit=True)
        try:
            listener.execute(f"LISTEN {CHANNEL}")  # before the backlog: no commit is missed
            self._listener = listener
            yield from super().subscribe(after, session_id=session_id,
                                         idle_timeout=idle_timeout, poll=poll, stop=stop)
        finally:
            listener.close()

    def _wait(self, position: int, timeout: float) -> None:
        listener: Any = getattr(self, "_listener", None)
        if listener is None or listener.closed:
            super()._wait(position, timeout)
            return
        for _ in listener.notifies(timeout=timeout, stop_after=1):
            break

    # ------------------------------------------------------------------ snapshots

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        sid = self._sid(session_id)
        with self._lock:
            self._db.execute(
                "INSERT INTO convlog_snapshots VALUES (%s, %s, %s, %s) ON CONFLICT "
                "(sid, name, seq) DO UPDATE SET body = EXCLUDED.body", (sid, name, seq, data))

    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        sid = self._sid(session_id)
        with self._lock:
            row = self._db.execute(
                "SELECT seq, body FROM convlog_snapshots WHERE sid=%s AND name=%s AND seq<=%s "
                "ORDER BY seq DESC LIMIT 1", (sid, name, max_seq)).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))
