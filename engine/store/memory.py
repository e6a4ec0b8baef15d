"""``memory://``: a process-local store, for tests, benchmarks and embedding."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from engine.errors import DuplicateEventId, SessionExists, UnknownSession
from engine.events import AnyEvent, Event
from engine.store.base import SessionInfo, Store


class MemoryStore(Store):
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._sessions: dict[str, SessionInfo] = {}
        self._events: dict[str, list[AnyEvent]] = {}
        self._ids: dict[str, tuple[str, int]] = {}
        self._snapshots: dict[tuple[str, str], list[tuple[int, bytes]]] = {}

    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        if session_id in self._sessions:
            raise SessionExists(session_id)
        info = SessionInfo(session_id, created, parent, fork_seq)
        self._sessions[session_id] = info
        self._events[session_id] = []
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

    def _append(self, session_id: str, events: Sequence[Event], expected_version: int) -> None:
        for e in events:
            where = self._ids.get(e.id)
            if where is not None:
                raise DuplicateEventId(e.id, f"session {where[0]} seq {where[1]}")
        if len({e.id for e in events}) != len(events):
            raise DuplicateEventId(events[0].id, "another event of the same batch")
        own = self._events[session_id]
        own.extend(events)  # type: ignore[arg-type]
        for e in events:
            self._ids[e.id] = (session_id, e.seq)

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        own = self._events[session_id]
        if not own:
            return iter(())
        base = own[0].seq  # a fork's own events start after its fork point
        lo = max(first - base, 0)
        hi = max(last - base + 1, 0)
        return iter(own[lo:hi])

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        return self._ids.get(event_id)

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        for e in self._events[session_id]:
            if e.seq >= first and e.time > time_ms:
                return e.seq
        return None

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
