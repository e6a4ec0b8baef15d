"""The SQL the SQLite and PostgreSQL recorders share, written once for both dialects.

Both keep the same tables (PostgreSQL's prefixed ``convlog_``) and the same block
format, so every query that reads sessions, blocks, the position log, the id
index or snapshots is one template here. A :class:`Dialect` fills in what
differs: the parameter placeholder and the table names. Upserts use
``ON CONFLICT ... DO UPDATE``, which both speak. What stays per backend is what
really differs: the schema's column types, the migration, and the write path
(SQLite's transaction kept open for a batched window, PostgreSQL's one-round-trip
append function).

The store is composed of three parts, none inheriting the pipeline: a recorder
(:class:`SQLRecorder`, a :class:`~engine.store.blockread.BlockReader` plus each
backend's write path), a verification reader over what it selects
(:class:`SQLReader`, a backend adds the check of its id index), and
:class:`SQLStore`, the shared :class:`~engine.store.composed.ComposedStore` with the
reads that follow a session's fork lineage through the recorder's blocks.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from functools import partial
from itertools import chain
from typing import Any

import attrs

from engine.errors import CorruptLog, StoreError, UnknownSession
from engine.events import AnyEvent, Event
from engine.store import blocks
from engine.store.base import Prepared, Record, SessionInfo
from engine.store.blockread import (
    BlockReader,
    BlockVerifier,
    Range,
    T,
    hash_in_block,
)
from engine.store.chain import GENESIS
from engine.store.composed import ComposedStore
from engine.store.runs import Run

_PAGE = 64  # blocks per query while reading: no cursor stays open across a yield


@attrs.frozen
class Dialect:
    placeholder: str  # "?" (sqlite3) or "%s" (psycopg)
    prefix: str  # table name prefix: "" or "convlog_"

    def sql(self, template: str) -> str:
        """``template`` with ``?`` as the placeholder and ``{table}`` names."""
        names = {t: self.prefix + t
                 for t in ("sessions", "blocks", "log", "ids", "names", "snapshots")}
        return template.format(**names).replace("?", self.placeholder)


SQLITE = Dialect("?", "")
POSTGRES = Dialect("%s", "convlog_")


@attrs.frozen
class Statements:
    """Every shared statement, rendered once per dialect."""

    sid: str
    name: str
    session: str
    sessions: str
    block_rows: str
    bodies_after_time: str
    log_page: str
    log_page_of: str
    positions: str
    put_snapshot: str
    latest_snapshot: str
    snapshots_at: str  # its {pairs} is one "(?, ?)" per (name, seq) asked for
    pair: str
    seal_state: str
    seal_blocks: str

    @classmethod
    def of(cls, d: Dialect) -> Statements:
        return cls(
            sid=d.sql("SELECT sid FROM {sessions} WHERE id=?"),
            name=d.sql("SELECT id FROM {sessions} WHERE sid=?"),
            session=d.sql("SELECT id, created, parent, fork_seq FROM {sessions} WHERE id=?"),
            sessions=d.sql("SELECT id, created, parent, fork_seq FROM {sessions} "
                           "ORDER BY created, id"),
            # The primary key seeks to the first block; the bound on last_seq (the block
            # holding ``last``) stops the scan there instead of at the session's end.
            block_rows=d.sql(
                "SELECT first_seq, last_seq, body FROM {blocks} WHERE sid=? AND last_seq>=? "
                "AND last_seq<=COALESCE((SELECT last_seq FROM {blocks} WHERE sid=? AND "
                "last_seq>=? ORDER BY last_seq LIMIT 1), ?) ORDER BY last_seq LIMIT ?"),
            bodies_after_time=d.sql("SELECT body FROM {blocks} WHERE sid=? AND last_seq>=? "
                                    "AND t_max>? ORDER BY last_seq"),
            log_page=d.sql("SELECT position, sid, seq FROM {log} WHERE position>? "
                           "ORDER BY position LIMIT ?"),
            log_page_of=d.sql("SELECT position, sid, seq FROM {log} WHERE position>? AND "
                              "sid=? ORDER BY position LIMIT ?"),
            positions=d.sql("SELECT seq, position FROM {log} WHERE sid=?"),
            put_snapshot=d.sql("INSERT INTO {snapshots} VALUES (?, ?, ?, ?) ON CONFLICT "
                               "(sid, name, seq) DO UPDATE SET body = excluded.body"),
            seal_state=d.sql("SELECT sid, fork_seq, version, sealed FROM {sessions} WHERE id=?"),
            seal_blocks=d.sql("SELECT first_seq, last_seq, substr(body, 1, 1) FROM {blocks} "
                              "WHERE sid=? AND last_seq>=? ORDER BY last_seq"),
            latest_snapshot=d.sql("SELECT seq, body FROM {snapshots} WHERE sid=? AND name=? "
                                  "AND seq<=? ORDER BY seq DESC LIMIT 1"),
            # A join from the pairs, so each is one primary-key seek (SQLite plans
            # "(name, seq) IN (VALUES ...)" as a scan of the session's every snapshot).
            # Both name a VALUES list's columns column1, column2.
            snapshots_at=d.sql("SELECT s.name, s.seq, s.body FROM (VALUES {{pairs}}) AS w "
                               "JOIN {snapshots} s ON s.sid = ? AND s.name = w.column1 "
                               "AND s.seq = w.column2"),
            pair=d.sql("(?, ?)"),
        )


class SQLRecorder(BlockReader):
    """The part of a recorder both SQL backends share, over two hooks: ``_rows`` runs
    a query, ``_write_one`` runs one write statement in the backend's write
    transaction. A backend adds its write path: the methods of
    :class:`~engine.store.composed.EventRecorder` below left abstract."""

    _sql: Statements
    _lock: threading.RLock
    url: str
    refuse: str | None = None  # why appends are refused (a keyed store opened without key)

    @abc.abstractmethod
    def lock(self) -> AbstractContextManager[object]: ...

    @abc.abstractmethod
    def create(self, info: SessionInfo, genesis: bytes) -> None: ...

    @abc.abstractmethod
    def head(self, session_id: str) -> tuple[int, bytes]: ...

    @abc.abstractmethod
    def row_head(self, session_id: str) -> tuple[int, bytes]:
        """(own version, head hash) as the session row says (verify compares the
        blocks to it; a fork's version does not count its fork point)."""

    @abc.abstractmethod
    def stored_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]: ...

    @abc.abstractmethod
    def insert(self, session_id: str, batch: Prepared) -> int: ...

    @abc.abstractmethod
    def find(self, event_id: str) -> tuple[str, int] | None: ...

    @abc.abstractmethod
    def last_position(self) -> int: ...

    def version(self, session_id: str) -> int:
        return self.row_head(session_id)[0]

    @abc.abstractmethod
    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """All rows of a read (seeing this connection's own pending writes)."""

    @abc.abstractmethod
    def _write_one(self, sql: str, params: Sequence[Any]) -> None:
        """One statement inside a write transaction of its own (or the open window)."""

    # -- sessions

    def _query_sid(self, session_id: str) -> int | None:
        rows = self._rows(self._sql.sid, (session_id,))
        return int(rows[0][0]) if rows else None

    def _query_name(self, sid: int) -> str:
        rows = self._rows(self._sql.name, (sid,))
        if not rows:  # a block or range names a session key no session row has
            raise CorruptLog("*", 0, f"stored events name session key {sid}, which no "
                                     "session row has")
        return str(rows[0][0])

    def info(self, session_id: str) -> SessionInfo:
        rows = self._rows(self._sql.session, (session_id,))
        if not rows:
            raise UnknownSession(session_id)
        r = rows[0]
        return SessionInfo(r[0], r[1], r[2], r[3])

    def sessions(self) -> list[SessionInfo]:
        return [SessionInfo(r[0], r[1], r[2], r[3]) for r in self._rows(self._sql.sessions, ())]

    # -- events

    def _block_rows(self, sid: int, first: int, last: int) -> Iterator[tuple[int, int, bytes]]:
        lo = first
        while True:
            rows = self._rows(self._sql.block_rows, (sid, lo, sid, last, last, _PAGE))
            for first_seq, last_seq, body in rows:
                yield first_seq, last_seq, bytes(body)
            if len(rows) < _PAGE:
                return
            lo = rows[-1][1] + 1

    def _bodies_after_time(self, sid: int, first: int, time_ms: int) -> list[bytes]:
        return [bytes(body) for (body,) in self._rows(self._sql.bodies_after_time,
                                                      (sid, first, time_ms))]

    # A row per event (PostgreSQL): ranges of one. SQLite overrides these with its
    # range table.
    def _log_ranges(self, after: int, sid: int | None, page: int) -> list[Range]:
        if sid is None:
            rows = self._rows(self._sql.log_page, (after, page))
        else:
            rows = self._rows(self._sql.log_page_of, (after, sid, page))
        return [(int(p), int(s), int(q), 1) for p, s, q in rows]

    def _position_ranges(self, sid: int) -> list[Range]:
        return [(int(p), sid, int(q), 1) for q, p in self._rows(self._sql.positions, (sid,))]

    # -- snapshots

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._write_one(self._sql.put_snapshot, (self._sid(session_id), name, seq, data))

    def latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        rows = self._rows(self._sql.latest_snapshot, (self._sid(session_id), name, max_seq))
        return None if not rows else (int(rows[0][0]), bytes(rows[0][1]))

    def snapshots_at(self, session_id: str,
                      wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        sid = self._sid(session_id)
        found: dict[tuple[str, int], bytes] = {}
        for i in range(0, len(wanted), _SNAPSHOT_CHUNK):
            part = wanted[i:i + _SNAPSHOT_CHUNK]
            query = self._sql.snapshots_at.format(pairs=", ".join([self._sql.pair] * len(part)))
            params: list[Any] = []
            for name, seq in part:
                params += (name, seq)
            params.append(sid)
            found.update({(r[0], int(r[1])): bytes(r[2]) for r in self._rows(query, params)})
        return found


class SQLReader(BlockVerifier):
    """The verification reader of a SQL recorder: the block walk, the session row's
    head and seal mark; each backend adds the check of its id index."""

    recorder: SQLRecorder
    head_with_events = True  # the session row is updated in the append's transaction

    @abc.abstractmethod
    def verify_ids(self, ids: dict[int, str]) -> str | None:
        """What is wrong with the id index, given every event's id by position."""

    def recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        return self.recorder.row_head(session_id)

    def recorded_genesis(self, session_id: str) -> bytes | None:
        return None  # the session row keeps its head; where the chain starts is the lineage's

    def write_state_problem(self, session_id: str) -> str | None:
        row = self.recorder._rows(self.recorder._sql.seal_state, (session_id,))
        if not row:
            return None
        sid, fork_seq, version, sealed = row[0]
        rows = self.recorder._rows(self.recorder._sql.seal_blocks, (sid, sealed))
        return seal_problem(fork_seq, int(sealed),
                            [(int(r[0]), int(r[1]), bytes(r[2])) for r in rows],
                            end=max(int(version), fork_seq or 0), tail=self.codec.TAIL)


class SQLStore(ComposedStore):
    """A SQL backend's store: the shared pipeline over its :class:`SQLRecorder`,
    verified by its :class:`SQLReader`, plus the reads that follow a session's fork
    lineage through the recorder's blocks (bulk replay in runs, the hash at a seq)."""

    recorder: SQLRecorder

    def _compose_sql(self, recorder: SQLRecorder, reader: SQLReader) -> None:
        self._compose(recorder, reader)
        self._refuse = recorder.refuse

    # The recorder answers for an unknown session itself (its key lookup raises
    # UnknownSession): no separate session read before these.
    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        return self.recorder.select_all(after, session_id, limit)

    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self.recorder.put_snapshot(session_id, name, seq, data)

    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        return self.recorder.latest_snapshot(session_id, name, max_seq)

    def _snapshots_at(self, session_id: str,
                      wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        return self.recorder.snapshots_at(session_id, wanted)

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        return self.recorder.seq_after_time(session_id, time_ms, first)

    def read_bodies(self, session_id: str, first: int, last: int) -> list[bytes]:
        """Raw block bodies holding the session's own events first..last (benchmarks)."""
        recorder = self.recorder
        return [body for _, body in recorder._blocks(recorder._sid(session_id), first, last)]

    def sealed_ends(self, session_id: str) -> list[int]:
        """The last seq of each sealed block that reads of the session decode (through
        its fork lineage), in order: a read of a range decodes each sealed block it
        touches, so a range that does not cross one of these costs one block."""
        recorder = self.recorder
        ends: list[int] = []
        for sid, limit in self.lineage(session_id):
            top = recorder.SEQ_MAX if limit is None else limit
            ends += [last for _, last, body in recorder._block_rows(recorder._sid(sid), 1, top)
                     if last <= top and recorder.codec.is_sealed(body)]
        return ends

    def read_runs(self, session_id: str, first: int = 1, last: int | None = None, *,
                  ids: bool = True) -> Iterator[AnyEvent | Run]:
        """:meth:`read`, for a bulk replay: in each packed block read whole, every
        stretch of deltas to one part comes as one :class:`Run` (``engine.store.runs``)
        instead of its events. A block cut by ``first`` or ``last`` is read in runs
        too, cut at both ends, so no run goes past ``last``. ``ids=False`` is for a fold
        that never reads an event's id: events of a packed block read whole then come
        with ``id == ""`` (no id is predicted or formatted)."""
        return chain.from_iterable(self._lineage_runs(session_id, first, last, ids))

    def read_exact(self, session_id: str, first: int = 1, last: int | None = None
                   ) -> Iterator[AnyEvent]:
        """:meth:`read`, for a short stretch inside a block: of a packed block cut by
        ``first`` or ``last`` only those events are decoded, where :meth:`read` decodes
        it whole and keeps it for the next read (the cheaper way to walk a block)."""
        codec = self.recorder.codec
        return chain.from_iterable(self._lineage_blocks(
            session_id, first, last, codec.decode, codec.decode_events_range))

    def _lineage_runs(self, session_id: str, first: int, last: int | None, ids: bool
                      ) -> Iterator[Sequence[AnyEvent | Run]]:
        codec = self.recorder.codec
        whole: Callable[[bytes, str], list[AnyEvent | Run]] = (
            codec.decode_runs if ids else partial(codec.decode_runs, ids=False))
        return self._lineage_blocks(session_id, first, last, whole, codec.decode_runs_range)

    def _lineage_blocks(self, session_id: str, first: int, last: int | None,
                        whole: Callable[[bytes, str], Sequence[T]],
                        part: Callable[[bytes, int, int, str], Sequence[T | AnyEvent]]
                        ) -> Iterator[Sequence[T | AnyEvent]]:
        """The blocks of first..last through the fork lineage: each ancestor's own
        events up to the fork point, then the session's own (``whole``/``part`` as in
        the recorder's ``_own_blocks``)."""
        start = first
        end = last if last is not None else 1 << 62
        for sid, limit in self.lineage(session_id):
            stop = end if limit is None else min(limit, end)
            if start <= stop:
                yield from self.recorder._own_blocks(sid, start, stop, whole, part)
            if limit is not None:
                start = max(start, limit + 1)

    def _hash_at(self, session_id: str, seq: int) -> bytes | None:
        recorder = self.recorder
        for first_seq, body in recorder._blocks(recorder._sid(session_id), seq, seq):
            return hash_in_block(self.chain.link, body, first_seq, seq,
                                 lambda s: self._hash_before(session_id, s), session_id,
                                 recorder.codec)
        return None

    def _hash_before(self, session_id: str, seq: int) -> bytes:
        """The chain hash of seq - 1 (where a block starting at ``seq`` continues)."""
        if seq - 1 <= (self.session_info(session_id).fork_seq or 0):
            info = self.session_info(session_id)
            return self._genesis(info.parent, info.fork_seq) if info.parent else GENESIS
        found = self._hash_at(session_id, seq - 1)
        if found is None:
            raise StoreError(f"seq {seq - 1} of session {session_id} is not stored")
        return found


_SNAPSHOT_CHUNK = 400  # pairs per read: two parameters each, below SQLite's oldest limit


def seal_problem(fork_seq: int | None, sealed: int,
                 rows: Sequence[tuple[int, int, bytes]], *, end: int,
                 tail: bytes = blocks.TAIL) -> str | None:
    """What is wrong with a session's seal mark (the ``sealed`` column of its session
    row), given its block rows ``(first seq, last seq, first byte)`` from the one
    ending at the mark on, and ``end``, its last stored seq; None if nothing. The mark
    is where the next merge starts: it must end a sealed block (or be the fork point,
    before any), and after it come only the uncompressed tail's blocks, gapless up to
    ``end``."""
    base = fork_seq or 0
    if sealed < base or sealed > end:
        return f"the seal mark {sealed} is outside the session's own seqs {base}..{end}"
    expected = sealed + 1
    for i, (first, last, kind) in enumerate(rows):
        if last == sealed and i == 0:
            if kind == tail:
                return f"the seal mark {sealed} ends a tail block, not a sealed one"
            continue
        if first != expected or kind != tail:
            return (f"the blocks after the seal mark {sealed} are not the tail: seq "
                    f"{expected} is {'missing' if first > expected else 'sealed or repeated'}")
        expected = last + 1
    if sealed > base and not (rows and rows[0][1] == sealed):
        return f"no sealed block ends at the seal mark {sealed}"
    if expected != end + 1:
        return f"the tail ends at seq {expected - 1}, the session at {end}"
    return None
