"""``memory://``: a process-local store, for tests, benchmarks and embedding.

It keeps the decoded events themselves, so reads cost nothing; it still assigns
positions and chains hashes, so it passes the same contract as the durable stores.
Durability options are accepted and mean nothing here.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence

import msgspec

from engine.errors import SessionExists, UnknownSession
from engine.events import AnyEvent, Event
from engine.store.base import (
    Appended,
    Expected,
    Record,
    SessionInfo,
    Store,
    Stored,
    check_id,
)
from engine.store.chain import Chain


class MemoryStore(Store):
    def __init__(self, url: str = "memory://", *, key: bytes | None = None,
                 durability: str = "sync", max_event_bytes: int | None = None) -> None:
        self.url = url
        self.chain = Chain(key)
        self.durability = durability
        if max_event_bytes is not None:
            self.max_event_bytes = max_event_bytes
        self._lock = threading.RLock()
        self._sessions: dict[str, SessionInfo] = {}
        self._events: dict[str, list[AnyEvent]] = {}
        self._hashes: dict[str, list[bytes]] = {}
        self._positions: dict[str, list[int]] = {}
        self._genesis_of: dict[str, bytes] = {}
        self._ids: dict[str, tuple[str, int, int]] = {}
        self._log: list[tuple[str, int]] = []  # position - 1 -> (session, index in its list)
        self._snapshots: dict[tuple[str, str], list[tuple[int, bytes]]] = {}

    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        check_id("session", session_id)
        with self._lock:
            if session_id in self._sessions:
                raise SessionExists(session_id)
            if parent is not None:
                self.session_info(parent)
            genesis = self._genesis(parent, fork_seq)
            info = SessionInfo(session_id, created, parent, fork_seq)
            self._sessions[session_id] = info
            self._events[session_id] = []
            self._hashes[session_id] = []
            self._positions[session_id] = []
            self._genesis_of[session_id] = genesis
            return info

    def session_info(self, session_id: str) -> SessionInfo:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSession(session_id) from None

    def sessions(self) -> list[SessionInfo]:
        return sorted(self._sessions.values(), key=lambda s: (s.created, s.id))

    def _own_version(self, session_id: str) -> int:
        own = self._events[session_id]
        return own[-1].seq if own else 0

    def _head(self, session_id: str) -> tuple[int, bytes]:
        self.session_info(session_id)
        hashes = self._hashes[session_id]
        return self._own_version(session_id), hashes[-1] if hashes else self._genesis_of[
            session_id]

    def _append(self, session_id: str, events: Sequence[Event], expected: Expected) -> Appended:
        with self._lock:
            info = self.session_info(session_id)
            found = {e.id: self._ids[e.id] for e in events if e.id in self._ids}
            retried = self._classify(session_id, events, found)
            if retried is not None:
                return retried
            actual = max(self._own_version(session_id), info.fork_seq or 0)
            self._check_expected(session_id, expected, actual)
            _, head = self._head(session_id)
            batch = self._prepare(session_id, events, actual, head)
            own = self._events[session_id]
            first_index = len(own)
            first_pos = len(self._log) + 1
            own.extend(batch.events)  # type: ignore[arg-type]
            self._hashes[session_id].extend(batch.hashes)
            positions = range(first_pos, first_pos + len(batch.events))
            self._positions[session_id].extend(positions)
            for i, (e, pos) in enumerate(zip(batch.events, positions, strict=True)):
                self._ids[e.id] = (session_id, e.seq, pos)
                self._log.append((session_id, first_index + i))
            return Appended(session_id, tuple(e.seq for e in batch.events), tuple(positions))

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        own = self._events[session_id]
        if not own:
            return iter(())
        base = own[0].seq  # a fork's own events start after its fork point
        lo = max(first - base, 0)
        hi = max(last - base + 1, 0)
        return iter(own[lo:hi])

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        found = self._ids.get(event_id)
        return None if found is None else (found[0], found[1])

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        for e in self._events[session_id]:
            if e.seq >= first and e.time > time_ms:
                return e.seq
        return None

    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        if session_id is not None:
            self.session_info(session_id)
        end = len(self._log)
        count = 0
        for pos in range(after + 1, end + 1):
            sid, index = self._log[pos - 1]
            if session_id is not None and sid != session_id:
                continue
            yield Record(pos, self._events[sid][index])
            count += 1
            if limit is not None and count >= limit:
                return

    def last_position(self) -> int:
        return len(self._log)

    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        self.session_info(session_id)
        for e, h, pos in zip(self._events[session_id], self._hashes[session_id],
                             self._positions[session_id], strict=True):
            obj = msgspec.to_builtins(e)
            yield Stored(e.seq, h, obj, None, pos)

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        snaps = self._snapshots.setdefault((session_id, name), [])
        i = bisect.bisect_left(snaps, seq, key=lambda s: s[0])
        if i < len(snaps) and snaps[i][0] == seq:
            snaps[i] = (seq, data)
        else:
            snaps.insert(i, (seq, data))

    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        snaps = self._snapshots.get((session_id, name), [])
        i = bisect.bisect_right(snaps, max_seq, key=lambda s: s[0])
        return snaps[i - 1] if i else None
