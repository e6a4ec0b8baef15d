"""A session whose recorded events wait, in order, for the recorder's group commit.

The recorder writes one call's events from several places: the context message
and the settled tool calls of the previous answer when the answer starts, the
streamed events as chunks arrive, the end of the answer, an error message. Each
was its own store append. Here every :meth:`GroupedSession.record` only queues
its events; :meth:`GroupedSession.commit` appends all that waits as one batch
(what the recorder's commit window gathered: normally a whole short call).

What the log holds is what separate appends would have written, in the same
order. Reading the session's state (:attr:`lifecycle`), writing through any
other path (``abort``, the tool helpers) and forking commit what waits first,
so nothing ever sees the session without it; :attr:`version` counts it, so the
seqs a caller notes (a call's first and last) are the seqs the events get. If
the store refuses the whole group, its appends are made again one by one, as
they would have been without grouping: what the store accepts of them stays,
and the first refusal is raised (the recorder fails that call, as before).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.events import Event
from engine.lifecycle import Lifecycle
from engine.session import Clock, Session
from engine.store import Store
from engine.store.base import SessionInfo


class GroupedSession(Session):
    """A :class:`~engine.session.Session` whose :meth:`record` waits for :meth:`commit`."""

    def __init__(self, store: Store, info: SessionInfo, lifecycle: Lifecycle,
                 clock: Clock | None = None) -> None:
        super().__init__(store, info, lifecycle, clock)
        self._parts: list[Sequence[Event]] = []
        self._count = 0  # events in _parts

    @property
    def waiting(self) -> int:
        """How many recorded events wait for :meth:`commit`."""
        return self._count

    @property
    def version(self) -> int:
        """The seq of the last event recorded, committed or waiting."""
        return self.lifecycle_version + self.waiting

    @property
    def lifecycle_version(self) -> int:
        return super().version

    @property
    def lifecycle(self) -> Lifecycle:
        self.commit()
        return super().lifecycle

    def record(self, events: Sequence[Event]) -> list[Event]:
        """Queue ``events`` (fresh, as :meth:`Session.record` takes them) for the next
        commit. Returns nothing: their seqs are known only then."""
        if events:
            self._parts.append(list(events))
            self._count += len(events)
        return []

    def commit(self) -> None:
        """Append what waits as one batch (see the module doc for a refusal)."""
        parts = self._parts
        if not parts:
            return
        self._parts, self._count = [], 0
        if len(parts) == 1:
            Session.record(self, parts[0])
            return
        try:
            Session.record(self, [e for part in parts for e in part])
        except Exception:
            for part in parts:  # as separate appends: the store keeps what it takes
                Session.record(self, part)

    def _commit(self, events: Sequence[Event], *, own: bool = False) -> list[Event]:
        if self._count:
            self.commit()  # what was recorded first is committed first
        return super()._commit(events, own=own)

    def fork(self, at: int | None = None, *, session_id: str | None = None) -> Session:
        self.commit()  # the fork point may be among the waiting events
        return super().fork(at, session_id=session_id)


def open_grouped(store: Store, session_id: str) -> GroupedSession:
    """The stored session ``session_id``, its records grouped."""
    session = GroupedSession.open(store, session_id)
    assert isinstance(session, GroupedSession)
    return session
