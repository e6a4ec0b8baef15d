"""Append a :class:`Plan` to a store: all of it checked first, then written; re-imports no-op.

A plan can hold several sessions (forks, child sessions), and a store appends
one session's batch atomically, not several. So the whole plan is first
replayed into a scratch :class:`MemoryStore`, where any rejected event fails
the import before the real store sees a byte; only then is it written. Event
ids are the importer's stable ids, so ``Session.append`` skips the events an
earlier import of the same source already wrote.
"""

from __future__ import annotations

from engine import events as ev
from engine.codec import decode_msgpack, encode_msgpack
from engine.errors import ConvlogError, UnknownSession
from engine.importers.base import ImportInputError, Plan, PlannedSession, SessionSummary
from engine.session import Session
from engine.store import MemoryStore
from engine.store.base import Store


def write_plan(store: Store, plan: Plan) -> None:
    """Check ``plan`` on a scratch store, then append it to ``store``; fills the report."""
    try:
        for planned in plan.sessions:
            for e in planned.events:
                # A value of the wrong type (a JSON true where a count belongs) must fail
                # here, not become an event that no reader can decode.
                decode_msgpack(encode_msgpack(e))
        _write(MemoryStore(), plan, count=False)
    except ImportInputError:
        raise
    except (ConvlogError, OverflowError, TypeError, ValueError) as exc:  # msgpack: ints > 64 bits
        raise ImportInputError(plan.report.source,
                               f"the import does not form a valid log ({exc})") from exc
    _write(store, plan, count=True)


def _open(store: Store, planned: PlannedSession, opened: dict[str, Session]) -> Session:
    try:
        return Session.open(store, planned.id)
    except UnknownSession:
        pass
    if planned.kind == "fork":
        assert planned.parent is not None
        assert planned.fork_seq is not None
        return opened[planned.parent].fork(planned.fork_seq, session_id=planned.id)
    created = planned.created
    return Session.create(store, planned.id, clock=lambda: created)


def _write(store: Store, plan: Plan, *, count: bool) -> None:
    opened: dict[str, Session] = {}
    for planned in plan.sessions:
        session = opened[planned.id] = _open(store, planned, opened)
        before = session.version
        session.append(planned.events)
        if not count:
            continue
        written = session.version - before
        plan.report.written += written
        plan.report.existing += len(planned.events) - written
        plan.report.sessions.append(SessionSummary(
            id=planned.id, kind=planned.kind, events=len(planned.events),
            messages=sum(isinstance(e, ev.MessageStarted) for e in planned.events),
            tools=sum(isinstance(e, ev.ToolAdded) for e in planned.events),
            parent=planned.parent, fork_seq=planned.fork_seq, title=planned.title))
