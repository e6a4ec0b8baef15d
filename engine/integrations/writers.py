"""Many writers on one session: catch up with the log, retry on a version conflict.

A framework's session object (the Agents SDK's ``Session``) is used from
several objects, threads and processes at once: web workers, a retried
request, a second tab. convlog's append names the version it expects, so a
writer whose view is stale gets ``ConcurrencyError`` instead of overwriting.
:func:`catch_up` folds what the others appended into the writer's lifecycle;
:func:`retrying` runs a write after catching up, again after each conflict, so
every write lands, in the order the log accepted them, and none is lost.

A write given to :func:`retrying` must plan from the caught-up state and commit
once (one ``Session.record``): a conflict then leaves nothing behind to repeat.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Final, TypeVar

from engine import events as ev
from engine.errors import ConcurrencyError, SessionExists, UnknownSession
from engine.events import Event
from engine.lifecycle import Lifecycle
from engine.session import Clock, PartRef, Session
from engine.store import Store

T = TypeVar("T")
ATTEMPTS: Final = 200  # conflicts in a row before giving up (each one means others wrote)


def open_shared(store: Store, session_id: str, *, clock: Clock | None = None) -> Session:
    """Open the session, creating it if absent; two creators at once both succeed."""
    try:
        return Session.open(store, session_id, clock=clock)
    except UnknownSession:
        pass
    try:
        return Session.create(store, session_id, clock=clock)
    except SessionExists:  # another writer created it first
        return Session.open(store, session_id, clock=clock)


def catch_up(session: Session) -> list[Event]:
    """Fold the events other writers appended since this session object last looked."""
    lc = session.lifecycle
    latest = session.store.version(session.id)
    if latest <= lc.version:
        return []
    # Up to ``latest`` only: a writer appending between the two reads must not have
    # its events folded here while the version says they were not (the next catch-up
    # would fold them again, and a second message.started fails the table lookup).
    new: list[Event] = list(session.store.read(session.id, lc.version + 1, latest))
    for e in new:
        lc.replay(e)  # the log accepted them: folded, not judged again
    lc.version = latest
    return new


def retrying(session: Session, write: Callable[[], T], *,
             seen: Callable[[Event], None] | None = None) -> T:
    """``write()`` on a caught-up session, repeated after each version conflict.

    ``seen`` gets every event another writer appended (a fold kept beside the
    session). A short random pause after a conflict lets the other writer finish.
    """
    for attempt in range(ATTEMPTS):
        for e in catch_up(session):
            if seen is not None:
                seen(e)
        try:
            return write()
        except ConcurrencyError:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
    raise AssertionError("unreachable")  # pragma: no cover


def open_message(lc: Lifecycle) -> tuple[str | None, dict[str, PartRef], list[str]]:
    """The assistant message still open at the end of the log, its waiting calls
    (call id -> part) and its other unsettled parts: what a writer continues from.

    Derived from the log alone, so a fresh writer (another request, another
    process) answers the calls an earlier one left waiting (an approval).
    """
    last = next(reversed(lc.messages), None) if lc.messages else None
    msg = lc.messages.get(last) if last is not None else None
    if last is None or msg is None or msg.state != "open" or msg.role != "assistant":
        return None, {}, []
    calls: dict[str, PartRef] = {}
    others: list[str] = []
    for pid, part in lc.unsettled(last):
        if part.kind != "tool":
            others.append(pid)
            continue
        entered = part.entered
        call_id = entered.call_id if isinstance(entered, ev.ToolAdded) else next(
            (cid for (mid, cid), p in lc.call_ids.items() if mid == last and p == pid), None)
        if call_id is not None:
            calls[call_id] = PartRef(last, pid)
    return last, calls, others
