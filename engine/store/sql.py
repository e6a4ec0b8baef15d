"""The SQL the SQLite and PostgreSQL recorders share, written once for both dialects.

Both keep the same tables (PostgreSQL's prefixed ``convlog_``) and the same block
format, so every query that reads sessions, blocks, the position log, the id
index or snapshots is one template here. A :class:`Dialect` fills in what
differs: the parameter placeholder and the table names. Upserts use
``ON CONFLICT ... DO UPDATE``, which both speak. What stays per backend is what
really differs: the schema's column types, the migration, and the write path
(SQLite's transaction kept open for a batched window, PostgreSQL's one-round-trip
append function).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from engine.errors import CorruptLog, UnknownSession
from engine.store import blocks
from engine.store.base import SessionInfo
from engine.store.blockread import BlockReader, Range

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
    find_event: str
    lookup_one: str
    bodies_after_time: str
    last_position: str
    log_page: str
    log_page_of: str
    positions: str
    put_snapshot: str
    latest_snapshot: str
    snapshots_at: str  # its {pairs} is one "(?, ?)" per (name, seq) asked for
    pair: str
    all_ids: str
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
            find_event=d.sql("SELECT l.sid, l.seq FROM {ids} i JOIN {log} l "
                             "ON l.position = i.position WHERE i.id = ?"),
            lookup_one=d.sql("SELECT l.sid, l.seq, l.position FROM {ids} i JOIN {log} l "
                             "ON l.position = i.position WHERE i.id = ?"),
            bodies_after_time=d.sql("SELECT body FROM {blocks} WHERE sid=? AND last_seq>=? "
                                    "AND t_max>? ORDER BY last_seq"),
            last_position=d.sql("SELECT COALESCE(MAX(position), 0) FROM {log}"),
            log_page=d.sql("SELECT position, sid, seq FROM {log} WHERE position>? "
                           "ORDER BY position LIMIT ?"),
            log_page_of=d.sql("SELECT position, sid, seq FROM {log} WHERE position>? AND "
                              "sid=? ORDER BY position LIMIT ?"),
            positions=d.sql("SELECT seq, position FROM {log} WHERE sid=?"),
            put_snapshot=d.sql("INSERT INTO {snapshots} VALUES (?, ?, ?, ?) ON CONFLICT "
                               "(sid, name, seq) DO UPDATE SET body = excluded.body"),
            all_ids=d.sql("SELECT id, position FROM {ids}"),
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
    """The reading half of the SQL recorders, over two hooks: ``_rows`` runs a query,
    ``_write_one`` runs one write statement in the backend's write transaction."""

    _sql: Statements
    _lock: threading.RLock
    _head_with_events = True  # the session row is updated in the append's transaction

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

    def session_info(self, session_id: str) -> SessionInfo:
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

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        rows = self._rows(self._sql.find_event, (blocks.id_key(event_id),))
        return None if not rows else (self._name(int(rows[0][0])), int(rows[0][1]))

    def _bodies_after_time(self, sid: int, first: int, time_ms: int) -> list[bytes]:
        return [bytes(body) for (body,) in self._rows(self._sql.bodies_after_time,
                                                      (sid, first, time_ms))]

    def last_position(self) -> int:
        rows = self._rows(self._sql.last_position, ())
        return int(rows[0][0]) if rows else 0

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

    def _verify_ids(self, ids: dict[int, str]) -> str | None:
        # A row per event id (PostgreSQL); SQLite overrides this for its runs.
        seen = 0
        for key, pos in self._rows(self._sql.all_ids, ()):
            given = ids.get(int(pos))
            if given is None or blocks.id_key(given) != bytes(key):
                return f"the row for position {pos} does not name the event stored there"
            seen += 1
        return None if seen == len(ids) else f"{len(ids) - seen} event(s) are not indexed"

    def _write_state_problem(self, session_id: str) -> str | None:
        row = self._rows(self._sql.seal_state, (session_id,))
        if not row:
            return None
        sid, fork_seq, version, sealed = row[0]
        rows = self._rows(self._sql.seal_blocks, (sid, sealed))
        return seal_problem(fork_seq, int(sealed),
                            [(int(r[0]), int(r[1]), bytes(r[2])) for r in rows],
                            end=max(int(version), fork_seq or 0))

    # -- snapshots

    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._write_one(self._sql.put_snapshot, (self._sid(session_id), name, seq, data))

    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        rows = self._rows(self._sql.latest_snapshot, (self._sid(session_id), name, max_seq))
        return None if not rows else (int(rows[0][0]), bytes(rows[0][1]))

    def _snapshots_at(self, session_id: str,
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


_SNAPSHOT_CHUNK = 400  # pairs per read: two parameters each, below SQLite's oldest limit


def seal_problem(fork_seq: int | None, sealed: int,
                 rows: Sequence[tuple[int, int, bytes]], *, end: int) -> str | None:
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
            if kind == blocks.TAIL:
                return f"the seal mark {sealed} ends a tail block, not a sealed one"
            continue
        if first != expected or kind != blocks.TAIL:
            return (f"the blocks after the seal mark {sealed} are not the tail: seq "
                    f"{expected} is {'missing' if first > expected else 'sealed or repeated'}")
        expected = last + 1
    if sealed > base and not (rows and rows[0][1] == sealed):
        return f"no sealed block ends at the seal mark {sealed}"
    if expected != end + 1:
        return f"the tail ends at seq {expected - 1}, the session at {end}"
    return None
