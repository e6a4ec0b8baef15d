"""The store composed of parts: a recorder that keeps events, a reader that verifies them.

:class:`ComposedStore` is the one implementation of :class:`~engine.store.base.Store`
(the interface a user calls): the append pipeline and the reads over lineage,
written once. A backend does not inherit it: it is a *recorder*, a plain object
that keeps sessions, events and snapshots in its own layout
(:class:`EventRecorder`), and :class:`ComposedStore` wraps it (as eventsourcing
composes ``EventStore(mapper, recorder)``). Verification is a third part, a
*reader* over what the recorder selects (:class:`VerifyReader`, which
``engine.store.verify`` walks as ``store.reader``); a recorder without sealed blocks
or position ranges uses :class:`EventReader`, which walks one :class:`Stored` per
event.

A recorder is handed the prepared batch (the events, the canonical bytes the door
made and their chain hashes) and keeps whichever of those its format needs: the
memory recorder keeps the events themselves, so its reads decode nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import msgspec

from engine.codec import MAX_EVENT_BYTES, canonical
from engine.errors import (
    BadBatch,
    ConcurrencyError,
    DuplicateEventId,
    EventIdConflict,
    EventTooLarge,
    InvalidEvent,
    PartialDuplicate,
    StoreError,
)
from engine.events import AnyEvent, Event
from engine.store.base import (
    _CHECKED_SESSIONS,
    _EVENT_ID,
    _ID_OK,
    _IDS_OK,
    _SEQ,
    _SESSION_ID,
    _STR,
    ANY,
    BATCHED,
    NO_STREAM,
    STREAM_EXISTS,
    SYNC,
    Admitted,
    Appended,
    Expected,
    IdTaken,
    Prepared,
    Record,
    SessionInfo,
    Span,
    Stamped,
    Store,
    Stored,
    StreamState,
    check_id,
    check_snapshot_name,
    follow,
)
from engine.store.chain import GENESIS, Chain


def _load_door() -> None:
    """Bind :func:`admit` and :func:`admit_all` to the door's own functions, on the first
    write: the door compiles its checks from the event catalog at import (tens of ms),
    which a read command never needs. After the first call a write pays nothing."""
    global admit, admit_all
    from engine.store import door  # noqa: PLC0415 - see the docstring

    admit, admit_all = door.admit, door.admit_all


def _first_admit(event: Event) -> bytes:
    _load_door()
    return admit(event)


def _first_admit_all(events: Iterable[Event], *, stamped: bool = False) -> list[bytes]:
    _load_door()
    return admit_all(events, stamped=stamped)


admit: Callable[[Event], bytes] = _first_admit
admit_all: Callable[..., list[bytes]] = _first_admit_all


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
    """The store, written once, over a backend's parts: its ``recorder`` (the storage),
    verified by its ``reader`` (by default an :class:`EventReader` over the recorder).

    The append pipeline is what :meth:`append` runs: id checks, the duplicate-id rule
    (:meth:`_match`), the expected version, the door and the canonical bytes
    (:func:`engine.store.door.admit`), the hash chain (:meth:`_prepare`), in the one
    loop :meth:`_record` over the recorder's write hooks (``lock``, ``head``,
    ``stored_ids``, ``insert``). The reads follow a session's fork lineage over the
    recorder's ``select`` of a session's own events.
    """

    durability: str = SYNC
    chain: Chain = Chain(None)
    max_event_bytes: int = MAX_EVENT_BYTES
    # Why appends are refused (a keyed store opened without its key), else None.
    _refuse: str | None = None
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

    def _configure(self, url: str, *, durability: str, key: bytes | None,
                   max_event_bytes: int | None, durabilities: tuple[str, ...] = (SYNC, BATCHED),
                   ) -> None:
        """The constructor preamble every backend shares."""
        self.url = url
        if durability not in durabilities:
            raise StoreError(f"unknown durability {durability!r}; use sync or batched")
        self.durability = durability
        self.chain = Chain(key)
        if max_event_bytes is not None:
            self.max_event_bytes = max_event_bytes

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

    # ------------------------------------------------------------------ sessions

    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        check_id("session", session_id)
        if parent is not None:
            self.session_info(parent)
        # The parent's prefix up to the fork point never changes: no lock needed.
        genesis = self._genesis(parent, fork_seq)
        info = SessionInfo(session_id, created, parent, fork_seq)
        self.recorder.create(info, genesis)
        return info

    def session_info(self, session_id: str) -> SessionInfo:
        return self.recorder.info(session_id)

    def sessions(self) -> list[SessionInfo]:
        return self.recorder.sessions()

    # ------------------------------------------------------------------ appending

    def append(self, session_id: str, events: Iterable[Event],
               expected_version: Expected = ANY) -> Appended:
        if self._refuse:
            raise StoreError(self._refuse)
        if session_id not in _CHECKED_SESSIONS:
            check_id("session", session_id)
            if len(_CHECKED_SESSIONS) < 100_000:
                _CHECKED_SESSIONS.add(session_id)
        if events.__class__ is Stamped and events and expected_version.__class__ is int:
            # The session's own stamp (see Stamped): nothing of it to check here.
            try:
                return self._record(session_id, events, expected_version)
            except IdTaken:
                return self._taken(session_id, events)
        batch = events if type(events) is list or events.__class__ is Admitted else list(events)
        if expected_version.__class__ is not int and (isinstance(expected_version, bool) or
                                                      not isinstance(expected_version,
                                                                     int | StreamState)):
            raise TypeError(f"expected_version must be an int or a StreamState, "
                            f"not {expected_version!r}")
        if len(batch) == 1:  # the common case: no set of ids to build
            e = batch[0]
            check_id("event", e.id)
            if e.session_id and e.session_id != session_id:
                raise BadBatch(f"event {e.id} has session {e.session_id}, not {session_id}")
            try:
                return self._record(session_id, batch, expected_version)
            except IdTaken:
                return self._taken(session_id, batch)
        # The whole batch at once (one join, one match, two sets) when it is well formed;
        # the loop below only runs to name what is wrong with one that is not.
        eids = list(map(_EVENT_ID, batch))
        try:
            joined = "\n".join(eids)
            # (The count: an id holding a newline would otherwise pass as two.)
            fine = (_IDS_OK(joined) is not None and ".." not in joined
                    and joined.count("\n") == len(eids) - 1
                    and set(map(type, eids)) == _STR
                    and len(set(eids)) == len(eids)
                    and set(map(_SESSION_ID, batch)) <= {"", session_id})
        except TypeError:  # an id that is not a str
            fine = False
        if fine:
            try:
                return self._record(session_id, batch, expected_version)
            except IdTaken:
                return self._taken(session_id, batch)
        ids: set[str] = set()
        ok = _ID_OK
        for e in batch:
            eid = e.id
            if eid.__class__ is not str or ok(eid) is None:
                check_id("event", eid)  # raises, naming the broken rule
            if eid in ids:
                raise DuplicateEventId(eid, "another event of the same batch")
            ids.add(eid)
            if e.session_id and e.session_id != session_id:
                raise BadBatch(f"event {eid} has session {e.session_id}, not {session_id}")
        if not batch:
            self._check_expected(session_id, expected_version, self.version(session_id))
            return Appended(session_id, (), ())
        try:
            return self._record(session_id, batch, expected_version)
        except IdTaken:
            return self._taken(session_id, batch)

    def _taken(self, session_id: str, events: Sequence[Event]) -> Appended:
        """The recorder's id index refused the insert (:class:`IdTaken`, nothing was
        written): classify the batch against what is stored now."""
        retried = self._classify(session_id, events, self._stored_ids(session_id, events))
        if retried is not None:
            return retried
        raise StoreError("id index conflict without a stored id")

    def _record(self, session_id: str, events: Sequence[Event], expected: Expected) -> Appended:
        """The write loop, atomically, under the recorder's write lock: the session's
        head, the ids already stored (a retry returns the original result), the
        decision (:meth:`_decide`: expected version, prepared batch), the insert; or
        raise and store nothing. A recorder that can do all of it in one round trip
        overrides this coarser hook and still decides through :meth:`_decide`
        (PostgreSQL)."""
        with self._write_lock:
            actual, head = self._write_head(session_id)
            found = self._early_ids(session_id, events)
            if found:
                retried = self._classify(session_id, events, found)
                if retried is not None:
                    return retried
            batch = self._decide(
                session_id, events, expected, actual=actual, head=head,
                stored=(lambda: found) if found is not None
                else (lambda: self._stored_ids(session_id, events)))
            if isinstance(batch, Appended):  # a retry of a batch that did land
                return batch
            pos0 = self._insert(session_id, batch)
        if len(batch.events) == 1:  # the hot path, without a call
            return Appended(session_id, (batch.first_seq,), (pos0,))
        return self._appended(session_id, batch, pos0)

    @staticmethod
    def _appended(session_id: str, batch: Prepared, pos0: int) -> Appended:
        """What an insert of ``batch`` at positions from ``pos0`` on stored."""
        n = len(batch.events)
        if n == 1:
            return Appended(session_id, (batch.first_seq,), (pos0,))
        first = batch.first_seq
        return Appended(session_id, tuple(range(first, first + n)), tuple(range(pos0, pos0 + n)))

    # The recorder's write hooks, called by _record in this order (bound to the
    # recorder's own methods on the instance by _compose).

    # The write lock (and the write transaction, where there is one), the recorder's
    # reusable context manager: every hook below runs inside it. Leaving it with an
    # exception or without an insert leaves nothing written.
    _write_lock: AbstractContextManager[object]

    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        return self.recorder.head(session_id)

    def _stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        return self.recorder.stored_ids(session_id, events)

    def _early_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]] | None:
        """The stored ids looked up before deciding, or None to look them up only
        when the decision fails (a recorder whose id index refuses a stored id at
        insert, raising :class:`IdTaken`)."""
        return self.recorder.stored_ids(session_id, events)

    def _insert(self, session_id: str, batch: Prepared) -> int:
        return self.recorder.insert(session_id, batch)

    # The decision, with the write lock held.

    @staticmethod
    def _check_expected(session_id: str, expected: Expected, actual: int) -> None:
        if expected is ANY:
            return
        if expected is NO_STREAM:
            if actual != 0:
                raise ConcurrencyError(session_id, "no_stream", actual)
        elif expected is STREAM_EXISTS:
            if actual == 0:
                raise ConcurrencyError(session_id, "stream_exists", actual)
        elif isinstance(expected, int) and expected != actual:
            raise ConcurrencyError(session_id, expected, actual)

    def _decide(self, session_id: str, events: Sequence[Event], expected: Expected, *,
                actual: int, head: bytes,
                stored: Callable[[], dict[str, tuple[str, int, int]]] | None
                ) -> Prepared | Appended:
        """With the write lock held, against the session's (version, head hash): check
        the expected version and prepare the batch. A batch that fails either is a
        retry when it is stored already (``stored()`` looks its ids up): then its
        original result, which the recorder returns without writing. ``stored=None``:
        the head may be stale (a cache), so a failure is raised as it is."""
        try:
            if expected is not ANY:
                self._check_expected(session_id, expected, actual)
            return self._prepare(session_id, events, actual, head)
        except (ConcurrencyError, BadBatch) as exc:
            if isinstance(exc, InvalidEvent) or stored is None:
                raise
            retried = self._classify(session_id, events, stored())
            if retried is not None:
                return retried
            raise

    def _classify(self, session_id: str, events: Sequence[Event],
                  found: dict[str, tuple[str, int, int]]) -> Appended | None:
        """``found``: id -> (session, seq, position) of the batch's stored ids.

        None when no id is stored; the original result for an exact retry; raises
        for a changed event under a stored id (:meth:`_match`) and for a batch that
        is partly stored.
        """
        if not found:
            return None
        for e in events:
            where = found.get(e.id)
            if where is not None:
                self._match(session_id, e, where[0], where[1])
        if len(found) == len(events):
            return Appended(session_id, tuple(found[e.id][1] for e in events),
                            tuple(found[e.id][2] for e in events), retried=True)
        raise PartialDuplicate(session_id, [e.id for e in events if e.id in found],
                               [e.id for e in events if e.id not in found])

    def _match(self, session_id: str, event: Event, where: str, seq: int, *,
               same_content: bool = True) -> int:
        """The duplicate-id rule, the one place it is decided: ``event``'s id is stored
        at ``where`` seq ``seq``. In this session's history (its fork lineage
        included) with the same content it is a retry: returns the seq. Under another
        session it is :class:`DuplicateEventId`; with different content,
        :class:`EventIdConflict`. The content compared is the canonical bytes,
        without what the log stamps (seq, session) and the envelope fields the writer
        left empty (time, actor), which the first append filled in."""
        if where != session_id and not any(
                sid == where and (limit is None or seq <= limit)
                for sid, limit in self.lineage(session_id)):
            raise DuplicateEventId(event.id, f"session {where} seq {seq}")
        if not same_content:
            return seq
        stored = next(iter(self._own_read(where, seq, seq)), None)
        if stored is None:
            raise StoreError(f"event {event.id} is indexed at session {where} seq {seq} "
                             "but not stored there (run convlog verify)")
        given = msgspec.structs.replace(
            event, seq=stored.seq, session_id=stored.session_id,
            time=event.time or stored.time, actor=event.actor or stored.actor)
        if admit(given) != canonical(stored):
            raise EventIdConflict(event.id, where, seq, _first_difference(given, stored))
        return seq

    def stored_seqs(self, session_id: str, events: Sequence[Event], *,
                    same_content: bool = True) -> list[int | None]:
        out: list[int | None] = []
        for e in events:
            hit = self.find_event(e.id) if e.id else None
            out.append(None if hit is None else self._match(
                session_id, e, hit[0], hit[1], same_content=same_content))
        return out

    def _prepare(self, session_id: str, events: Sequence[Event], actual: int,
                 prev_hash: bytes) -> Prepared:
        """Stamp seqs and session, encode canonical bytes, check sizes, chain hashes."""
        limit = self.max_event_bytes
        seq = actual + 1
        if len(events) == 1:  # the common case, without the loop's bookkeeping
            e = events[0]
            if e.seq != seq or e.session_id != session_id:
                if e.seq not in (0, seq):
                    raise BadBatch(f"event {e.id} has seq {e.seq}; the next seq of session "
                                   f"{session_id} is {seq}")
                e = msgspec.structs.replace(e, seq=seq, session_id=session_id)
            data = admit(e)
            if len(data) > limit:
                raise EventTooLarge(e.id, len(data), limit)
            return Prepared([e], [data], [self.chain.link(prev_hash, data)], seq)
        stamped = events.__class__ is Stamped and events[0].seq == seq
        # (A stamped batch is never changed below: no copy.)
        out = events if stamped and isinstance(events, list) else list(events)
        restamp = not stamped and (list(map(_SEQ, out)) != list(range(seq, seq + len(out)))
                                   or set(map(_SESSION_ID, out)) != {session_id})
        if restamp:
            for i, e in enumerate(out, start=seq):  # stamp what is missing, refuse the rest
                if e.seq != i or e.session_id != session_id:
                    if e.seq not in (0, i):
                        raise BadBatch(f"event {e.id} has seq {e.seq}; the next seq of "
                                       f"session {session_id} is {i}")
                    out[i - seq] = msgspec.structs.replace(e, seq=i, session_id=session_id)
        # Whole-batch passes: encode every event, then chain them in one loop.
        canon = events.canon if (  # the door's own bytes of exactly these events
            events.__class__ is Admitted and not restamp
            and len(events.canon) == len(out)) else admit_all(out, stamped=stamped)
        if max(map(len, canon)) > limit:
            e, data = next((e, d) for e, d in zip(out, canon, strict=True) if len(d) > limit)
            raise EventTooLarge(e.id, len(data), limit)
        hashes = self.chain.links(prev_hash, canon)
        return Prepared(out, canon, hashes, actual + 1)

    def _genesis(self, parent: str | None, fork_seq: int | None) -> bytes:
        """Where a new session's chain starts: the parent's hash at the fork point."""
        if parent is None or not fork_seq:
            return GENESIS
        for sid, limit in self.lineage(parent):
            if limit is None or fork_seq <= limit:  # the session that owns seq fork_seq
                found = self._hash_at(sid, fork_seq)
                if found is not None:
                    return found
                break
        raise StoreError(f"fork point {fork_seq} of session {parent} is not stored")

    def _hash_at(self, session_id: str, seq: int) -> bytes | None:
        """The stored hash of one own event, from the reader's walk (SQLStore looks it
        up by its index instead)."""
        for st in self.reader.stored(session_id):
            if st.seq == seq:
                return st.hash
        return None

    # ------------------------------------------------------------------ reading

    def lineage(self, session_id: str) -> list[tuple[str, int | None]]:
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

    def _own_version(self, session_id: str) -> int:
        return self.recorder.version(session_id)

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        return self.recorder.select(session_id, first, last)

    def read(self, session_id: str, first: int = 1, last: int | None = None) -> Iterator[AnyEvent]:
        start = first
        end = last if last is not None else 1 << 62
        for sid, limit in self.lineage(session_id):
            stop = end if limit is None else min(limit, end)
            if start <= stop:
                yield from self._own_read(sid, start, stop)
            if limit is not None:
                start = max(start, limit + 1)

    def contains(self, session_id: str, event_id: str) -> int | None:
        found = self.find_event(event_id)
        if found is None:
            return None
        where, seq = found
        for sid, limit in self.lineage(session_id):
            if sid == where and (limit is None or seq <= limit):
                return seq
        return None

    def find_event(self, event_id: str) -> tuple[str, int] | None:
        return self.recorder.find(event_id)

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        """Smallest own seq >= first whose time is after time_ms (a scan; block stores
        skip blocks by their time bound)."""
        for e in self._own_read(session_id, first, 1 << 62):
            if e.time > time_ms:
                return e.seq
        return None

    def seq_at_time(self, session_id: str, time_ms: int) -> int:
        first = 1
        for sid, limit in self.lineage(session_id):
            after = self._own_seq_after_time(sid, time_ms, first)
            if after is not None and (limit is None or after <= limit):
                return after - 1
            if limit is not None:
                first = limit + 1
        return self.version(session_id)

    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        if session_id is not None:
            self.recorder.info(session_id)  # UnknownSession
        yield from self.recorder.select_all(after, session_id, limit)

    def last_position(self) -> int:
        return self.recorder.last_position()

    def subscribe(self, after: int = 0, *, session_id: str | None = None,
                  idle_timeout: float | None = None, poll: float = 0.05,
                  stop: Callable[[], bool] | None = None) -> Iterator[Record]:
        # This version polls read_all; PostgreSQL waits on LISTEN/NOTIFY.
        return follow(lambda last: self.read_all(last, session_id=session_id), self._wait,
                      after=after, idle_timeout=idle_timeout, poll=poll, stop=stop)

    def _wait(self, position: int, timeout: float) -> None:
        """Block until something may have been committed after ``position``."""
        time.sleep(timeout)

    # ------------------------------------------------------------------ snapshots

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._put_snapshot(session_id, check_snapshot_name(name), seq, data)

    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        return self._latest_snapshot(session_id, check_snapshot_name(name), max_seq)

    def snapshots_at(self, session_id: str,
                     wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        return self._snapshots_at(session_id, [(check_snapshot_name(n), s) for n, s in wanted])

    def _snapshots_at(self, session_id: str,
                      wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        found = {}
        for name, seq in wanted:
            hit = self._latest_snapshot(session_id, name, seq)
            if hit is not None and hit[0] == seq:
                found[name, seq] = hit[1]
        return found

    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self.recorder.info(session_id)
        self.recorder.put_snapshot(session_id, name, seq, data)

    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        self.recorder.info(session_id)
        return self.recorder.latest_snapshot(session_id, name, max_seq)

    # ------------------------------------------------------------------ the store as a whole
    # (verbs a recorder may have: an older layout, a batched window, a connection or
    # file lock to let go of)

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


def _first_difference(given: Event, stored: Event) -> str:
    """The first top-level field whose value differs (for the conflict's message)."""
    a: dict[str, Any] = msgspec.to_builtins(given)
    b: dict[str, Any] = msgspec.to_builtins(stored)
    return next((name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)), "")
