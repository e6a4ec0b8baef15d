"""The store contract: append a batch with an expected version, read events back.

A store knows nothing of transition rules; the :class:`~engine.session.Session`
checks events before they reach it. Forks share their parent's prefix: a fork
stores only its own events and reads the parent's first ``fork_seq`` events
through the lineage.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence

import attrs

from engine.errors import ConcurrencyError
from engine.events import AnyEvent, Event


@attrs.frozen
class SessionInfo:
    id: str
    created: int
    parent: str | None = None
    fork_seq: int | None = None


class Store(abc.ABC):
    """Backends implement the ``_own_*`` methods over a session's own events only."""

    url: str

    # -- sessions
    @abc.abstractmethod
    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo: ...

    @abc.abstractmethod
    def session_info(self, session_id: str) -> SessionInfo:
        """Raises UnknownSession."""

    @abc.abstractmethod
    def sessions(self) -> list[SessionInfo]: ...

    # -- events
    @abc.abstractmethod
    def _own_version(self, session_id: str) -> int:
        """Highest own seq stored for the session, 0 when none."""

    @abc.abstractmethod
    def _append(self, session_id: str, events: Sequence[Event], expected_version: int) -> None:
        """Atomically store events (seqs expected_version+1..), or raise ConcurrencyError."""

    @abc.abstractmethod
    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]: ...

    @abc.abstractmethod
    def find_event(self, event_id: str) -> tuple[str, int] | None:
        """(session id, seq) of the stored event with this id."""

    @abc.abstractmethod
    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        """Smallest own seq >= first whose time is after time_ms."""

    # -- snapshots (caches of projection state; never the truth)
    @abc.abstractmethod
    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None: ...

    @abc.abstractmethod
    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        """The snapshot with the greatest seq <= max_seq."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release resources."""

    # ------------------------------------------------------------------ shared logic

    def lineage(self, session_id: str) -> list[tuple[str, int | None]]:
        """[(session, last seq read from it)] from the root ancestor down to this session."""
        chain: list[tuple[str, int | None]] = []
        info = self.session_info(session_id)
        limit: int | None = None
        while True:
            chain.append((info.id, limit))
            if info.parent is None:
                break
            limit = info.fork_seq if limit is None else min(limit, info.fork_seq or 0)
            info = self.session_info(info.parent)
        chain.reverse()
        return chain

    def version(self, session_id: str) -> int:
        info = self.session_info(session_id)
        own = self._own_version(session_id)
        return max(own, info.fork_seq or 0)

    def append(self, session_id: str, events: Sequence[Event], expected_version: int) -> None:
        """Store events whose seqs follow ``expected_version``; all or nothing."""
        actual = self.version(session_id)
        if actual != expected_version:
            raise ConcurrencyError(session_id, expected_version, actual)
        for offset, e in enumerate(events, start=1):
            if e.seq != expected_version + offset or e.session_id != session_id:
                raise ValueError(f"event {e.id} has seq {e.seq} / session {e.session_id}")
        if events:
            self._append(session_id, events, expected_version)

    def read(self, session_id: str, first: int = 1, last: int | None = None) -> Iterator[AnyEvent]:
        """Events first..last (inclusive) of the session, through its fork lineage."""
        start = first
        end = last if last is not None else 1 << 62
        for sid, limit in self.lineage(session_id):
            stop = end if limit is None else min(limit, end)
            if start <= stop:
                yield from self._own_read(sid, start, stop)
            if limit is not None:
                start = max(start, limit + 1)

    def contains(self, session_id: str, event_id: str) -> int | None:
        """The seq of ``event_id`` if it belongs to this session's history (lineage included)."""
        found = self.find_event(event_id)
        if found is None:
            return None
        where, seq = found
        for sid, limit in self.lineage(session_id):
            if sid == where and (limit is None or seq <= limit):
                return seq
        return None

    def seq_at_time(self, session_id: str, time_ms: int) -> int:
        """Length of the longest prefix whose events all have time <= time_ms."""
        first = 1
        for sid, limit in self.lineage(session_id):
            after = self._own_seq_after_time(sid, time_ms, first)
            if after is not None and (limit is None or after <= limit):
                return after - 1
            if limit is not None:
                first = limit + 1
        return self.version(session_id)
