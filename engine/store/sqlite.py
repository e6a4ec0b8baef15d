"""``sqlite:///path.db``: the embedded default, on the standard library's sqlite3 in WAL mode.

Tables: ``sessions`` (lineage, version, head hash), ``blocks`` (events in the
compact block format of :mod:`engine.store.blocks`), ``log`` (global position ->
session, seq: one small row per event, what ``read_all`` walks) and ``ids`` (event
id -> position, for idempotency and ``find_event``). An append is one
``BEGIN IMMEDIATE`` transaction: SQLite's single writer lock serializes appends
across processes, so ``MAX(position) + 1`` inside it is a gapless global
position, and readers see whole appends or nothing.

Durability: ``sync`` commits every append with ``synchronous=FULL`` (the WAL is
fsynced before the append returns). ``batched`` keeps the write transaction open
for a window (:mod:`engine.store.batching`) and commits it whole.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.codec import decode_msgpack, encode_msgpack
from engine.errors import (
    SessionExists,
    StoreError,
    UnknownSession,
)
from engine.events import Event
from engine.store import blocks
from engine.store.base import (
    BATCHED,
    SYNC,
    IdTaken,
    Prepared,
    SessionInfo,
    check_chain,
)
from engine.store.batching import DEFAULT_BATCH_EVENTS, DEFAULT_BATCH_MS, GroupCommit
from engine.store.sql import SQLITE, SQLRecorder, Statements

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    created INTEGER NOT NULL,
    parent TEXT,
    fork_seq INTEGER,
    version INTEGER NOT NULL DEFAULT 0,
    sealed INTEGER NOT NULL DEFAULT 0,
    head BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blocks (
    sid INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    t_max INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, last_seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
    position INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS ids (id BLOB PRIMARY KEY, position INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    sid INTEGER NOT NULL,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, name, seq)
) WITHOUT ROWID;
"""

_IN_CHUNK = 500  # ids per "IN (...)" lookup (below SQLite's oldest variable limit)


class _Tail:
    """A session's row while this store holds the write lock, plus the events appended
    in this transaction whose rows are not written yet (see ``_materialize``)."""

    __slots__ = ("body", "fork_seq", "hashes", "head", "maxv", "sealed", "sid", "stored",
                 "times", "version")

    def __init__(self, sid: int, fork_seq: int | None, version: int, sealed: int,
                 head: bytes) -> None:
        self.sid = sid
        self.fork_seq = fork_seq
        self.version = version  # the row's version after the pending events
        self.sealed = sealed
        self.head = head
        self.stored = max(version, fork_seq or 0)  # the last seq whose block is written
        self.body: list[bytes] = []
        self.hashes: list[bytes] = []
        self.times: list[int] = []
        self.maxv = 0


class _WriteTx:
    """The write lock of a :class:`SQLiteStore`: its thread lock and the write
    transaction (``BEGIN IMMEDIATE``, or the open batched window). Left with an
    exception, or without a commit outside a window, it rolls back what the append
    wrote; a window's earlier appends stay (they commit with it)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        store = self.store
        store._lock.acquire()
        try:
            if not store._in_tx:
                store._db.execute("BEGIN IMMEDIATE")
                store._in_tx = True
        except BaseException:
            store._lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        store = self.store
        try:
            if store._in_tx and not store._window_open():
                store._rollback()
        finally:
            store._lock.release()


class SQLiteStore(SQLRecorder):
    _sql = Statements.of(SQLITE)

    def __init__(self, path: str, *, url: str | None = None, synchronous: str | None = None,
                 durability: str = SYNC, batch_ms: float = DEFAULT_BATCH_MS,
                 batch_events: int = DEFAULT_BATCH_EVENTS, key: bytes | None = None,
                 max_event_bytes: int | None = None) -> None:
        self._configure(url or f"sqlite:///{path}", durability=durability, key=key,
                        max_event_bytes=max_event_bytes)
        self.path = path
        if path != ":memory:":
            parent = Path(path).parent
            if not parent.is_dir():
                raise StoreError(f"cannot open {self.url}: directory {parent} does not exist")
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: the WAL is fsynced at every commit, so an acknowledged append survives
            # power loss. ``synchronous`` overrides it (benchmarks measure NORMAL/OFF).
            self._db.execute(f"PRAGMA synchronous={synchronous or 'FULL'}")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from None
        self._sids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._in_tx = False
        # Valid only while this connection holds the write transaction (nobody else can
        # write then): session rows, the last position, and the rows not yet written.
        self._tails: dict[str, _Tail] = {}
        self._last_pos: int | None = None
        self._dirty: dict[str, _Tail] = {}
        self._pend_ids: list[tuple[bytes, int]] = []
        self._pend_log: list[tuple[int, int, int]] = []
        self._pend_found: dict[str, tuple[str, int, int]] = {}
        self._write_lock = _WriteTx(self)  # reusable: its state is the store's
        self._group = (GroupCommit(self._commit_window, self._lock, max_ms=batch_ms,
                                   max_events=batch_events)
                       if durability == BATCHED else None)

    def _migrate(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            old = None
            if "meta" in tables:
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                old = int(row[0]) if row else None
            if old is not None and old > SCHEMA_VERSION:
                raise StoreError(f"{self.url} has schema {old}, newer than {SCHEMA_VERSION}")
            legacy = old == 1
            if legacy:  # schema 1: one msgpack row per event; rebuilt below
                db.execute("ALTER TABLE events RENAME TO events_v1")
                db.execute("ALTER TABLE sessions RENAME TO sessions_v1")
                db.execute("ALTER TABLE snapshots RENAME TO snapshots_v1")
                db.execute("DROP INDEX IF EXISTS events_id")
                db.execute("DROP INDEX IF EXISTS events_time")
            for statement in _SCHEMA.split(";"):  # executescript would COMMIT first
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if "chain" not in meta:
                db.execute("INSERT INTO meta VALUES ('chain', ?)", (self.chain.algorithm,))
                db.execute("INSERT INTO meta VALUES ('key', ?)", (self.chain.fingerprint(),))
                meta["chain"], meta["key"] = self.chain.algorithm, self.chain.fingerprint()
            self._refuse = check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if legacy:
            self._import_v1()

    def _import_v1(self) -> None:
        db = self._db
        sessions = db.execute(
            "SELECT sid, id, created, parent, fork_seq FROM sessions_v1 ORDER BY sid").fetchall()
        for _, sid_name, created, parent, fork_seq in sessions:
            self.create_session(sid_name, created=created, parent=parent, fork_seq=fork_seq)
        for old_sid, sid_name, *_ in sessions:
            rows = db.execute("SELECT body FROM events_v1 WHERE sid=? ORDER BY seq",
                              (old_sid,)).fetchall()
            events = [decode_msgpack(r[0]) for r in rows]
            for i in range(0, len(events), blocks.BLOCK_MAX):
                chunk = events[i:i + blocks.BLOCK_MAX]
                self.append(sid_name, chunk, chunk[0].seq - 1)
            for name, seq, body in db.execute(
                    "SELECT name, seq, body FROM snapshots_v1 WHERE sid=?", (old_sid,)):
                self.put_snapshot(sid_name, name, seq, body)
        self.flush()
        for table in ("events_v1", "sessions_v1", "snapshots_v1"):
            db.execute(f"DROP TABLE {table}")

    def flush(self) -> None:
        if self._group is not None:
            self._group.flush()

    def close(self) -> None:
        with self._lock:
            if self._group is not None:
                self._group.close()
            self._db.close()

    # ------------------------------------------------------------------ transactions

    def _commit_window(self) -> None:
        if self._in_tx:
            # A failure leaves the transaction open and the rows pending: retried later.
            self._materialize()
            self._db.execute("COMMIT")
            self._end_tx()

    def _end_tx(self) -> None:
        """The write transaction is over (committed or rolled back): forget the cache."""
        self._in_tx = False
        self._tails.clear()
        self._last_pos = None
        self._dirty.clear()
        self._pend_ids = []
        self._pend_log = []
        self._pend_found.clear()

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        finally:
            self._end_tx()

    def _window_open(self) -> bool:
        return self._group is not None and self._group.open

    def _materialize(self) -> None:
        """Write the transaction's pending rows (still uncommitted): ids and log with one
        ``executemany`` each, one block per session (merging the tail when due), one
        session update each. All or nothing (a savepoint); on failure they stay pending."""
        if not self._dirty:
            return
        db = self._db
        db.execute("SAVEPOINT rows")
        try:
            db.executemany("INSERT INTO ids VALUES (?, ?)", self._pend_ids)
            db.executemany("INSERT INTO log VALUES (?, ?, ?)", self._pend_log)
            sealed = [self._write_blocks(t) for t in self._dirty.values()]
            db.executemany("UPDATE sessions SET version=?, head=?, sealed=? WHERE sid=?", [
                (t.version, t.head, seal, t.sid)
                for t, seal in zip(self._dirty.values(), sealed, strict=True)])
            db.execute("RELEASE rows")
        except BaseException:
            db.execute("ROLLBACK TO rows")
            db.execute("RELEASE rows")
            raise
        for t, seal in zip(self._dirty.values(), sealed, strict=True):
            t.sealed = seal
            t.stored = t.version
            t.body, t.hashes, t.times, t.maxv = [], [], [], 0
        self._dirty.clear()
        self._pend_ids = []
        self._pend_log = []
        self._pend_found.clear()

    def _readable(self) -> None:
        """Reads on this connection see the transaction's pending rows: write them."""
        if self._dirty:
            with self._lock:
                self._materialize()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            self._readable()
            return self._db.execute(sql, params).fetchall()

    def _write_one(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._write_begin()
            try:
                self._db.execute(sql, params)
            except BaseException:
                self._write_end(ok=False)
                raise
            self._write_end(ok=True)

    # ------------------------------------------------------------------ sessions

    def _create_session(self, info: SessionInfo, genesis: bytes) -> None:
        with self._lock:
            self._write_begin()
            try:
                self._db.execute(
                    "INSERT INTO sessions (id, created, parent, fork_seq, sealed, head) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (info.id, info.created, info.parent, info.fork_seq, info.fork_seq or 0,
                     genesis),
                )
            except sqlite3.IntegrityError:
                self._write_end(ok=False)
                raise SessionExists(info.id) from None
            except BaseException:
                self._write_end(ok=False)
                raise
            self._write_end(ok=True)

    # ------------------------------------------------------------------ writing

    def _write_begin(self) -> None:
        """Open the write transaction (or join the batched window) plus a savepoint, so
        a failed append inside a window leaves the window's earlier appends intact."""
        if not self._in_tx:
            self._db.execute("BEGIN IMMEDIATE")
            self._in_tx = True
        self._db.execute("SAVEPOINT append")

    def _write_end(self, *, ok: bool) -> None:
        db = self._db
        if not ok:
            db.execute("ROLLBACK TO append")
            db.execute("RELEASE append")
            if not self._window_open():
                self._rollback()
            return
        db.execute("RELEASE append")
        if not self._window_open():
            db.execute("COMMIT")
            self._end_tx()

    def _head(self, session_id: str) -> tuple[int, bytes]:
        with self._lock:
            tail = self._tails.get(session_id)
            if tail is not None:
                return tail.version, tail.head
            row = self._db.execute("SELECT version, head FROM sessions WHERE id=?",
                                   (session_id,)).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        return int(row[0]), bytes(row[1])

    def _tail(self, session_id: str) -> _Tail:
        """The session's row, cached for the rest of the write transaction."""
        tail = self._tails.get(session_id)
        if tail is None:
            row = self._db.execute(
                "SELECT sid, fork_seq, version, sealed, head FROM sessions WHERE id=?",
                (session_id,)).fetchone()
            if row is None:
                raise UnknownSession(session_id)
            tail = self._tails[session_id] = _Tail(int(row[0]), row[1], int(row[2]),
                                                   int(row[3]), bytes(row[4]))
        return tail

    def _lookup(self, events: Sequence[Event]) -> dict[str, tuple[str, int, int]]:
        """id -> (session, seq, position) of the events already stored (or pending)."""
        found: dict[str, tuple[str, int, int]] = {}
        pending = self._pend_found
        keys: dict[bytes, str] = {}
        for e in events:
            hit = pending.get(e.id) if pending else None
            if hit is not None:
                found[e.id] = hit
            else:
                keys[blocks.id_key(e.id)] = e.id
        db = self._db
        if len(keys) == 1:
            (key, event_id), = keys.items()
            row = db.execute(self._sql.lookup_one, (key,)).fetchone()
            if row is not None:
                found[event_id] = (self._name(int(row[0])), int(row[1]), int(row[2]))
            return found
        todo = list(keys)
        for i in range(0, len(todo), _IN_CHUNK):
            chunk = todo[i:i + _IN_CHUNK]
            for key, sid, seq, pos in db.execute(
                    "SELECT i.id, l.sid, l.seq, l.position FROM ids i JOIN log l "
                    f"ON l.position = i.position WHERE i.id IN ({','.join('?' * len(chunk))})",
                    chunk):
                found[keys[bytes(key)]] = (self._name(int(sid)), int(seq), int(pos))
        return found

    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        tail = self._tail(session_id)
        return max(tail.version, tail.fork_seq or 0), tail.head

    def _early_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]] | None:
        # Outside an open window the transaction holds only this append, so the ids
        # index itself detects a stored id (like the original inserts) and a conflict
        # rolls everything back (``_insert``). Inside a window the ids are looked up
        # first: the window's rows must insert without a conflict at commit.
        return self._lookup(events) if self._window_open() else None

    def _stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        with self._lock:
            return self._lookup(events)

    def _insert(self, session_id: str, batch: Prepared) -> int:
        db = self._db
        tail = self._tails[session_id]
        eager = not self._window_open()
        # Stored bytes keep the event exactly (map order included); the chain
        # covers its canonical form, recomputed by verify.
        body = [encode_msgpack(e) for e in batch.events]
        keys = [blocks.id_key(e.id) for e in batch.events]
        if self._last_pos is None:
            self._last_pos = int(db.execute(
                "SELECT COALESCE(MAX(position), 0) FROM log").fetchone()[0])
        if eager:
            try:
                db.executemany("INSERT INTO ids VALUES (?, ?)", zip(
                    keys, range(self._last_pos + 1, self._last_pos + 1 + len(keys)),
                    strict=True))
            except sqlite3.IntegrityError:
                self._rollback()
                raise IdTaken from None
        # Nothing fails from here on (everything is computed): the rows are written
        # at commit, or before a read on this connection (``_materialize``).
        n = len(batch.events)
        pos0 = self._last_pos + 1
        sid = tail.sid
        pos = pos0
        if eager:  # the ids are in the table already
            self._pend_log += [(pos0 + i, sid, e.seq) for i, e in enumerate(batch.events)]
        else:
            pend_found, pend_ids, pend_log = self._pend_found, self._pend_ids, self._pend_log
            for e, key in zip(batch.events, keys, strict=True):
                pend_ids.append((key, pos))
                pend_log.append((pos, sid, e.seq))
                pend_found[e.id] = (session_id, e.seq, pos)
                pos += 1
        tail.body += body
        tail.hashes += batch.hashes
        tail.times += [e.time for e in batch.events]
        tail.maxv = max(tail.maxv, blocks.max_version(batch.events))
        tail.version = batch.first_seq - 1 + n
        tail.head = batch.head
        self._dirty[session_id] = tail
        self._last_pos = pos0 + n - 1
        if self._group is None:
            self._commit_window()  # a failure rolls back as the write lock is left
        else:
            self._group.added(n)
        return pos0

    def _write_blocks(self, tail: _Tail) -> int:
        """Write the session's pending events as one block; merge the uncompressed tail
        into compressed blocks once it reaches SEAL_AT events. Returns the new seal."""
        db = self._db
        sid, sealed, canon, hashes = tail.sid, tail.sealed, tail.body, tail.hashes
        end = tail.stored + len(canon)
        if end - sealed < blocks.SEAL_AT:
            db.execute("INSERT INTO blocks VALUES (?, ?, ?, ?, ?)", (
                sid, end, tail.stored + 1, max(tail.times),
                blocks.encode(canon, hashes, tail.maxv, compress=False)))
            return sealed
        tail_canon, tail_hashes, times = blocks.join_tail(db.execute(
            "SELECT t_max, body FROM blocks WHERE sid=? AND last_seq>? ORDER BY last_seq",
            (sid, sealed)).fetchall())
        db.execute("DELETE FROM blocks WHERE sid=? AND last_seq>?", (sid, sealed))
        db.executemany("INSERT INTO blocks VALUES (?, ?, ?, ?, ?)", [
            (sid, *row) for row in blocks.sealed_rows(
                sealed + 1, tail_canon + canon, tail_hashes + hashes, times + tail.times,
                tail.maxv)])
        return end

    # ------------------------------------------------------------------ reading

    def read_bodies(self, session_id: str, first: int, last: int) -> list[bytes]:
        """Raw block bodies holding the session's own events first..last (benchmarks)."""
        return [body for _, body in self._blocks(self._sid(session_id), first, last)]
