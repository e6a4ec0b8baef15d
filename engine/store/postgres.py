"""``postgresql://user@host:port/db``: many processes and machines on one database (psycopg 3).

Same tables and block format as SQLite (prefixed ``convlog_``), created or
migrated on open under an advisory lock; a store whose tables are current but
whose number is older (schema 3) is only read until this release's first write
raises the number (see ``SCHEMA_VERSION``). An append is one call of the server-side
procedure ``convlog_append_v3`` (``batched``: the function
``convlog_append_once_v3``): it locks the session row (writers of one session
queue, and the head the batch was prepared against is checked exactly) and
writes the blocks and ids. Global positions are *placed* under one advisory lock
(``PLACE_LOCK``) that is held until the placing transaction's commit is visible;
the append waits for it and places its events in its own transaction. No lock is
held across a WAL flush: that transaction commits without waiting for it, and a
durable call ends in one commit that flushes, which covers it (writers' flushes
are shared by the server's group commit). A durable store's reads wait for the
same flush, so nothing a crash can take back is returned. Readers read the
position log only, so positions stay gapless and a reader of ``position > p``
never sees ``p + 2`` before ``p + 1``. Each placement sends ``NOTIFY convlog`` naming each
placed range and its session, which ``subscribe`` waits on (LISTEN) instead of
polling (:mod:`engine.store.pg_notify`). Bodies and arrays travel in binary
(:mod:`engine.store.pg_wire`).

Seqs and hashes are computed client-side from the session head this store object
last saw, cached per session (after its own appends, ``create_session`` and
reads of the version). The function writes nothing when the locked row no longer
has that head and returns the current one; the client prepares again, once. A
batch that cannot be decided against a cached head (a version conflict or a seq
out of order, either possibly stale) or that loses twice goes through an
explicit transaction that locks the row before preparing (the shared loop,
``Store._record``, over this recorder's hooks), and places in that transaction.
There is no client-side group commit for ``batched``: an acknowledged append
must outlive the client (below).

Durability: ``sync`` returns after the events and their placement are flushed
to the WAL (the call's last commit flushes, and the WAL is flushed in order).
``batched`` sets ``synchronous_commit = off``: the server acknowledges before the
WAL flush and its WAL writer flushes every ``wal_writer_delay``; a server crash
can lose the last ``3 x wal_writer_delay`` (600 ms by default) of commits, never
part of one and never a commit before a kept one. A crash before a durable call's
flush loses its events and their positions together (the append had not returned)
or keeps both. Events committed without positions by a writer of the release
before (between its two calls) are placed by the next open, append or id lookup.
A client that dies loses nothing it was told is committed.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

from engine.codec import encode_msgpack
from engine.errors import (
    BadBatch,
    ConcurrencyError,
    CorruptLog,
    SessionExists,
    StoreError,
    StoreUnreadable,
    UnknownSession,
)
from engine.events import Event
from engine.store import blocks
from engine.store.base import (
    BATCHED,
    SYNC,
    Appended,
    Expected,
    IdTaken,
    Prepared,
    Record,
    SessionInfo,
    check_chain,
    follow,
    newer_store,
)
from engine.store.blockread import hash_before
from engine.store.chain import Chain
from engine.store.codec_protocol import BlockCodec
from engine.store.pg_notify import CHANNEL, Listener
from engine.store.pg_wire import bytea_array, int4_array, int8_array, use_binary
from engine.store.sql import POSTGRES, SQLReader, SQLRecorder, SQLStore, Statements, seal_problem

# 3: positions are placed after the commit (convlog_pending, convlog_place_v2) and the
# id index names (sid, seq) instead of a position. A schema 2 store is migrated on open.
# 4: sealed blocks may hold packed payload format 2 (engine.store.packed), which the
# releases of schema 3 cannot all read: they refuse a schema 4 store as newer. The
# tables and functions are schema 3's (_TABLES), so a schema 3 store is read as it is
# and raised to 4 by this release's first write (any write may seal a block).
SCHEMA_VERSION = 4
_TABLES = 3
_MIGRATION_LOCK = 0x636F6E766C6F67  # "convlog": serializes schema creation across clients
PLACE_LOCK = 0x636F6E766C7071  # serializes placements: held from stamping to commit

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
    """CREATE TABLE IF NOT EXISTS convlog_ids (
        id bytea PRIMARY KEY, sid bigint NOT NULL, seq integer NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS convlog_snapshots (
        sid bigint NOT NULL, name text NOT NULL, seq integer NOT NULL, body bytea NOT NULL,
        PRIMARY KEY (sid, name, seq))""",
    """CREATE TABLE IF NOT EXISTS convlog_position (
        one boolean PRIMARY KEY DEFAULT true CHECK (one), last bigint NOT NULL)""",
    "INSERT INTO convlog_position VALUES (true, 0) ON CONFLICT DO NOTHING",
    # Committed appends waiting for positions: 128 slots, a connection's by its backend
    # pid (it has one append at a time), pending while qid > placed. Slots are
    # updated in place, not inserted and deleted, so the table stays small: a churned
    # queue table fills with dead rows that every placement scans, which slowed a
    # run of 8 writers tenfold (measured).
    "CREATE SEQUENCE IF NOT EXISTS convlog_pending_qid",
    """CREATE TABLE IF NOT EXISTS convlog_pending (
        slot integer PRIMARY KEY, qid bigint NOT NULL, placed bigint NOT NULL,
        sid bigint NOT NULL, first_seq integer NOT NULL, events integer NOT NULL)
        WITH (fillfactor = 20)""",
]

# Positions are placed, not taken at commit. Placing takes the advisory lock
# PLACE_LOCK, held until its transaction's commit is visible, so placements commit
# one after the other, each after every smaller position's; readers read
# convlog_log only. An append is one CALL of the procedure convlog_append_v3, which
# writes (the session row checked and locked, blocks, ids), waits for the lock and
# places its events (after any pending rows: see _PLACE_BODY) in the same
# transaction, which commits without waiting for its WAL flush, and then flushes
# outside the lock (see _APPEND_SQL).
#
# Schema 3's first procedure kept the flush inside the lock, so a contended append
# committed a convlog_pending row instead of waiting and was placed afterwards;
# those functions (convlog_append_v2, convlog_settle_v2) stay for clients of that
# release, whose pending rows every placement still places first.
#
# The names carry their contracts' version: a changed body gets a new name. Blocks,
# seqs and hashes come from the client, prepared against (p_version, p_head,
# p_sealed).
_WRITE_FN = "convlog_write_v2"
_PLACE_FN = "convlog_place_v3"
_APPEND_FN = "convlog_append_v3"
_APPEND_ONCE_FN = "convlog_append_once_v3"
_PARAMS = ("p_id text, p_version integer, p_head bytea, p_sealed integer, "
           "p_new_sealed integer, p_new_head bytea, p_keys bytea[], p_first integer[], "
           "p_last integer[], p_tmax bigint[], p_body bytea[]")
_ARGS = ("p_id, p_version, p_head, p_sealed, p_new_sealed, p_new_head, p_keys, p_first, "
         "p_last, p_tmax, p_body")
_SIGNATURE_TYPES = ("text, integer, bytea, integer, integer, bytea, bytea[], integer[], "
                    "integer[], bigint[], bytea[]")
# The write, shared by convlog_write_v2 (the locked path's transaction) and
# convlog_append_v3: the guarded UPDATE of the session row is the lock (held to
# commit: a session's appends queue) and the head check in one statement. When the
# row no longer matches, nothing is written and o_seq stays NULL, with the current
# head in the other columns (all NULL: no such session).
_WRITE_LOCALS = """
    n integer := cardinality(p_keys);
    actual integer;"""  # what _WRITE_BODY declares
_WRITE_BODY = """
    UPDATE convlog_sessions
       SET version = greatest(version, coalesce(fork_seq, 0)) + n, head = p_new_head,
           sealed = p_new_sealed
     WHERE id = p_id AND version = p_version AND head = p_head AND sealed = p_sealed
    RETURNING sid, version - n INTO o_sid, actual;
    IF NOT FOUND THEN
        SELECT sid, version, fork_seq, sealed, head
          INTO o_sid, o_version, o_fork_seq, o_sealed, o_head
          FROM convlog_sessions WHERE id = p_id;
        RETURN;
    END IF;
    o_seq := actual + 1;
    IF p_new_sealed <> p_sealed THEN  -- a merge: the blocks replace the uncompressed tail
        DELETE FROM convlog_blocks WHERE sid = o_sid AND last_seq > p_sealed;
    END IF;
    -- Single rows go through VALUES: set-returning functions materialize their
    -- output, which cost a single-event append about 45 us of server CPU (measured).
    IF n = 1 THEN
        INSERT INTO convlog_blocks (sid, last_seq, first_seq, t_max, body)
            VALUES (o_sid, p_last[1], p_first[1], p_tmax[1], p_body[1]);
        INSERT INTO convlog_ids (id, sid, seq) VALUES (p_keys[1], o_sid, o_seq);
    ELSE
        INSERT INTO convlog_blocks (sid, last_seq, first_seq, t_max, body)
            SELECT o_sid, l, f, t, b FROM unnest(p_last, p_first, p_tmax, p_body) AS u(l, f, t, b);
        INSERT INTO convlog_ids (id, sid, seq)
            SELECT k, o_sid, actual + i FROM unnest(p_keys) WITH ORDINALITY AS u(k, i);
    END IF;
"""
# The placement, under the placement lock (held to commit: placements commit one
# after the other): the committed pending rows, in qid order, then this
# transaction's own n events (session o_sid from seq o_seq; n = 0: none) get the
# next positions; o_first is the first of its own. Two appends of one session are
# serialized by its row lock, the second taking its qid after the first committed,
# so a session's events are placed in seq order. A NOTIFY per append placed:
# "first last sid".
_PLACE_LOCALS = """
    before bigint;
    n_placed bigint;"""  # what _PLACE_BODY declares
_PLACE_BODY = f"""
    IF EXISTS (SELECT FROM convlog_pending WHERE qid > placed) THEN
        SELECT last INTO before FROM convlog_position;
        WITH moved AS (UPDATE convlog_pending SET placed = qid WHERE qid > placed
                       RETURNING qid, sid, first_seq, events),
             ranked AS (SELECT sid, first_seq, events,
                               before + sum(events) OVER (ORDER BY qid) - events AS below
                          FROM moved),
             put AS (INSERT INTO convlog_log (position, sid, seq)
                     SELECT below + i, sid, first_seq + i - 1
                       FROM ranked, generate_series(1, events) AS i)
        SELECT coalesce(sum(events), 0) INTO n_placed FROM (
            SELECT events, pg_notify('{CHANNEL}', (below + 1) || ' ' || (below + events) || ' '
                                                 || sid) FROM ranked) AS noted;
        IF n_placed > 0 THEN
            UPDATE convlog_position SET last = before + n_placed;
        END IF;
    END IF;
    IF n > 0 THEN
        UPDATE convlog_position SET last = last + n RETURNING last - n + 1 INTO o_first;
        IF n = 1 THEN
            INSERT INTO convlog_log (position, sid, seq) VALUES (o_first, o_sid, o_seq);
        ELSE
            INSERT INTO convlog_log (position, sid, seq)
                SELECT o_first + i - 1, o_sid, o_seq + i - 1 FROM generate_series(1, n) AS i;
        END IF;
        PERFORM pg_notify('{CHANNEL}', o_first || ' ' || (o_first + n - 1) || ' ' || o_sid);
    END IF;
"""
_OUTS = ("OUT o_sid bigint, OUT o_version integer, OUT o_fork_seq integer, "
         "OUT o_sealed integer, OUT o_head bytea, OUT o_seq integer")
_WRITE_SQL = f"""CREATE OR REPLACE FUNCTION {_WRITE_FN}({_PARAMS}, {_OUTS})
LANGUAGE plpgsql AS $$
DECLARE{_WRITE_LOCALS}
BEGIN{_WRITE_BODY}END $$"""
_PLACE_SQL = f"""CREATE OR REPLACE FUNCTION {_PLACE_FN}(o_sid bigint, o_seq integer,
    n integer, OUT o_first bigint)
LANGUAGE plpgsql AS $$
DECLARE{_PLACE_LOCALS}
BEGIN
    PERFORM pg_advisory_xact_lock({PLACE_LOCK});{_PLACE_BODY}END $$"""
# One call, one round trip, and for a durable (sync) writer one WAL flush that no
# lock is held across. The write and the placement commit together without waiting
# for their flush (synchronous_commit off, local to that transaction), so the
# placement lock is held for the placement's CPU only: a writer that meets it waits
# microseconds, not a flush. The call then ends in a transaction that writes one WAL
# record and so commits with a flush (when the writer is durable): the flush reaches
# its commit record, which is after the append's commit (WAL is flushed in order).
# Writers' final flushes overlap and the server flushes them together (group
# commit): one flush serves all of them. Readers of a durable store wait for the
# same flush before returning rows (convlog_flush_v3), so no reader sees an event
# or a position that a server crash could take back.
# A transaction commits with a flush only when it wrote WAL (an xid alone is not
# enough: PostgreSQL commits a transaction that logged nothing without waiting). The
# smallest write is a transactional logical message: one WAL record, no table
# touched, callable by any role.
_FLUSHING_WRITE = "pg_logical_emit_message(true, 'convlog', '')"
_APPEND_SQL = f"""CREATE OR REPLACE PROCEDURE {_APPEND_FN}({_PARAMS},
    INOUT o_first bigint, INOUT o_sid bigint, INOUT o_version integer,
    INOUT o_fork_seq integer, INOUT o_sealed integer, INOUT o_head bytea, INOUT o_seq integer)
LANGUAGE plpgsql AS $$
DECLARE{_WRITE_LOCALS}{_PLACE_LOCALS}
    flushes boolean := current_setting('synchronous_commit') <> 'off';
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);{_WRITE_BODY}
    PERFORM pg_advisory_xact_lock({PLACE_LOCK});{_PLACE_BODY}
    IF flushes THEN  -- (batched: the call's last transaction needs no flush)
        COMMIT;
        PERFORM {_FLUSHING_WRITE};
    END IF;
END $$"""
# What a durable store's reader calls after a read that returned rows: the WAL
# flushed up to where it was written when the read ended, so every commit the read
# saw is on disk (convlog_append_v3 commits without waiting for its flush).
# Flushed WAL ending where a page begins shows as the insert position after that
# page's header (24 bytes, 40 at the start of a segment): nothing to flush then. A
# standby (in recovery) writes no WAL and only receives what its primary flushed.
_FLUSH_SQL = f"""CREATE OR REPLACE PROCEDURE convlog_flush_v3() LANGUAGE plpgsql AS $$
DECLARE
    written pg_lsn;
    gap numeric;
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN;
    END IF;
    written := pg_current_wal_insert_lsn();
    gap := written - pg_current_wal_flush_lsn();
    IF gap > 0 AND NOT (gap IN (24, 40) AND
                        (written - '0/0') % current_setting('wal_block_size')::int = gap) THEN
        PERFORM {_FLUSHING_WRITE};
    END IF;
END $$"""
# batched: the same write and placement as one function, one transaction (no flush
# to wait for afterwards). A CALL of a procedure that may commit costs more than a
# function call: 25 us of server and 14 us of client CPU per one-event append,
# measured (alternated runs of 2,000 appends, 5 of 5 lower).
_APPEND_ONCE_SQL = f"""CREATE OR REPLACE FUNCTION {_APPEND_ONCE_FN}({_PARAMS},
    OUT o_first bigint, {_OUTS})
LANGUAGE plpgsql AS $$
DECLARE{_WRITE_LOCALS}{_PLACE_LOCALS}
BEGIN{_WRITE_BODY}
    PERFORM pg_advisory_xact_lock({PLACE_LOCK});{_PLACE_BODY}END $$"""
_INOUT_TYPES = "bigint, bigint, integer, integer, integer, bytea, integer"
_FUNCTIONS = ((f"{_WRITE_FN}({_SIGNATURE_TYPES})", _WRITE_SQL),
              (f"{_PLACE_FN}(bigint, integer, integer)", _PLACE_SQL),
              (f"{_APPEND_FN}({_SIGNATURE_TYPES}, {_INOUT_TYPES})", _APPEND_SQL),
              (f"{_APPEND_ONCE_FN}({_SIGNATURE_TYPES})", _APPEND_ONCE_SQL),
              ("convlog_flush_v3()", _FLUSH_SQL))
# Arrays go in PostgreSQL's binary array format (engine.store.pg_wire): bodies are
# never hex text, and packing them once is cheaper than psycopg's generic list
# adaptation (about 11 us per list per call, measured).
_APPEND_ONCE_CALL = (f"SELECT * FROM {_APPEND_ONCE_FN}(%s, %s::integer, %b, %s::integer, "
                     "%s::integer, %b, %b, %b, %b, %b, %b)")
_APPEND_CALL = (f"CALL {_APPEND_FN}(%s, %s::integer, %b, %s::integer, %s::integer, "
                "%b, %b, %b, %b, %b, %b, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
_PLACE_PENDING = f"SELECT {_PLACE_FN}(NULL, NULL, 0)"
_FLUSH_CALL = "CALL convlog_flush_v3()"
_WRITE_CALL = (f"SELECT * FROM {_WRITE_FN}(%s, %s::integer, %b, %s::integer, %s::integer, "
               "%b, %b, %b, %b, %b, %b)")


# The blocks behind a page of the log (subscriptions): each session's seq range in
# the page, then the blocks that overlap it.
_PAGE_BLOCKS = ("WITH r AS (SELECT sid, min(seq) AS lo, max(seq) AS hi FROM convlog_log "
                "WHERE position > %s AND position <= %s {only} GROUP BY sid) "
                "SELECT b.sid, b.first_seq, b.last_seq, b.body FROM r JOIN convlog_blocks b "
                "ON b.sid = r.sid AND b.last_seq >= r.lo AND b.first_seq <= r.hi "
                "ORDER BY b.sid, b.last_seq")
_LIVE_PAGE = 1024


def _holding(held: Sequence[tuple[int, int, bytes]], seq: int) -> tuple[int, int, bytes] | None:
    """The block of ``held`` (in seq order) that holds ``seq``."""
    i = bisect.bisect_left(held, seq, key=lambda b: b[1])
    return held[i] if i < len(held) and held[i][0] <= seq else None


_HEADS_MAX = 100_000  # cached session heads (a stale or missing one costs a round trip)


def connect(dsn: str, timeout: float = 10) -> psycopg.Connection[Any]:
    """A connection as the store uses it: autocommit (the append function is its
    own transaction) and the binary array dumpers registered (bodies go binary)."""
    db = psycopg.connect(dsn, autocommit=True, connect_timeout=int(timeout))
    use_binary(db)
    return db


class _Head(NamedTuple):
    """A session row as last seen: what the next append is prepared against."""

    sid: int
    version: int  # own version as stored; a fork's current version is max(version, fork_seq)
    fork_seq: int
    sealed: int
    head: bytes


class _RowLockTx:
    """A :class:`PostgresRecorder`'s write lock for the shared loop: a transaction, in
    which ``head`` locks the session row (the thread lock is held already)."""

    __slots__ = ("open", "store")

    def __init__(self, store: PostgresRecorder) -> None:
        self.store = store
        self.open: list[AbstractContextManager[object]] = []

    def __enter__(self) -> None:
        tx = self.store._db.transaction()
        tx.__enter__()
        self.open.append(tx)

    def __exit__(self, *exc: Any) -> None:
        self.open.pop().__exit__(*exc)


class PostgresStore(SQLStore):
    """``postgresql://``: the pipeline over a :class:`PostgresRecorder`, verified by a
    :class:`PostgresReader`; an append whose cached head holds is one round trip."""

    recorder: PostgresRecorder

    def __init__(self, dsn: str, *, url: str | None = None, durability: str = SYNC,
                 key: bytes | None = None, max_event_bytes: int | None = None,
                 connect_timeout: float = 10, codec: BlockCodec = blocks) -> None:
        self._configure(url or dsn, durability=durability, key=key,
                        max_event_bytes=max_event_bytes)
        recorder = PostgresRecorder(dsn, url=self.url, chain=self.chain,
                                    durability=self.durability,
                                    connect_timeout=connect_timeout, codec=codec)
        self._compose_sql(recorder, PostgresReader(recorder, self.chain))
        self.dsn = dsn

    def _record(self, session_id: str, events: Sequence[Event], expected: Expected) -> Appended:
        """One round trip when this object's cached head is current (it appended last,
        created or read the session); else the function's refusal returns the head
        and a second call succeeds. Whatever cannot be decided against a cached head
        (a version conflict, a seq out of order, both possibly stale) or keeps losing
        races goes through the shared loop with the row locked (``Store._record``
        over the recorder's head, stored_ids and insert). The unique id index refuses
        a stored id (IdTaken)."""
        recorder = self.recorder
        with recorder._lock:
            try:
                recorder._current_schema()
                for _ in range(2):
                    head = recorder._heads.get(session_id) or recorder._fetch_head(session_id)
                    try:
                        batch = self._decide(session_id, events, expected,
                                             actual=max(head.version, head.fork_seq),
                                             head=head.head, stored=None)
                    except (ConcurrencyError, BadBatch):
                        break
                    assert isinstance(batch, Prepared)  # stored=None: never a retry
                    pos0 = recorder._write(session_id, head, batch)
                    if pos0 is not None:
                        return self._appended(session_id, batch, pos0)
                return super()._record(session_id, events, expected)
            except psycopg.OperationalError as exc:
                recorder._heads.pop(session_id, None)
                raise StoreError(f"append to {session_id} failed: {exc}") from None

    def subscribe(self, after: int = 0, *, session_id: str | None = None,
                  idle_timeout: float | None = None, poll: float = 1.0,
                  stop: Callable[[], bool] | None = None) -> Iterator[Record]:
        """The backlog, then events as NOTIFY announces their commit (``poll`` is
        only the fallback re-read interval; see :mod:`engine.store.pg_notify`)."""
        return self.recorder.subscribe(after, session_id=session_id,
                                       idle_timeout=idle_timeout, poll=poll, stop=stop)


class PostgresRecorder(SQLRecorder):
    """The ``convlog_`` tables of one database: the append functions, the cached session
    heads, blocks written and sealed, reads and the NOTIFY feed (see the module doc);
    nothing of the append pipeline."""

    _sql = Statements.of(POSTGRES)
    SEQ_MAX = 1 << 30  # a bound that every integer seq column and parameter accepts

    def __init__(self, dsn: str, *, url: str, chain: Chain, durability: str,
                 connect_timeout: float, codec: BlockCodec = blocks) -> None:
        self.url, self.chain, self.codec = url, chain, codec
        self.dsn = dsn
        self._lock = threading.RLock()
        self.closed = False  # set by close(): a subscription on another thread ends
        self._write_lock = _RowLockTx(self)
        self._flushes = durability != BATCHED
        self._stale_schema = False  # schema 3: the first write raises it (_current_schema)
        try:
            self._db = connect(dsn, connect_timeout)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {self.url}: {exc}".strip()) from None
        try:
            if durability == BATCHED:
                self._db.execute("SET synchronous_commit = off")
            self.refuse = self._migrate()
        except BaseException as exc:  # a store that fails to open keeps no connection
            self._db.close()
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"cannot open {self.url}: {exc}".strip()) from None
            raise
        self._sids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._heads: dict[str, _Head] = {}

    def _migrate(self) -> str | None:
        # The DDL below locks tables even when they exist (deadlocking with running
        # appends), so a store that is already current skips it.
        row = self._db.execute("SELECT to_regclass('convlog_meta')").fetchone()
        if row is not None and row[0] is not None:
            meta: dict[str, str] = dict(
                self._db.execute("SELECT key, value FROM convlog_meta").fetchall())
            if meta.get("schema") in (str(_TABLES), str(SCHEMA_VERSION)) and "chain" in meta:
                self._stale_schema = meta["schema"] != str(SCHEMA_VERSION)
                if self._missing_functions():
                    with self._db.transaction():
                        self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                        self._create_functions()
                self._place_leftovers()
                return check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            meta = (dict(self._db.execute("SELECT key, value FROM convlog_meta").fetchall())
                    if self._exists("convlog_meta") else {})
            try:
                old = int(meta.get("schema", SCHEMA_VERSION))
            except ValueError:
                raise StoreUnreadable(f"{self.url}: its schema version {meta['schema']!r} is "
                                      "not a number (a damaged convlog_meta)") from None
            if meta and "chain" not in meta:  # every store's meta has named its chain
                raise StoreUnreadable(f"{self.url}: convlog_meta names no chain algorithm "
                                      "(damaged)")
            if old > SCHEMA_VERSION:
                raise newer_store(self.url, old, SCHEMA_VERSION)
            # (a new or older store) an older id index first, by the legacy room
            from engine.store.legacy import postgres_schema  # noqa: PLC0415 - old only
            if postgres_schema.ids_have_positions(self._db):  # before the DDL below
                postgres_schema.migrate_2_to_3(self._db)
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._create_functions()
            if "chain" not in meta:
                meta = {"schema": str(SCHEMA_VERSION), "chain": self.chain.algorithm,
                        "key": self.chain.fingerprint()}
                for k, v in meta.items():
                    self._db.execute("INSERT INTO convlog_meta VALUES (%s, %s)", (k, v))
            elif old < _TABLES:  # the tables changed; the number says so at the first write
                self._db.execute("UPDATE convlog_meta SET value=%s WHERE key='schema'",
                                 (str(_TABLES),))
            self._stale_schema = old < SCHEMA_VERSION
        return check_chain(self.url, meta["chain"], meta.get("key", ""), self.chain)

    def migrate(self) -> bool:
        with self._lock:
            if not self._stale_schema:
                return False
            self._current_schema()
            return True

    def _current_schema(self) -> None:
        """Before this store object's first write: raise a schema 3 store to this
        release's number. Only from 3: a client of a newer release may have raised it
        further since this store opened, and a number is never lowered."""
        if self._stale_schema:
            with self._lock:
                self._db.execute("UPDATE convlog_meta SET value=%s WHERE key='schema' AND "
                                 "value=%s", (str(SCHEMA_VERSION), str(_TABLES)))
                self._stale_schema = False

    def _exists(self, table: str) -> bool:
        row = self._db.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        return row is not None and row[0] is not None

    def _missing_functions(self) -> list[str]:
        return [sql for signature, sql in _FUNCTIONS
                if (row := self._db.execute("SELECT to_regprocedure(%s)",
                                            (signature,)).fetchone()) is None or row[0] is None]

    def _create_functions(self) -> None:
        """Under the migration lock: create the functions unless another opener did.
        Only when missing, since replacing a function takes its owner's role."""
        for sql in self._missing_functions():
            self._db.execute(sql)

    def _place_leftovers(self) -> None:
        """Give positions to appends committed but never placed (their placement was
        lost with a server crash between the procedure's two commits)."""
        self._db.execute(_PLACE_PENDING + " WHERE EXISTS (SELECT FROM convlog_pending "
                                          "WHERE qid > placed)")

    def close(self) -> None:
        self.closed = True  # first: a subscription's next look ends it
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:  # binary results: block bodies arrive as bytes, not hex
            rows = self._db.execute(sql, params, binary=True).fetchall()
            if rows and self._flushes and (self._db.info.transaction_status
                                           == pq.TransactionStatus.IDLE):
                # Appends commit before their flush (see _APPEND_SQL): what was read
                # is returned once it is on disk.
                self._db.execute(_FLUSH_CALL)
            return rows

    def _write_one(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._current_schema()
            self._db.execute(sql, params)

    # ------------------------------------------------------------------ sessions

    def lock(self) -> _RowLockTx:
        return self._write_lock

    def create(self, info: SessionInfo, genesis: bytes) -> None:
        fork = info.fork_seq or 0
        with self._lock:
            self._current_schema()
            try:
                row = self._db.execute(
                    "INSERT INTO convlog_sessions (id, created, parent, fork_seq, sealed, head) "
                    "VALUES (%s, %s, %s, %s, %s, %s) RETURNING sid",
                    (info.id, info.created, info.parent, info.fork_seq, fork, genesis)
                ).fetchone()
            except pg_errors.UniqueViolation:
                raise SessionExists(info.id) from None
            assert row is not None
            self._remember(info.id, _Head(int(row[0]), 0, fork, fork, genesis))

    # ------------------------------------------------------------------ writing

    def _remember(self, session_id: str, head: _Head) -> None:
        if len(self._heads) >= _HEADS_MAX and session_id not in self._heads:
            self._heads.clear()
        self._heads[session_id] = head

    def _fetch_head(self, session_id: str, *, lock: bool = False) -> _Head:
        with self._lock:  # with the cache update: an older row never overwrites a newer one
            row = self._db.execute(
                "SELECT sid, version, fork_seq, sealed, head FROM convlog_sessions WHERE id=%s"
                + (" FOR UPDATE" if lock else ""), (session_id,), binary=True).fetchone()
            if row is None:
                self._heads.pop(session_id, None)
                raise UnknownSession(session_id)
            head = _Head(int(row[0]), int(row[1]), int(row[2] or 0), int(row[3]),
                         bytes(row[4]))
            self._remember(session_id, head)
        return head

    def row_head(self, session_id: str) -> tuple[int, bytes]:
        head = self._fetch_head(session_id)  # also primes the next append (Session.open)
        return head.version, head.head

    def stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        id_key = self.codec.id_key
        keys = bytea_array([id_key(e.id) for e in events])
        by_key = {id_key(e.id): e.id for e in events}
        with self._lock:
            for _ in range(2):
                rows = self._db.execute(
                    "SELECT i.id, i.sid, i.seq, l.position FROM convlog_ids i LEFT JOIN "
                    "convlog_log l ON l.sid = i.sid AND l.seq = i.seq WHERE i.id = ANY(%b)",
                    (keys,), binary=True).fetchall()
                if all(p is not None for *_, p in rows):
                    break
                # Committed but not placed yet (a writer of the release before, between
                # its two calls): placing is what that writer is about to do.
                self._db.execute(_PLACE_PENDING)
        return {by_key[bytes(k)]: (self._name(int(s)), int(q), int(p)) for k, s, q, p in rows}

    # The authoritative path's hooks: the row is locked before the batch is checked
    # and prepared, so the head cannot move under it.

    def head(self, session_id: str) -> tuple[int, bytes]:
        head = self._fetch_head(session_id, lock=True)
        return max(head.version, head.fork_seq), head.head

    def early_ids(self, session_id: str, events: Sequence[Event]) -> None:
        return None  # the unique id index refuses a stored id at insert

    def insert(self, session_id: str, batch: Prepared) -> int:
        pos0 = self._write(session_id, self._heads[session_id], batch)
        if pos0 is None:  # only damage can move a locked head
            raise StoreError(f"session {session_id}: the stored blocks do not end at its "
                             "recorded head (run convlog verify)")
        return pos0

    def _write(self, session_id: str, head: _Head, batch: Prepared) -> int | None:
        """Store a batch prepared against ``head``: one function call (plus a read of
        the uncompressed tail when it is merged). Returns the first position; None,
        with the fresh head cached, when the session has moved on."""
        actual = max(head.version, head.fork_seq)
        events = batch.events
        n = len(events)
        # Stored bytes keep the event exactly (map order included); the chain
        # covers its canonical form, recomputed by verify.
        body = [encode_msgpack(e) for e in events]
        codec = self.codec
        id_key = codec.id_key  # called per event below
        maxv = codec.max_version(events)
        if actual + n - head.sealed < codec.SEAL_AT:
            sealed = head.sealed
            firsts, lasts = [actual + 1], [actual + n]
            t_maxes = [max(e.time for e in events)]
            bodies = [codec.encode(body, batch.hashes, maxv)]
        else:
            tail = self._tail(session_id, head, actual)
            if tail is None:  # the session moved on
                self._fetch_head(session_id)
                return None
            canon, hashes, times = tail
            sealed = actual + n
            prev = hash_before(self.chain.link, self._raw_block_at, self._raw_fork, head.sid,
                               head.sealed + 1, codec=codec)
            rows = codec.sealed_rows(self.chain.link, session_id, prev, first=head.sealed + 1,
                                      canon=canon + body, hashes=hashes + batch.hashes,
                                      times=times + [e.time for e in events], maxv=maxv)
            lasts, firsts, t_maxes, bodies = (list(c) for c in zip(*rows, strict=True))
        arrays = (session_id, head.version, head.head, head.sealed, sealed, batch.head,
                  bytea_array([id_key(e.id) for e in events]), int4_array(firsts),
                  int4_array(lasts), int8_array(t_maxes), bytea_array(bodies))
        try:
            if self._db.info.transaction_status == pq.TransactionStatus.IDLE:
                row = self._db.execute(_APPEND_CALL if self._flushes else _APPEND_ONCE_CALL,
                                       arrays, binary=True).fetchone()
                if row is not None and row[0] is None and row[6] is not None:
                    raise StoreError(f"{session_id}: events from seq {row[6]} were committed "
                                     "but not placed")
            else:  # the locked path's transaction: write, then place in it
                row = self._db.execute(_WRITE_CALL, arrays, binary=True).fetchone()
                if row is not None:
                    first = None if row[5] is None else self._db.execute(
                        f"SELECT {_PLACE_FN}(%s, %s, %s)", (row[0], row[5], n)).fetchone()
                    row = (None if first is None else first[0], *row[:5])
        except pg_errors.UniqueViolation as exc:
            if exc.diag.table_name == "convlog_log":  # only damage puts the counter behind
                raise CorruptLog(session_id, actual + 1, "the position counter "
                                 "(convlog_position) is behind the stored positions (run "
                                 "convlog verify)") from None
            raise IdTaken from None  # its transaction is gone; the cached head still holds
        assert row is not None
        first, sid, version, fork_seq, now_sealed, now_head = row[:6]
        if sid is None:
            self._heads.pop(session_id, None)
            raise UnknownSession(session_id)
        if first is None:
            self._remember(session_id, _Head(int(sid), int(version), int(fork_seq or 0),
                                             int(now_sealed), bytes(now_head)))
            return None
        self._remember(session_id, _Head(head.sid, actual + n, head.fork_seq, sealed, batch.head))
        return int(first)

    def _tail(self, session_id: str, head: _Head, actual: int
              ) -> tuple[list[bytes], list[bytes], list[int]] | None:
        """(msgpack, hash, time bound) of the events in uncompressed blocks, read without
        the row lock: the function's head check (same version, same seal) proves them
        current. None when they are not the tail from the seal mark to ``actual`` (the
        session moved on); with the row locked that is damage: CorruptLog, since a
        merge over them would write sealed blocks over the wrong seqs."""
        if actual == head.sealed:  # after a merge (always, for bulk appends): no read
            return [], [], []
        rows = self._db.execute(
            "SELECT first_seq, last_seq, t_max, body FROM convlog_blocks WHERE sid=%s AND "
            "last_seq>=%s ORDER BY last_seq", (head.sid, head.sealed), binary=True).fetchall()
        problem = seal_problem(head.fork_seq, head.sealed,
                               [(int(r[0]), int(r[1]), bytes(r[3][:1])) for r in rows],
                               end=actual, tail=self.codec.TAIL)
        if problem is None:
            canon, hashes, times = self.codec.join_tail((r[2], r[3]) for r in rows
                                                    if r[1] > head.sealed)
            if len(canon) == actual - head.sealed:
                return canon, hashes, times
            problem = (f"the tail blocks after the seal mark {head.sealed} hold {len(canon)} "
                       f"event(s) for seqs {head.sealed + 1}..{actual}")
        if self._db.info.transaction_status != pq.TransactionStatus.IDLE:
            raise CorruptLog(session_id, head.sealed + 1, problem)  # the row is locked
        return None

    def _raw_block_at(self, sid: int, seq: int) -> tuple[int, bytes] | None:
        """(first seq, body) of the session's block holding ``seq`` (for a seal: the
        blocks it reads are sealed or the parent's prefix, which never change)."""
        row = self._db.execute("SELECT first_seq, body FROM convlog_blocks WHERE sid=%s AND "
                               "last_seq>=%s ORDER BY last_seq LIMIT 1", (sid, seq)).fetchone()
        if row is None or int(row[0]) > seq:
            return None
        return int(row[0]), bytes(row[1])

    def _raw_fork(self, sid: int) -> tuple[int | None, int, str]:
        row = self._db.execute(
            "SELECT p.sid, s.fork_seq, s.id FROM convlog_sessions s LEFT JOIN convlog_sessions p "
            "ON p.id = s.parent WHERE s.sid=%s", (sid,)).fetchone()
        if row is None:
            raise StoreError(f"no session row for key {sid}")
        return (None if row[0] is None else int(row[0])), int(row[1] or 0), str(row[2])

    # ------------------------------------------------------------------ reading

    def find(self, event_id: str) -> tuple[str, int] | None:
        rows = self._rows("SELECT sid, seq FROM convlog_ids WHERE id = %s",
                          (self.codec.id_key(event_id),))
        return None if not rows else (self._name(int(rows[0][0])), int(rows[0][1]))

    def last_position(self) -> int:
        """The placement counter: it moves in the transaction that adds the log rows,
        so it equals their last position (verify checks that it does)."""
        rows = self._rows("SELECT last FROM convlog_position", ())
        return int(rows[0][0]) if rows else 0

    # ------------------------------------------------------------------ live

    def subscribe(self, after: int, *, session_id: str | None, idle_timeout: float | None,
                  poll: float, stop: Callable[[], bool] | None) -> Iterator[Record]:
        """:meth:`PostgresStore.subscribe`: the backlog, then what NOTIFY announces."""
        sid = None if session_id is None else self._sid(session_id)
        # LISTEN before the backlog is read: no commit falls between the two.
        listener = Listener(lambda: connect(self.dsn), closed=lambda: self.closed)

        def ended() -> bool:  # asked for, or the store closed under the subscription
            return self.closed or (stop is not None and stop())

        try:
            yield from follow(
                lambda last: self._read_pages(last, sid),
                lambda last, seconds: listener.wait(last, sid, seconds),
                after=after, idle_timeout=idle_timeout, poll=poll, stop=ended)
        except psycopg.Error:
            # The store was closed (by another thread) while a read was under way:
            # the subscription ends, as a stop() would end it. Any other failure is
            # the caller's to see.
            if not self.closed:
                raise
        finally:
            listener.close()

    def _read_pages(self, after: int, sid: int | None) -> Iterator[Record]:
        """What ``read_all(after)`` returns, in two queries a page: the log page, then
        every block it needs. A subscriber behind many sessions' one-event blocks made
        a round trip per event through ``read_all``, which capped it (on a busy
        machine) below the rate of a few writers."""
        while True:
            # PostgreSQL keeps a log row per event: its ranges are of one event each.
            rows = [(p, s, q) for p, s, q, _ in self._log_ranges(after, sid, _LIVE_PAGE)]
            if not rows:
                return
            held = self._page_blocks(after, int(rows[-1][0]), sid)
            decoded: dict[tuple[int, int], list[Any]] = {}
            decode = self.codec.decode
            for position, s, seq in rows:
                block = _holding(held.get(s, ()), seq)
                if block is None:
                    raise CorruptLog(self._name(s), seq, f"position {position} has no stored "
                                     "event")
                events = decoded.get((s, block[0]))
                if events is None:
                    events = decoded[(s, block[0])] = decode(block[2], self._name(s))
                if seq - block[0] >= len(events):  # a body shorter than its row's seqs
                    raise CorruptLog(self._name(s), seq, f"the block of seqs {block[0]}.."
                                     f"{block[1]} holds {len(events)} event(s)")
                yield Record(int(position), events[seq - block[0]])
                after = position
            if len(rows) < _LIVE_PAGE:
                return

    def _page_blocks(self, after: int, upto: int, sid: int | None
                     ) -> dict[int, list[tuple[int, int, bytes]]]:
        """sid -> (first seq, last seq, body) of the blocks holding positions after..upto,
        in seq order (one snapshot: a merge is seen whole or not at all)."""
        out: dict[int, list[tuple[int, int, bytes]]] = {}
        for s, first, last, body in self._rows(
                _PAGE_BLOCKS.format(only="" if sid is None else "AND sid = %s"),
                (after, upto) if sid is None else (after, upto, sid)):
            out.setdefault(int(s), []).append((int(first), int(last), bytes(body)))
        return out


class PostgresReader(SQLReader):
    """Verification of a PostgreSQL store: the shared SQL walk, and its id rows."""

    recorder: PostgresRecorder

    def verify_ids(self, ids: dict[int, str]) -> str | None:
        seen = 0
        id_key = self.codec.id_key
        for key, position in self.recorder._rows(
                "SELECT i.id, l.position FROM convlog_ids i LEFT JOIN convlog_log l "
                "ON l.sid = i.sid AND l.seq = i.seq", ()):
            given = None if position is None else ids.get(int(position))
            if given is None or id_key(given) != bytes(key):
                return (f"the row for id {bytes(key).hex()} does not name an event stored at "
                        f"a position (position {position})")
            seen += 1
        return None if seen == len(ids) else f"{len(ids) - seen} event(s) are not indexed"
