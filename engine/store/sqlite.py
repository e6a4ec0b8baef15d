"""``sqlite:///path.db``: the embedded default, on the standard library's sqlite3 in WAL mode.

One row per event: (session key, seq, event id, time, msgpack body). Sessions get a
small integer key so rows do not repeat the session's UUID. Appends run in one
``BEGIN IMMEDIATE`` transaction that re-checks the expected version, so two
writers on one file cannot both win.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from engine.codec import decode_msgpack
from engine.errors import (
    ConcurrencyError,
    DuplicateEventId,
    SessionExists,
    StoreError,
    UnknownSession,
)
from engine.events import AnyEvent, Event
from engine.store.base import SessionInfo, Store

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    created INTEGER NOT NULL,
    parent TEXT,
    fork_seq INTEGER
);
CREATE TABLE IF NOT EXISTS events (
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    time INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events (id);
CREATE INDEX IF NOT EXISTS events_time ON events (sid, time);
CREATE TABLE IF NOT EXISTS snapshots (
    sid INTEGER NOT NULL,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (sid, name, seq)
) WITHOUT ROWID;
"""


class SQLiteStore(Store):
    def __init__(self, path: str, *, url: str | None = None, synchronous: str = "FULL") -> None:
        self.url = url or f"sqlite:///{path}"
        self.path = path
        if path != ":memory:":
            parent = Path(path).parent
            if not parent.is_dir():
                raise StoreError(f"cannot open {self.url}: directory {parent} does not exist")
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"{self.url} has schema {row[0]}, newer than {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from None
        self._sids: dict[str, int] = {}
        self._enc = msgspec.msgpack.Encoder()

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------ sessions

    def _sid(self, session_id: str) -> int:
        sid = self._sids.get(session_id)
        if sid is None:
            row = self._db.execute("SELECT sid FROM sessions WHERE id=?", (session_id,)).fetchone()
            if row is None:
                raise UnknownSession(session_id)
            sid = self._sids[session_id] = int(row[0])
        return sid

    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        try:
            self._db.execute(
                "INSERT INTO sessions (id, created, parent, fork_seq) VALUES (?, ?, ?, ?)",
                (session_id, created, parent, fork_seq),
            )
        except sqlite3.IntegrityError:
            raise SessionExists(session_id) from None
        return SessionInfo(session_id, created, parent, fork_seq)

    def session_info(self, session_id: str) -> SessionInfo:
        row = self._db.execute(
            "SELECT id, created, parent, fork_seq FROM sessions WHERE id=?", (session_id,)
        ).fetchone()
        if row is None:
            raise UnknownSession(session_id)
        return SessionInfo(row[0], row[1], row[2], row[3])

    def sessions(self) -> list[SessionInfo]:
        rows = self._db.execute(
            "SELECT id, created, parent, fork_seq FROM sessions ORDER BY created, id"
        ).fetchall()
        return [SessionInfo(r[0], r[1], r[2], r[3]) for r in rows]

    # ------------------------------------------------------------------ events

    def _own_version(self, session_id: str) -> int:
        row = self._db.execute(
            "SELECT MAX(seq) FROM events WHERE sid=?", (self._sid(session_id),)
        ).fetchone()
        return int(row[0] or 0)

    def _append(self, session_id: str, events: Sequence[Event], expected_version: int) -> None:
        sid = self._sid(session_id)
        enc = self._enc.encode
        rows = [(sid, e.seq, e.id, e.time, enc(e)) for e in events]
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            # Re-check inside the write lock: another process may have appended.
            actual = max(self._own_version(session_id), self.session_info(session_id).fork_seq or 0)
            if actual != expected_version:
                raise ConcurrencyError(session_id, expected_version, actual)
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError as exc:
            db.execute("ROLLBACK")
            ids = [e.id for e in events]
            for event_id in ids:
                found = self.find_event(event_id)
                if found is not None:
                    raise DuplicateEventId(event_id, f"session {found[0]} seq {found[1]}") from None
            if len(set(ids)) != len(ids):
                raise DuplicateEventId(ids[0], "another event of the same batch") from None
            raise StoreError(f"append to {session_id} failed: {exc}") from None
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        cur = self._db.execute(
            "SELECT body FROM events WHERE sid=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (self._sid(session_id), first, last),
        )
        while True:
            rows = cur.fetchmany(4096)
            if not rows:
                return
            for (body,) in rows:
                yield decode_msgpack(body)

    def read_bodies(self, session_id: str, first: int, last: int) -> list[bytes]:
        """Raw msgpack bodies of the session's own events (for benchmarks and verifiers)."""
        rows = self._db.execute(
            "SELECT body FROM events WHERE sid=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (self._sid(session_id), first, last),
        ).fetchall()
        return [r[0] for r in rows]

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        row = self._db.execute(
            "SELECT s.id, e.seq FROM events e JOIN sessions s ON s.sid = e.sid WHERE e.id=?",
            (event_id,),
        ).fetchone()
        return None if row is None else (row[0], int(row[1]))

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        row = self._db.execute(
            "SELECT MIN(seq) FROM events WHERE sid=? AND seq>=? AND time>?",
            (self._sid(session_id), first, time_ms),
        ).fetchone()
        return None if row[0] is None else int(row[0])

    # ------------------------------------------------------------------ snapshots

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?)",
            (self._sid(session_id), name, seq, data),
        )

    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        row = self._db.execute(
            "SELECT seq, body FROM snapshots WHERE sid=? AND name=? AND seq<=? "
            "ORDER BY seq DESC LIMIT 1",
            (self._sid(session_id), name, max_seq),
        ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))
