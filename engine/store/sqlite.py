"""``sqlite:///path.db``: the embedded default, on the standard library's sqlite3 in WAL mode.

Tables (schema 4): ``sessions`` (lineage, version, head hash), ``blocks`` (events
in the compact block format of :mod:`engine.store.blocks`), and two indexes kept
as *ranges* instead of a row per event:

- ``log``: ``(first position, sid, first seq, count)``. An append that continues
  the store's last range (same session, next seq) adds to its count, so a
  streamed session is one row until another session appends in between.
- ``ids``: runs of event ids. :class:`engine.ids.EventIds` makes UUIDv7 ids whose
  low 64 bits count up by one, so a run is ``(low 64 bits of its first id as a
  signed integer, count, first position)``. The high bits (time and a counter)
  are not stored: a run only says "an event whose id ends like this may be at this
  position", and every hit is confirmed against the stored event's id. Runs never
  overlap; an id that falls inside another run, or that is no lowercase UUID,
  gets an exact row in ``names`` (its 16-byte or text key -> position).

An append is one ``BEGIN IMMEDIATE`` transaction: SQLite's single writer lock
serializes appends across processes, so the last range's end + 1 inside it is a
gapless global position, and readers see whole appends or nothing.

Schema 4 has schema 3's tables; its number says that sealed blocks may hold packed
payload format 2 (:mod:`engine.store.packed`), which the releases of schema 3 before
it cannot all read: they refuse a schema 4 file as newer instead of taking those
blocks for damage. Older files are read as they are and migrated by this release's
first write (any write may seal a block), in one transaction; a read never changes
the file. Schema 3: the number is raised. Schema 2 (a ``log`` and an ``ids`` row
per event) is read through range indexes built in the connection's temp schema,
which shadows the old tables for it alone, and its migration rebuilds the two
indexes as ranges; the blocks and session heads stay byte for byte (format 2
sealed blocks stay readable, see blocks). A current file opens with a read only.

Durability: ``sync`` commits every append with ``synchronous=FULL`` (the WAL is
fsynced before the append returns). ``batched`` keeps the write transaction open
for a window (:mod:`engine.store.batching`) and commits it whole.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from engine.codec import encode_msgpack
from engine.errors import (
    CorruptLog,
    ReadOnlyStore,
    SessionExists,
    StoreBusy,
    StoreError,
    StoreUnreadable,
    UnknownSession,
)
from engine.events import Event
from engine.store import blocks
from engine.store.base import (
    BATCHED,
    SYNC,
    Prepared,
    SessionInfo,
    check_chain,
    newer_store,
)
from engine.store.batching import DEFAULT_BATCH_EVENTS, DEFAULT_BATCH_MS, GroupCommit
from engine.store.blockread import Range, hash_before
from engine.store.chain import Chain
from engine.store.codec_protocol import BlockCodec
from engine.store.sql import SQLITE, SQLReader, SQLRecorder, SQLStore, Statements, seal_problem

# 4: sealed blocks may hold packed payload format 2 (same tables as 3; see the module
# doc). Raised by the first write, so that a release of schema 3 refuses the file.
SCHEMA_VERSION = 4
# The page size of new files (an existing file keeps its own). Every table and index
# costs at least a page, and a schema 4 file has 12 of them: at SQLite's default
# 4 KiB that is 48 KiB before any event, 0.7x the text of a 50-turn session. At 2 KiB
# a 50-turn session of whole messages takes 0.69x its text instead of 1.09x (streamed,
# flushed every turn: 1.33x, was 1.69x), at the same read and append speed (measured
# in docs/performance.md, "Verify on JSONL, small SQLite stores, opens"); 1 KiB pages
# cost 15-20% of append CPU.
PAGE_SIZE = 2048

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
-- A rowid table: SQLite keeps a blob of up to about 4 KB inside a table leaf, but
-- spills anything over about 1 KB of a WITHOUT ROWID row to a mostly empty overflow
-- page (measured: 2.3x the text for a streamed session with 128-event blocks, 1.25x
-- as a rowid table).
CREATE TABLE IF NOT EXISTS blocks (
    sid INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    t_max INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, last_seq)
);
CREATE TABLE IF NOT EXISTS log (
    position INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS log_sid ON log (sid, seq);
CREATE TABLE IF NOT EXISTS ids (
    lo INTEGER PRIMARY KEY,
    count INTEGER NOT NULL,
    position INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ids_position ON ids (position);
CREATE TABLE IF NOT EXISTS names (id BLOB PRIMARY KEY, position INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    sid INTEGER NOT NULL,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, name, seq)
) WITHOUT ROWID;
"""

_IN_CHUNK = 500  # keys per "IN (...)" lookup (below SQLite's oldest variable limit)
_CLUSTER = 1 << 16  # id keys closer than this are looked up with one range query

_LAST_RANGE = "SELECT position, sid, seq, count FROM log ORDER BY position DESC LIMIT 1"
_LAST_RUN = "SELECT lo, count, position FROM ids ORDER BY position DESC LIMIT 1"
# The runs that may hold a key in lo1..lo2: runs never overlap, so the one starting at
# or before lo1 and those starting inside.
_RUNS = ("SELECT lo, count, position FROM ids WHERE lo >= COALESCE((SELECT lo FROM ids "
         "WHERE lo <= ?1 ORDER BY lo DESC LIMIT 1), ?1) AND lo <= ?2 ORDER BY lo")
_AT_POSITION = ("SELECT sid, seq + (?1 - position), position + count - 1 FROM log "
                "WHERE position <= ?1 ORDER BY position DESC LIMIT 1")


def _low(key: bytes) -> int:
    """The run key of a 16-byte id key: its low 64 bits, as SQLite's signed integer."""
    return int.from_bytes(key[8:], "big", signed=True)


class _Tail:
    """A session's row while this store holds the write lock, plus the events appended
    in this transaction whose rows are not written yet (see ``_materialize``)."""

    __slots__ = ("body", "fork_seq", "hashes", "head", "maxv", "name", "sealed", "sid",
                 "stored", "times", "version")

    def __init__(self, name: str, sid: int, *, fork_seq: int | None, version: int,
                 sealed: int, head: bytes) -> None:
        self.name = name
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


class _Ranges:
    """The two range indexes as this write transaction sees them: the store's last log
    range and id run (the stored rows, grown by pending appends) and the new ones not
    written yet. Valid only while the write transaction is held."""

    __slots__ = ("exact", "log", "log_base", "log_count", "log_new", "run", "run_base",
                 "run_count", "run_new")

    def __init__(self, db: sqlite3.Connection) -> None:
        row = db.execute(_LAST_RANGE).fetchone()
        # The last range, [position, sid, seq, count]; the stored one and its stored count.
        self.log: list[int] | None = None if row is None else [int(v) for v in row]
        self.log_base = self.log
        self.log_count = 0 if row is None else int(row[3])
        self.log_new: list[list[int]] = []
        row = db.execute(_LAST_RUN).fetchone()
        # The run of the last position's id, [lo, count, first position], likewise.
        self.run: list[int] | None = None if row is None else [int(v) for v in row]
        self.run_base = self.run
        self.run_count = 0 if row is None else int(row[1])
        self.run_new: list[list[int]] = []
        self.exact: list[tuple[bytes, int]] = []

    @property
    def last_position(self) -> int:
        return 0 if self.log is None else self.log[0] + self.log[3] - 1

    def covers(self, lo: int) -> bool:
        """Whether a run not written yet (new or grown) holds run key ``lo``."""
        runs = self.run_new
        if self.run_base is not None and self.run_base[1] != self.run_count:
            runs = [*runs, self.run_base]
        return any(r[0] <= lo < r[0] + r[1] for r in runs)

    def add(self, sid: int, seq: int, pos: int, n: int) -> None:
        r = self.log
        if r is not None and r[1] == sid and r[0] + r[3] == pos and r[2] + r[3] == seq:
            r[3] += n
        else:
            self.log = [pos, sid, seq, n]
            self.log_new.append(self.log)

    def add_id(self, key: bytes, pos: int, covered: set[bytes]) -> None:
        if len(key) != 16 or key in covered:
            self.exact.append((key, pos))
            return
        lo = _low(key)
        r = self.run
        if r is not None and r[2] + r[1] == pos and r[0] + r[1] == lo:
            r[1] += 1
        else:
            self.run = [lo, 1, pos]
            self.run_new.append(self.run)

    def write(self, db: sqlite3.Connection) -> None:
        base = self.log_base
        if base is not None and base[3] != self.log_count:
            db.execute("UPDATE log SET count=? WHERE position=?", (base[3], base[0]))
        db.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", self.log_new)
        run = self.run_base
        if run is not None and run[1] != self.run_count:
            db.execute("UPDATE ids SET count=? WHERE lo=?", (run[1], run[0]))
        db.executemany("INSERT INTO ids VALUES (?, ?, ?)", self.run_new)
        db.executemany("INSERT INTO names VALUES (?, ?)", self.exact)

    def written(self) -> None:
        """The pending rows are in the tables now."""
        self.log_base, self.run_base = self.log, self.run
        self.log_count = 0 if self.log is None else self.log[3]
        self.run_count = 0 if self.run is None else self.run[1]
        self.log_new, self.run_new, self.exact = [], [], []


# How long a writer waits for another one's write lock before StoreBusy.
BUSY_TIMEOUT_MS = 30_000


def _begin_immediate(store: SQLiteRecorder) -> None:
    """``BEGIN IMMEDIATE``: SQLite's write lock, or StoreBusy once the wait is over
    (a lock held by another writer is no damage: nothing was written)."""
    try:
        store._db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreBusy(f"{store.url}: another writer held the write lock for over "
                            f"{BUSY_TIMEOUT_MS / 1000:g} s (a long batched window or a bulk "
                            "import); nothing was written, try again") from None
        raise


class _WriteTx:
    """The write lock of a :class:`SQLiteRecorder`: its thread lock and the write
    transaction (``BEGIN IMMEDIATE``, or the open batched window). Left with an
    exception, or without a commit outside a window, it rolls back what the append
    wrote; a window's earlier appends stay (they commit with it)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteRecorder) -> None:
        self.store = store

    def __enter__(self) -> None:
        store = self.store
        store._lock.acquire()
        try:
            if not store._in_tx:
                store._current_schema()
                _begin_immediate(store)
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


class SQLiteStore(SQLStore):
    """``sqlite:///path.db``: the pipeline over a :class:`SQLiteRecorder`, verified by
    a :class:`SQLiteReader`."""

    recorder: SQLiteRecorder

    def __init__(self, path: str, *, url: str | None = None, synchronous: str | None = None,
                 durability: str = SYNC, batch_ms: float = DEFAULT_BATCH_MS,
                 batch_events: int = DEFAULT_BATCH_EVENTS, key: bytes | None = None,
                 max_event_bytes: int | None = None, read_only: bool = False,
                 codec: BlockCodec = blocks) -> None:
        self._configure(url or f"sqlite:///{path}", durability=durability, key=key,
                        max_event_bytes=max_event_bytes)
        recorder = SQLiteRecorder(path, url=self.url, chain=self.chain,
                                  synchronous=synchronous, durability=self.durability,
                                  batch_ms=batch_ms, batch_events=batch_events,
                                  read_only=read_only, codec=codec)
        self._compose_sql(recorder, SQLiteReader(recorder, self.chain))
        self.path = path
        self.read_only = recorder.read_only


class SQLiteRecorder(SQLRecorder):
    """One SQLite file's tables: the write transaction and its range indexes, blocks
    written and sealed, reads (see the module doc); nothing of the append pipeline."""

    _sql = Statements.of(SQLITE)

    def __init__(self, path: str, *, url: str, chain: Chain, synchronous: str | None,
                 durability: str, batch_ms: float, batch_events: int,
                 read_only: bool, codec: BlockCodec = blocks) -> None:
        self.url, self.chain, self.codec = url, chain, codec
        self.path = path
        if path != ":memory:":
            parent = Path(path).parent
            if not parent.is_dir():
                raise StoreError(f"cannot open {self.url}: directory {parent} does not exist")
        self._lock = threading.RLock()
        # A file this process may not write (or whose directory it may not write, so
        # no journal can be made) is opened read-only: reads work, writes are refused.
        # ``read_only``: the caller only reads (the read commands). A read-write
        # connection that closes last checkpoints a crashed writer's WAL into the
        # main file, so a read would change the store's bytes (issue 27 item 9).
        self.read_only = path != ":memory:" and (read_only or not _writable(Path(path)))
        try:
            self._db = (_connect_read_only(path, self.url) if self.read_only else
                        sqlite3.connect(path, isolation_level=None, check_same_thread=False))
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # FULL: the WAL is fsynced at every commit, so an acknowledged append survives
            # power loss. ``synchronous`` overrides it (benchmarks measure NORMAL/OFF).
            self._db.execute(f"PRAGMA synchronous={synchronous or 'FULL'}")
            self._stale_schema = False
            self._open_schema()
        except sqlite3.DatabaseError as exc:
            if path != ":memory:" and not os.path.exists(path):
                raise StoreError(f"cannot create {self.url}: {exc}") from None
            raise StoreError(f"cannot open {self.url}: {exc}") from None
        self._sids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._in_tx = False
        # Valid only while this connection holds the write transaction (nobody else can
        # write then): session rows, the last position, and the rows not yet written.
        self._tails: dict[str, _Tail] = {}
        self._ranges: _Ranges | None = None
        self._dirty: dict[str, _Tail] = {}
        self._pend_found: dict[str, tuple[str, int, int]] = {}
        # Keys of the batch being appended that fall inside a stored run (see _lookup).
        self._covered: set[bytes] = set()
        self._write_lock = _WriteTx(self)  # reusable: its state is the recorder's
        self._group = (GroupCommit(self._commit_window, self._lock, max_ms=batch_ms,
                                   max_events=batch_events)
                       if durability == BATCHED else None)


    def _open_schema(self) -> None:
        """Open without writing when the file needs no change: a current schema is
        only read (no write transaction per open); a schema 2 or 3 store is read as
        it is (schema 2 through range indexes built in this connection's memory) and
        migrated by its first write (:meth:`_current_schema`), so reading it leaves
        the file as the release before wrote it. A new file gets the schema."""
        db = self._db
        db.execute("BEGIN")  # one consistent read of the schema and its version
        try:
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            meta = (dict(db.execute("SELECT key, value FROM meta").fetchall())
                    if "meta" in tables else {})
            if tables and "schema" not in meta:  # another program's database: never touched
                raise StoreUnreadable(f"{self.url}: {self.path} is not a convlog sqlite "
                                      f"store (it holds other tables: "
                                      f"{', '.join(sorted(tables)[:5])})")
            try:
                old = int(meta["schema"]) if "schema" in meta else None
                if old is not None and old < SCHEMA_VERSION and "chain" in meta:
                    self._stale_schema = _legacy_read(db, old, meta, tables)
            except (ValueError, TypeError, AssertionError) as exc:  # damaged rows
                raise StoreError(f"cannot open {self.url}: unreadable schema or index: "
                                 f"{type(exc).__name__}: {exc}") from None
        finally:
            db.execute("COMMIT")
        if old is not None and old > SCHEMA_VERSION:
            raise newer_store(self.url, old, SCHEMA_VERSION)
        if (old == SCHEMA_VERSION or self._stale_schema) and "chain" in meta:
            self.refuse = check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)
            return
        self._refuse_read_only()
        self._migrate()

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"cannot write {self.url}: the store is read-only "
                                f"(no write access to {self.path} or its directory)")

    def _current_schema(self) -> None:
        """Before the first write of a store opened at schema 2 or 3: migrate it (at
        2, the in-memory range indexes give way to the stored ones). Every write
        passes here: a read-only store refuses it before any transaction begins."""
        self._refuse_read_only()
        if not self._stale_schema:
            return
        # A newer release may have migrated the file since it was opened: refused
        # before the in-memory indexes that reads still use are dropped. The store
        # stays stale until a migration succeeds, so every later write is refused too.
        row = self._db.execute("SELECT value FROM main.meta WHERE key='schema'").fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise newer_store(self.url, row[0], SCHEMA_VERSION)
        for name in ("log", "ids", "names"):
            self._db.execute(f"DROP TABLE IF EXISTS temp.{name}")
        self._migrate()
        self._stale_schema = False

    def _migrate(self) -> None:
        db = self._db
        if PAGE_SIZE and not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file: before its first page
        _set_wal(db)
        _begin_immediate(self)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            old = None
            if "meta" in tables:
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                old = int(row[0]) if row else None
            if old is not None and old > SCHEMA_VERSION:
                raise newer_store(self.url, old, SCHEMA_VERSION)
            if old in (1, 2):
                _migrate_old(self.url, db, old)
            else:
                _create_tables(db)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if "chain" not in meta:
                db.execute("INSERT INTO meta VALUES ('chain', ?)", (self.chain.algorithm,))
                db.execute("INSERT INTO meta VALUES ('key', ?)", (self.chain.fingerprint(),))
                meta["chain"], meta["key"] = self.chain.algorithm, self.chain.fingerprint()
            self.refuse = check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def migrate(self) -> bool:
        with self._lock:
            if not self._stale_schema:
                return False
            self._current_schema()  # (refuses a read-only store)
            return True

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
            # A batched window commits its events as tail blocks first and seals after,
            # in a transaction of its own: sealing recompresses up to BLOCK_MAX events
            # (measured 0.1-0.8 s with 200 kB events), and until the window's COMMIT
            # its acknowledged events are what a crash loses (issue 27 item 4).
            batched = self._group is not None
            due = self._materialize(seal=not batched)
            self._db.execute("COMMIT")
            self._end_tx()
            if due:
                self._seal_due(due)

    def _seal_due(self, names: list[str]) -> None:
        """Merge the tails of these sessions into sealed blocks, in one transaction
        after the window that filled them committed. A crash before it leaves a long
        tail, which the next append (or this, next time) merges."""
        db = self._db
        _begin_immediate(self)
        self._in_tx = True
        try:
            for name in names:
                tail = self._tail(name)
                if tail.stored - tail.sealed < self.codec.SEAL_AT:
                    continue  # (another writer merged it meanwhile)
                seal = self._write_blocks(tail)
                db.execute("UPDATE sessions SET sealed=? WHERE sid=?", (seal, tail.sid))
            db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._end_tx()

    def _end_tx(self) -> None:
        """The write transaction is over (committed or rolled back): forget the cache."""
        self._in_tx = False
        self._tails.clear()
        self._ranges = None
        self._dirty.clear()
        self._pend_found.clear()

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        finally:
            self._end_tx()

    def _window_open(self) -> bool:
        return self._group is not None and self._group.open


    def _materialize(self, *, seal: bool = True) -> list[str]:
        """Write the transaction's pending rows (still uncommitted): the grown and new
        ranges, one block per session (merging the tail when due, unless ``seal`` is
        off), one session update each. All or nothing (a savepoint); on failure they
        stay pending. Returns the sessions whose merge is due but was left out."""
        if not self._dirty:
            return []
        db = self._db
        ranges = self._ranges
        assert ranges is not None
        seal_at = self.codec.SEAL_AT
        due = [] if seal else [t.name for t in self._dirty.values()
                               if t.stored + len(t.body) - t.sealed >= seal_at]
        db.execute("SAVEPOINT rows")
        try:
            ranges.write(db)
            sealed = [self._write_blocks(t, seal=seal) for t in self._dirty.values()]
            db.executemany("UPDATE sessions SET version=?, head=?, sealed=? WHERE sid=?", [
                (t.version, t.head, mark, t.sid)
                for t, mark in zip(self._dirty.values(), sealed, strict=True)])
            db.execute("RELEASE rows")
        except BaseException:
            db.execute("ROLLBACK TO rows")
            db.execute("RELEASE rows")
            raise
        ranges.written()
        for t, mark in zip(self._dirty.values(), sealed, strict=True):
            t.sealed = mark
            t.stored = t.version
            t.body, t.hashes, t.times, t.maxv = [], [], [], 0
        self._dirty.clear()
        self._pend_found.clear()
        return due

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

    def lock(self) -> _WriteTx:
        return self._write_lock

    def create(self, info: SessionInfo, genesis: bytes) -> None:
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
            self._current_schema()
            _begin_immediate(self)
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

    def row_head(self, session_id: str) -> tuple[int, bytes]:
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
            tail = self._tails[session_id] = _Tail(
                session_id, int(row[0]), fork_seq=row[1], version=int(row[2]),
                sealed=int(row[3]), head=bytes(row[4]))
        return tail

    def _lookup(self, events: Sequence[Event]) -> dict[str, tuple[str, int, int]]:
        """id -> (session, seq, position) of the events already stored (or pending).
        Also sets ``_covered``: the keys that a run holds for another id (their events
        get exact rows)."""
        found: dict[str, tuple[str, int, int]] = {}
        pending = self._pend_found
        keys: dict[bytes, str] = {}
        id_key = self.codec.id_key
        for e in events:
            hit = pending.get(e.id) if pending else None
            if hit is not None:
                found[e.id] = hit
            else:
                keys[id_key(e.id)] = e.id
        self._covered = covered = set[bytes]()
        if not keys:
            return found
        exact, maybe = self._candidates(keys)
        ranges = self._ranges
        if ranges is not None:  # runs of this transaction not written yet
            covered.update(k for k in keys if len(k) == 16 and k not in maybe
                           and ranges.covers(_low(k)))
        for key, pos in exact.items():
            where = self._at_position(pos)
            if where is not None:
                found[keys[key]] = (self._name(where[0]), where[1], pos)
        blocks_seen: dict[tuple[int, int], tuple[int, list[str]]] = {}
        for key, pos in maybe.items():
            covered.add(key)
            where = self._at_position(pos)
            if where is not None and self._id_at(*where, blocks_seen) == keys[key]:
                found[keys[key]] = (self._name(where[0]), where[1], pos)
        return found

    def _candidates(self, keys: dict[bytes, str]) -> tuple[dict[bytes, int], dict[bytes, int]]:
        """(exact rows: key -> position, runs: key -> position to confirm) of some keys."""
        db = self._db
        exact: dict[bytes, int] = {}
        todo = list(keys)
        for i in range(0, len(todo), _IN_CHUNK):
            chunk = todo[i:i + _IN_CHUNK]
            for key, pos in db.execute(
                    f"SELECT id, position FROM names WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk):
                exact[bytes(key)] = int(pos)
        maybe: dict[bytes, int] = {}
        lows = sorted((_low(k), k) for k in todo if len(k) == 16 and k not in exact)
        i = 0
        while i < len(lows):  # one range query per cluster of nearby keys
            j = i + 1
            while j < len(lows) and lows[j][0] - lows[j - 1][0] < _CLUSTER:
                j += 1
            runs = db.execute(_RUNS, (lows[i][0], lows[j - 1][0])).fetchall()
            r = 0
            for lo, key in lows[i:j]:
                while r < len(runs) and runs[r][0] + runs[r][1] <= lo:
                    r += 1
                if r < len(runs) and runs[r][0] <= lo:
                    maybe[key] = int(runs[r][2]) + lo - int(runs[r][0])
            i = j
        return exact, maybe

    def _at_position(self, pos: int) -> tuple[int, int] | None:
        """(sid, seq) of the event at a stored global position."""
        row = self._db.execute(_AT_POSITION, (pos,)).fetchone()
        if row is None or int(row[2]) < pos:
            return None
        return int(row[0]), int(row[1])

    def _id_at(self, sid: int, seq: int,
               seen: dict[tuple[int, int], tuple[int, list[str]]] | None = None) -> str | None:
        """The id of a stored event (confirms a run's hit: a run stores no high bits).
        ``seen`` keeps the ids of blocks already decoded, by (sid, last seq), for a
        batch whose hits fall into the same blocks."""
        if seen:
            for (s, last), (first, ids) in seen.items():
                if s == sid and first <= seq <= last:
                    return ids[seq - first]
        found = self._raw_block_at(sid, seq)
        if found is None:
            return None
        first, body = found
        ids = [e.id for e in self.codec.decode(body, self._name(sid))]
        if seen is not None:
            seen[sid, first + len(ids) - 1] = (first, ids)
        return ids[seq - first] if seq - first < len(ids) else None

    def _raw_block_at(self, sid: int, seq: int) -> tuple[int, bytes] | None:
        """(first seq, body) of the session's block holding ``seq``, on this connection
        as it is (pending rows are not written: callers read materialized blocks)."""
        row = self._db.execute("SELECT first_seq, body FROM blocks WHERE sid=? AND "
                               "last_seq>=? ORDER BY last_seq LIMIT 1", (sid, seq)).fetchone()
        if row is None or int(row[0]) > seq:
            return None
        return int(row[0]), bytes(row[1])

    def _raw_fork(self, sid: int) -> tuple[int | None, int, str]:
        row = self._db.execute("SELECT p.sid, s.fork_seq, s.id FROM sessions s LEFT JOIN "
                               "sessions p ON p.id = s.parent WHERE s.sid=?", (sid,)).fetchone()
        if row is None:
            raise StoreError(f"no session row for key {sid}")
        return (None if row[0] is None else int(row[0])), int(row[1] or 0), str(row[2])

    def head(self, session_id: str) -> tuple[int, bytes]:
        tail = self._tail(session_id)
        return max(tail.version, tail.fork_seq or 0), tail.head

    def early_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]] | None:
        # Looked up first, always: runs cannot refuse a stored id at insert the way a
        # unique index of every id did.
        return self._lookup(events)

    def stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        with self._lock:
            return self._lookup(events)

    def insert(self, session_id: str, batch: Prepared) -> int:
        tail = self._tails[session_id]
        ranges = self._ranges
        if ranges is None:
            ranges = self._ranges = _Ranges(self._db)
        # Stored bytes keep the event exactly (map order included); the chain
        # covers its canonical form, recomputed by verify. Nothing fails from here on
        # (everything is computed): the rows are written at commit, or before a read
        # on this connection (``_materialize``).
        events = batch.events
        n = len(events)
        pos0 = ranges.last_position + 1
        sid = tail.sid
        ranges.add(sid, batch.first_seq, pos0, n)
        covered, pend_found = self._covered, self._pend_found
        pos = pos0
        id_key = self.codec.id_key
        for e in events:
            ranges.add_id(id_key(e.id), pos, covered)
            pend_found[e.id] = (session_id, e.seq, pos)
            pos += 1
        tail.body += [encode_msgpack(e) for e in events]
        tail.hashes += batch.hashes
        tail.times += [e.time for e in events]
        tail.maxv = max(tail.maxv, self.codec.max_version(events))
        tail.version = batch.first_seq - 1 + n
        tail.head = batch.head
        self._dirty[session_id] = tail
        if self._group is None:
            self._commit_window()  # a failure rolls back as the write lock is left
        else:
            self._group.added(n)
        return pos0

    def _write_blocks(self, tail: _Tail, *, seal: bool = True) -> int:
        """Write the session's pending events as one block; merge the uncompressed tail
        into sealed blocks once it reaches SEAL_AT events (unless ``seal`` is off).
        Returns the new seal. With no pending events it only merges."""
        db, codec = self._db, self.codec
        sid, sealed, canon, hashes = tail.sid, tail.sealed, tail.body, tail.hashes
        end = tail.stored + len(canon)
        if not seal or end - sealed < codec.SEAL_AT:
            db.execute("INSERT INTO blocks VALUES (?, ?, ?, ?, ?)", (
                sid, end, tail.stored + 1, max(tail.times),
                codec.encode(canon, hashes, tail.maxv)))
            return sealed
        rows = db.execute("SELECT first_seq, last_seq, t_max, body FROM blocks WHERE sid=? "
                          "AND last_seq>=? ORDER BY last_seq", (sid, sealed)).fetchall()
        problem = seal_problem(tail.fork_seq, sealed, [(r[0], r[1], r[3][:1]) for r in rows],
                               end=tail.stored, tail=codec.TAIL)
        if problem is not None:  # merging would write blocks over the wrong seqs
            raise CorruptLog(tail.name, sealed + 1, problem)
        tail_canon, tail_hashes, times = codec.join_tail(
            (r[2], r[3]) for r in rows if r[1] > sealed)
        canon, hashes, times = tail_canon + canon, tail_hashes + hashes, times + tail.times
        first = sealed + 1
        # A last sealed block with room is sealed again with the tail: bigger blocks
        # compress better. Measured on the streamed growth benchmark (200 turns, packed
        # payloads): blocks of 128 events (never sealed again) 1.25x the text, 512
        # 1.05x, 1024 0.80x, 2048 0.80x, for about BLOCK_MAX / SEAL_AT / 2 repackings
        # of each event (a few us per event).
        last = db.execute("SELECT first_seq, t_max, body FROM blocks WHERE sid=? AND "
                          "last_seq=?", (sid, sealed)).fetchone()
        if last is not None and codec.is_sealed(bytes(last[2])):
            old = codec.raw_events(bytes(last[2]), tail.name)
            if len(old) + len(canon) <= codec.BLOCK_MAX:
                first = int(last[0])
                canon = old + canon
                hashes = [b""] * len(old) + hashes  # only a block's last hash is kept
                times = [int(last[1])] * len(old) + times
        prev = hash_before(self.chain.link, self._raw_block_at, self._raw_fork, sid, first,
                           codec=codec)
        db.execute("DELETE FROM blocks WHERE sid=? AND last_seq>=?", (sid, first))
        db.executemany("INSERT INTO blocks VALUES (?, ?, ?, ?, ?)", [
            (sid, *row) for row in codec.sealed_rows(
                self.chain.link, tail.name, prev, first=first, canon=canon, hashes=hashes,
                times=times, maxv=max(tail.maxv, _maxv(codec, last)))])
        return end

    # ------------------------------------------------------------------ reading

    def find(self, event_id: str) -> tuple[str, int] | None:
        with self._lock:
            self._readable()
            hit = self._lookup_committed(event_id)
        return None if hit is None else (hit[0], hit[1])

    def _lookup_committed(self, event_id: str) -> tuple[str, int, int] | None:
        key = self.codec.id_key(event_id)
        exact, maybe = self._candidates({key: event_id})
        for pos in (*exact.values(), *maybe.values()):
            where = self._at_position(pos)
            if where is not None and (key in exact or self._id_at(*where) == event_id):
                return self._name(where[0]), where[1], pos
        return None

    def last_position(self) -> int:
        rows = self._rows("SELECT position + count - 1 FROM log ORDER BY position DESC "
                          "LIMIT 1", ())
        return int(rows[0][0]) if rows else 0

    def _log_ranges(self, after: int, sid: int | None, page: int) -> list[Range]:
        # From the range holding position after + 1 (it may start earlier) on.
        start = ("COALESCE((SELECT position FROM log WHERE position <= ? ORDER BY position "
                 "DESC LIMIT 1), 0)")
        if sid is None:
            rows = self._rows(f"SELECT position, sid, seq, count FROM log WHERE position >= "
                              f"{start} ORDER BY position LIMIT ?", (after + 1, page))
        else:
            rows = self._rows(f"SELECT position, sid, seq, count FROM log WHERE sid = ? AND "
                              f"position >= {start} ORDER BY position LIMIT ?",
                              (sid, after + 1, page))
        return [(int(p), int(s), int(q), int(n)) for p, s, q, n in rows]

    def _position_ranges(self, sid: int) -> list[Range]:
        return [(int(p), sid, int(q), int(n)) for p, q, n in self._rows(
            "SELECT position, seq, count FROM log WHERE sid=?", (sid,))]



class SQLiteReader(SQLReader):
    """Verification of a SQLite store: the shared SQL walk, and its id runs and names."""

    recorder: SQLiteRecorder

    def verify_ids(self, ids: dict[int, str]) -> str | None:
        """Every run and exact row names the events at its positions, and every event
        is in exactly one (the index's only check: verify --fast skips it)."""
        seen = 0
        low_keys, id_key = self.codec.low_keys, self.codec.id_key
        for lo, n, pos in self.recorder._rows("SELECT lo, count, position FROM ids", ()):
            if not 0 < int(n) <= len(ids) - seen:  # a damaged count: never materialize it
                return (f"the run from position {pos} counts {n} events, more than the "
                        f"log holds beside the runs before it")
            # A whole run at once when it holds (verify.py's speed); else event by event,
            # which names the first position that does not match.
            if low_keys(list(map(ids.get, range(int(pos), int(pos) + int(n))))) \
                    == list(range(int(lo), int(lo) + int(n))):
                seen += int(n)
                continue
            for i in range(int(n)):
                given = ids.get(int(pos) + i)
                key = id_key(given) if given is not None else b""
                if len(key) != 16 or _low(key) != int(lo) + i:
                    return (f"the run from position {pos} does not match the id of the "
                            f"event at position {int(pos) + i}")
            seen += int(n)
        for key, pos in self.recorder._rows("SELECT id, position FROM names", ()):
            given = ids.get(int(pos))
            if given is None or id_key(given) != bytes(key):
                return f"the row for position {pos} does not name the event stored there"
            seen += 1
        return None if seen == len(ids) else (f"it holds {seen} id(s) for {len(ids)} "
                                              "event(s)")

def _maxv(codec: BlockCodec, row: Any) -> int:
    """The schema version bound of a stored block row (first_seq, t_max, body)."""
    if row is None:
        return 0
    body = bytes(row[2])
    return codec.sealed_head(body).maxv if codec.is_sealed(body) else 0


def _create_tables(db: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):  # executescript would COMMIT first
        if statement.strip():
            db.execute(statement)


def _set_wal(db: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, waiting out a connection that holds the file: the
    change takes an exclusive lock without SQLite's busy handler, so writers opening a
    new file at once saw "database is locked" (two processes, two threads each)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _migrate_old(url: str, db: sqlite3.Connection, old: int) -> None:
    """Schema 1 or 2 -> today's tables, in the migration's transaction (the legacy
    room: schema 2's per-event rows become ranges, blocks kept byte for byte)."""
    from engine.store.legacy import sqlite_schema  # noqa: PLC0415 - old stores only
    if old == 1:
        raise sqlite_schema.refuse_schema_1(url)
    sqlite_schema.before_tables(db)
    _create_tables(db)
    sqlite_schema.after_tables(db, _SCHEMA)


def _legacy_read(db: sqlite3.Connection, old: int, meta: dict[str, str],
                 tables: set[str]) -> bool:
    """Whether a file of an older schema ``old`` is read as it is (and migrated by the
    first write): schema 3 has today's tables; schema 2 is read through range indexes
    built in this connection's memory (the legacy room)."""
    if old == 3:
        return True
    from engine.store.legacy import sqlite_schema  # noqa: PLC0415 - old stores only
    if sqlite_schema.is_readable_v2(meta, tables):
        sqlite_schema.read_in_memory(db, _SCHEMA)
        return True
    return False


def _writable(path: Path) -> bool:
    """Whether a read-write open can work: a new file needs a writable directory, an
    existing one write access to it and to its directory (the WAL and its index are
    made beside it) unless both already exist writable."""
    parent = path.parent
    if not path.exists():
        return True  # to be created: a failure says "cannot create"
    if not os.access(path, os.W_OK):
        return False
    if os.access(parent, os.W_OK | os.X_OK):
        return True
    return all(os.access(f"{path}{end}", os.W_OK) for end in ("-wal", "-shm"))


def _connect_read_only(path: str, url: str) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``: SQLite itself refuses any write).

    A WAL database needs its ``-shm`` index, which a read-only directory cannot
    hold: SQLite then fails to open. When there is no ``-wal`` either, every
    committed row is in the main file (the last writer checkpointed it at close),
    so ``immutable=1`` reads it without the index and without locks. With a
    ``-wal`` present and no ``-shm``, committed rows live in the WAL, which cannot
    be read without the index: refused rather than read stale.
    """
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError as exc:
        db.close()
        if os.path.exists(f"{path}-wal"):
            raise StoreUnreadable(
                f"{url}: cannot read the read-only database: {path}-wal holds committed "
                f"rows but its index {path}-shm is missing and cannot be created "
                f"({exc}); read it where its directory is writable") from None
    db = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None,
                         check_same_thread=False)
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return db
