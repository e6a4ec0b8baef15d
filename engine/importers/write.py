"""Append a :class:`Plan` to a store: all of it checked first, then written; re-imports no-op.

A plan can hold several sessions (forks, child sessions), and a store appends
one session's batch atomically, not several. So the whole plan is first
appended to a scratch :class:`MemoryStore` (holding a copy of the sessions a
re-import extends) through ``Session.append``, where
the transition tables judge every event and a rejected one fails the import
before the real store sees a byte. A session that is new to the real store then
takes the scratch store's checked, stamped events in one ``Store.append``; a
session that exists (a re-import) goes through ``Session.append`` again, which
skips the events an earlier import of the same source wrote (their ids are the
importer's stable ids).
"""

from __future__ import annotations

from collections import Counter

import msgspec

from engine import events as ev
from engine.collector import collector_paused
from engine.errors import ConvlogError, UnknownSession
from engine.events import DEFAULT_ACTOR, SCHEMA_VERSION, Event
from engine.importers.base import ImportInputError, Plan, PlannedSession, SessionSummary
from engine.lifecycle import Lifecycle
from engine.session import Session
from engine.store import MemoryStore
from engine.store.base import Store, admitted
from engine.store.door import INT_MAX, admit, admit_all


@collector_paused()  # builds only: see engine.collector
def write_plan(store: Store, plan: Plan) -> None:
    """Check ``plan``, then append it to ``store``; fills the report. Nothing is
    written before the check passes. (A JSON number past 64 bits in a free-form
    value is held as the same int by every store: engine.codec.)"""
    _write_plan(store, plan)


def _write_plan(store: Store, plan: Plan) -> None:
    if all(_is_new(store, planned.id) for planned in plan.sessions):
        _write_new(store, plan)  # a first import: one pass, nothing to compare with
        return
    scratch = MemoryStore()
    for planned in plan.sessions:  # a re-import is judged against what is already there
        if not _is_new(store, planned.id):
            _mirror(store, scratch, planned.id)
    try:
        # The scratch store's door refuses a value of the wrong type (a JSON true where a
        # count belongs, an int over 64 bits) as InvalidEvent, before anything is written.
        _write(scratch, plan)
    except ImportInputError:
        raise
    except (ConvlogError, OverflowError, TypeError, ValueError) as exc:
        raise ImportInputError(plan.report.source,
                               f"the import does not form a valid log ({exc})") from exc
    opened: dict[str, Session] = {}
    for planned in plan.sessions:
        if _is_new(store, planned.id):
            # The scratch store has checked and stamped these events: a new session takes
            # them as they are, without a second pass through the transition tables.
            own = list(scratch.read(planned.id, (planned.fork_seq or 0) + 1))
            store.create_session(planned.id, created=planned.created, parent=planned.parent
                                 if planned.kind == "fork" else None,
                                 fork_seq=planned.fork_seq if planned.kind == "fork" else None)
            store.append(planned.id, own, planned.fork_seq or 0)
            _count(plan, planned, len(own))
        else:  # a re-import: Session.append skips the events already there
            session = opened[planned.id] = _open(store, planned, opened)
            before = session.version
            # A grown source may re-map a record it already wrote: the stored one stands.
            session.append(planned.events, keep_stored=True)
            _count(plan, planned, session.version - before)


def _write_new(store: Store, plan: Plan) -> None:
    """A plan whose sessions are all new to ``store``: each event is judged by the
    transition tables (a lifecycle per session, a fork's replaying its parent's
    prefix) and by the store's door, all before the first byte is written; then each
    session is one append of its stamped events."""
    checked = _checked(plan)
    for planned in plan.sessions:
        own, canon = checked[planned.id]
        fork = planned.kind == "fork"
        store.create_session(planned.id, created=planned.created,
                             parent=planned.parent if fork else None,
                             fork_seq=planned.fork_seq if fork else None)
        # The door proved each event in _checked: the store keeps those bytes (one proof
        # per event, and still none written before every event of the plan is proved).
        store.append(planned.id, admitted(own, canon) if len(own) > 1 else own,
                     planned.fork_seq or 0 if fork else 0)
        _count(plan, planned, len(own))


def _checked(plan: Plan) -> dict[str, tuple[list[Event], list[bytes]]]:
    """Each session's own events, stamped as ``Session.append`` stamps them, checked,
    with the door's bytes of each."""
    own: dict[str, tuple[list[Event], list[bytes]]] = {}
    history: dict[str, list[Event]] = {}  # each session's whole lineage, for its forks
    ids: set[str] = set()
    for planned in plan.sessions:
        shared: list[Event] = []
        if planned.kind == "fork":
            parent = history.get(planned.parent or "")
            at = planned.fork_seq or 0
            if parent is None or at > len(parent):
                raise ImportInputError(plan.report.source, f"fork {planned.id} shares "
                                       f"{at} events of a session the import does not hold")
            shared = parent[:at]
        try:
            mine, canon = _batch(plan, planned, shared, ids)
        except (ConvlogError, OverflowError, TypeError, ValueError):
            # A refusal: the event-by-event check names the first event the tables or
            # the door refuse, in the order they met it (the same error as before).
            mine, canon = _one_by_one(plan, planned, shared, ids)
        own[planned.id] = (mine, canon)
        history[planned.id] = shared + mine
    return own


def _lifecycle(planned: PlannedSession, shared: list[Event]) -> Lifecycle:
    lc = Lifecycle(planned.id)
    for e in shared:
        lc.replay(e)
    lc.begin()
    return lc


def _batch(plan: Plan, planned: PlannedSession, shared: list[Event],
           ids: set[str]) -> tuple[list[Event], list[bytes]]:
    """The session's events through the tables as one batch (``apply_batch`` decides a
    part's start and end inline), then the door over the accepted ones. Any refusal
    raises; ``ids`` is only extended when the whole session passes."""
    lc = _lifecycle(planned, shared)
    seen: set[str] = set()
    stamped: list[Event] = []
    append = stamped.append
    seq = lc.version
    # The envelope this loop stamps (id, session, seq, time, actor) each exactly a str or
    # an int in range: then the door's short proof skips it (admit_all's ``stamped``);
    # anything else leaves the whole batch to the proof of every field.
    vouched = planned.id.__class__ is str
    sid, created = planned.id, planned.created
    replace, versions, actors = msgspec.structs.replace, SCHEMA_VERSION, DEFAULT_ACTOR
    started = ev.MessageStarted
    for raw in planned.events:
        eid = raw.id
        if not eid or eid in ids or eid in seen:
            raise ImportInputError(plan.report.source,
                                   f"event id {eid!r} is not unique in the import")
        seen.add(eid)
        seq += 1
        # _stamp, inlined (it runs for every event of the import)
        cls = raw.__class__
        if raw.v != versions[cls]:
            _stamp(plan, planned, raw, seq)  # raises, naming the schema version
        time = raw.time or created
        actor = raw.actor or (cls is started and raw.role) or actors[cls]  # type: ignore[attr-defined]
        e = replace(raw, session_id=sid, seq=seq, time=time, actor=actor)
        if vouched and not (eid.__class__ is str and time.__class__ is int
                            and 0 <= time <= INT_MAX and actor.__class__ is str):
            vouched = False
        append(e)
    mine = lc.apply_batch(stamped)  # a repeat (a no-op) is left out, later seqs moved up
    canon = admit_all(mine, stamped=vouched)  # the door's refusal is written nowhere
    lc.commit()
    ids |= seen
    return mine, canon


def _one_by_one(plan: Plan, planned: PlannedSession, shared: list[Event],
                ids: set[str]) -> tuple[list[Event], list[bytes]]:
    """Each event stamped, judged by the tables and proved by the door in turn: raises
    the first refusal as ImportInputError."""
    lc = _lifecycle(planned, shared)
    mine: list[Event] = []
    canon: list[bytes] = []
    try:
        for raw in planned.events:
            if raw.id in ids or not raw.id:
                raise ImportInputError(plan.report.source,
                                       f"event id {raw.id!r} is not unique in the import")
            ids.add(raw.id)
            e = _stamp(plan, planned, raw, lc.version + 1)
            if lc.apply(e):  # False: an identical repeat, a no-op as in Session.append
                # The door's refusal (a value of the wrong type) is written nowhere.
                canon.append(admit(e))
                mine.append(e)
    except ImportInputError:
        raise
    except (ConvlogError, OverflowError, TypeError, ValueError) as exc:
        raise ImportInputError(plan.report.source,
                               f"the import does not form a valid log ({exc})") from exc
    lc.commit()
    return mine, canon


def _stamp(plan: Plan, planned: PlannedSession, raw: Event, seq: int) -> Event:
    """``raw`` placed in its session at ``seq``, with its time and actor defaulted; an
    event of another schema version is refused."""
    cls = type(raw)
    if raw.v != SCHEMA_VERSION[cls]:
        raise ImportInputError(plan.report.source, f"event {raw.id} has schema "
                               f"version {raw.v}, not {SCHEMA_VERSION[cls]}")
    return msgspec.structs.replace(
        raw, session_id=planned.id, seq=seq, time=raw.time or planned.created,
        actor=raw.actor or (cls is ev.MessageStarted and raw.role)  # type: ignore[attr-defined]
        or DEFAULT_ACTOR[cls])


def _mirror(store: Store, scratch: Store, session_id: str) -> None:
    """Copy a stored session (and its fork ancestors) into the scratch store."""
    if not _is_new(scratch, session_id):
        return
    info = store.session_info(session_id)
    if info.parent is not None:
        _mirror(store, scratch, info.parent)
    scratch.create_session(session_id, created=info.created, parent=info.parent,
                           fork_seq=info.fork_seq)
    own = list(store.read(session_id, (info.fork_seq or 0) + 1))
    if own:
        scratch.append(session_id, own, info.fork_seq or 0)


def _is_new(store: Store, session_id: str) -> bool:
    try:
        store.session_info(session_id)
    except UnknownSession:
        return True
    return False


def _count(plan: Plan, planned: PlannedSession, written: int) -> None:
    plan.report.written += written
    plan.report.existing += len(planned.events) - written
    kinds = Counter(map(type, planned.events))  # one pass, then a sum over a few types
    plan.report.sessions.append(SessionSummary(
        id=planned.id, kind=planned.kind, events=len(planned.events),
        messages=sum(n for t, n in kinds.items() if issubclass(t, ev.MessageStarted)),
        tools=sum(n for t, n in kinds.items() if issubclass(t, ev.ToolAdded)),
        parent=planned.parent, fork_seq=planned.fork_seq, title=planned.title))


def _open(store: Store, planned: PlannedSession, opened: dict[str, Session]) -> Session:
    try:
        return Session.open(store, planned.id)
    except UnknownSession:
        pass
    if planned.kind == "fork":
        assert planned.parent is not None
        assert planned.fork_seq is not None
        parent = opened.get(planned.parent) or Session.open(store, planned.parent)
        return parent.fork(planned.fork_seq, session_id=planned.id)
    created = planned.created
    return Session.create(store, planned.id, clock=lambda: created)


def _write(store: Store, plan: Plan) -> None:
    """Every planned session through ``Session.append``: the transition tables judge it."""
    opened: dict[str, Session] = {}
    for planned in plan.sessions:
        session = opened[planned.id] = _open(store, planned, opened)
        session.append(planned.events, keep_stored=True)  # as in write_plan's re-import
