"""The store composed of parts: a recorder that keeps events, a reader that verifies them.

:class:`Store` is the append pipeline and the reads over lineage, written once. A
backend does not inherit it: it is a *recorder*, a plain object that keeps sessions,
events and snapshots in its own layout (:class:`EventRecorder`), and
:class:`ComposedStore` wraps it (as eventsourcing composes ``EventStore(mapper,
recorder)``). Verification is a third part, a *reader* over what the recorder
selects (:class:`VerifyReader`); a recorder without sealed blocks or position ranges
uses :class:`EventReader`, which walks one :class:`Stored` per event.

A recorder is handed the prepared batch (the events, the canonical bytes the door
made and their chain hashes) and keeps whichever of those its format needs: the
memory recorder keeps the events themselves, so its reads decode nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from engine.events import AnyEvent, Event
from engine.store.base import SYNC, Prepared, Record, SessionInfo, Span, Store, Stored


class EventRecorder(Protocol):
    """What a built-in backend implements: its storage, and nothing of the pipeline.

    Every write method runs inside ``lock()``'s context, which the pipeline enters.
    """

    def lock(self) -> AbstractContextManager[object]:
        """The write lock (and write transaction, where there is one): one writer at a
        time, re-entrant within a thread; leaving it without an insert writes nothing."""

    # -- sessions
    def create(self, info: SessionInfo, genesis: bytes) -> None:
        """Record a new session and where its chain starts; SessionExists if taken."""

    def info(self, session_id: str) -> SessionInfo:
        """Raises UnknownSession."""

    def sessions(self) -> list[SessionInfo]: ...

    # -- the write side
    def head(self, session_id: str) -> tuple[int, bytes]:
        """(version, fork point included; the hash the chain continues from) as the next
        append sees it; UnknownSession."""

    def stored_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]:
        """id -> (session, seq, position) of the batch's events already stored. (A
        recorder may add ``early_ids``, the same lookup inside ``lock()``, when it
        differs: the pipeline then calls that before deciding.)"""

    def insert(self, session_id: str, batch: Prepared) -> int:
        """Write the prepared batch after the session's head, all or nothing; returns
        the global position of its first event (the batch's positions are consecutive)."""

    # -- the read side
    def version(self, session_id: str) -> int:
        """The session's highest own seq, 0 when it has none."""

    def select(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        """The session's own events with seq ``first..last``, by seq."""

    def select_all(self, after: int, session_id: str | None,
                   limit: int | None) -> Iterator[Record]:
        """Own events of every session (or of one) after a global position, by position,
        as stored now."""

    def find(self, event_id: str) -> tuple[str, int] | None:
        """(session, seq) of a stored event id."""

    def last_position(self) -> int: ...

    # -- snapshots (caches of projection state, beside the log)
    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None: ...

    def latest_snapshot(self, session_id: str, name: str,
                        max_seq: int) -> tuple[int, bytes] | None: ...

    # (Optional, called by the store's verbs of the same names when present:
    # ``migrate() -> bool``, ``flush()``, ``close()``.)


class RowRecorder(EventRecorder, Protocol):
    """A recorder that keeps one hash and position per event: :class:`EventReader`
    verifies it."""

    def stored(self, session_id: str) -> Iterator[Stored]:
        """The session's own events as stored (undecoded where the format allows), by
        seq, each with its chain hash and global position."""


class VerifyReader(Protocol):
    """What ``engine.store.verify`` walks, over what a recorder selects."""

    head_with_events: bool

    def stored(self, session_id: str) -> Iterator[Stored]:
        """Every own event with its chain hash, by seq (also for a fork's chain start)."""

    def units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]: ...

    def link_holds(self, session_id: str, prev: bytes, span: Span) -> bool: ...

    def span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]: ...

    def verify_ids(self, ids: dict[int, str]) -> str | None: ...

    def own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None: ...

    def recorded_head(self, session_id: str) -> tuple[int, bytes] | None: ...

    def recorded_genesis(self, session_id: str) -> bytes | None: ...

    def write_state_problem(self, session_id: str) -> str | None: ...


class EventReader:
    """The verification reader of a recorder that keeps one row per event: each with
    its hash and position, no sealed blocks, no index apart from the events."""

    head_with_events = False

    def __init__(self, recorder: RowRecorder) -> None:
        self.recorder = recorder

    def stored(self, session_id: str) -> Iterator[Stored]:
        return self.recorder.stored(session_id)

    def units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        return iter(self.recorder.stored(session_id))

    def link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        raise NotImplementedError("this store has no sealed blocks")

    def span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        raise NotImplementedError("this store has no sealed blocks")

    def verify_ids(self, ids: dict[int, str]) -> str | None:
        return None  # the id lookup is the events themselves

    def own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        return None  # each Stored carries its position

    def recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        # (own version, hash of the last own event or where the chain starts): the
        # write head without the fork point (a fork with no own events stands there).
        version, head = self.recorder.head(session_id)
        return (version if version > (self.recorder.info(session_id).fork_seq or 0) else 0), head

    def recorded_genesis(self, session_id: str) -> bytes | None:
        return None

    def write_state_problem(self, session_id: str) -> str | None:
        return None


class ComposedStore(Store):
    """The store of a recorder: the pipeline and lineage reads of :class:`Store`, the
    storage of ``recorder``, verification by ``reader`` (by default an
    :class:`EventReader` over the recorder)."""

    recorder: EventRecorder
    reader: VerifyReader

    def __init__(self, recorder: RowRecorder, *, url: str, durability: str = SYNC,
                 key: bytes | None = None, max_event_bytes: int | None = None,
                 durabilities: tuple[str, ...] | None = None) -> None:
        """The store of a recorder verified by an :class:`EventReader`. A backend whose
        recorder needs the store's chain (to link sealed blocks) calls ``_configure``
        then :meth:`_compose` instead."""
        self._configure(url, durability=durability, key=key, max_event_bytes=max_event_bytes,
                        **({} if durabilities is None else {"durabilities": durabilities}))
        self._compose(recorder, EventReader(recorder))

    def _compose(self, recorder: EventRecorder, reader: VerifyReader) -> None:
        self.recorder = recorder
        self.reader = reader
        self._write_lock = recorder.lock()
        # The hooks of the append and read hot paths are the recorder's own bound methods,
        # set on the instance: a delegating method would add a Python frame per append
        # (a tenth of a streamed delta's cost in memory). The class-level methods below
        # say the same for readers of the code and for the type checker.
        # (A subclass that overrides one of them keeps its override.)
        hot = {"_write_head": recorder.head, "_stored_ids": recorder.stored_ids,
               "_early_ids": getattr(recorder, "early_ids", recorder.stored_ids),
               "_insert": recorder.insert,
               "_own_read": recorder.select, "_own_version": recorder.version,
               "find_event": recorder.find,
               "last_position": recorder.last_position, "session_info": recorder.info}
        # (setattr, not vars(self).update: asking for the instance's dict turns its inline
        # attribute values into a real dict, and every attribute read gets slower.)
        for name, bound in hot.items():
            if getattr(type(self), name) is getattr(_Hooks, name):
                setattr(self, name, bound)

    # -- sessions
    def _create_session(self, info: SessionInfo, genesis: bytes) -> None:
        self.recorder.create(info, genesis)

    def session_info(self, session_id: str) -> SessionInfo:
        return self.recorder.info(session_id)

    def sessions(self) -> list[SessionInfo]:
        return self.recorder.sessions()

    # -- the write hooks
    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        return self.recorder.head(session_id)

    def _head(self, session_id: str) -> tuple[int, bytes]:
        # (Store reads the head through _own_version and _recorded_head, both below.)
        head = self.reader.recorded_head(session_id)
        return head if head is not None else (0, self._genesis_of(session_id))

    def _genesis_of(self, session_id: str) -> bytes:
        info = self.recorder.info(session_id)
        return self._genesis(info.parent, info.fork_seq)

    def _own_version(self, session_id: str) -> int:
        return self.recorder.version(session_id)

    def _stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        return self.recorder.stored_ids(session_id, events)

    def _insert(self, session_id: str, batch: Prepared) -> int:
        return self.recorder.insert(session_id, batch)

    # -- reads
    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        return self.recorder.select(session_id, first, last)

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        return self.recorder.find(event_id)

    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        if session_id is not None:
            self.recorder.info(session_id)  # UnknownSession
        yield from self.recorder.select_all(after, session_id, limit)

    def last_position(self) -> int:
        return self.recorder.last_position()

    # -- snapshots
    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self.recorder.info(session_id)
        self.recorder.put_snapshot(session_id, name, seq, data)

    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        self.recorder.info(session_id)
        return self.recorder.latest_snapshot(session_id, name, max_seq)

    # -- what verification walks: the reader's (engine.store.verify calls these)
    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        self.recorder.info(session_id)
        return self.reader.stored(session_id)

    def _own_units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        return self.reader.units(session_id, deep=deep)

    def _link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        return self.reader.link_holds(session_id, prev, span)

    def _span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        return self.reader.span_links(session_id, prev, span)

    def _verify_ids(self, ids: dict[int, str]) -> str | None:
        return self.reader.verify_ids(ids)

    def _own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        return self.reader.own_positions(session_id)

    def _recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        return self.reader.recorded_head(session_id)

    def _recorded_genesis(self, session_id: str) -> bytes | None:
        return self.reader.recorded_genesis(session_id)

    def _write_state_problem(self, session_id: str) -> str | None:
        return self.reader.write_state_problem(session_id)

    @property
    def _head_with_events(self) -> bool:  # type: ignore[override]
        return self.reader.head_with_events

    # -- the public verbs a recorder may have (an older layout, a batched window, a
    # connection or file lock to let go of)
    def migrate(self) -> bool:
        migrate = getattr(self.recorder, "migrate", None)
        return False if migrate is None else bool(migrate())

    def flush(self) -> None:
        flush = getattr(self.recorder, "flush", None)
        if flush is not None:
            flush()

    def close(self) -> None:
        close = getattr(self.recorder, "close", None)
        if close is not None:
            close()


_Hooks = ComposedStore  # (whose hot hooks the constructor binds, unless overridden)
