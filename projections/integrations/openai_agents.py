"""``ConvlogSession``: the OpenAI Agents SDK's session memory, kept in a convlog log.

``Runner.run(agent, input, session=ConvlogSession(store, session_id))`` keeps
the run's items in a convlog session instead of the SDK's mutable rows (the
item writer is :class:`engine.integrations.openai_agents.ItemWriter`). The
items come back exactly as they were added; ``pop_item`` and ``clear_session``
are events, so the log keeps everything and time travel or a fork sees the
memory as it was at any point.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from agents.items import TResponseInputItem
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from engine import events as ev
from engine.errors import SessionClosed
from engine.ids import is_uuid
from engine.integrations.openai_agents import (
    CHECKPOINT_PREFIX,
    ITEM_KEY,
    ItemWriter,
    ToolErrorCheck,
    sdk_tool_error,
)
from engine.integrations.writers import open_shared, retrying
from engine.session import Session
from engine.store import Store

T = TypeVar("T")

# Names a non-UUID Agents session id inside convlog (uuid5: the same id, the same session).
NAMESPACE = uuid.UUID("6f1d3c1e-5b7a-4c55-9a64-0a7e51a9b1c3")


class ItemsFold:
    """The item list an Agents session holds, folded from its events (pure).

    Each item is kept with the id of the event that recorded it (what a
    ``session.item_popped`` names). Logs written before that event existed
    popped by restoring a per-batch checkpoint; those still fold.
    """

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.recorded_by: list[str] = []  # the event id of each item
        self.before: list[int] = []  # each item: the seq just before its message started
        self.times: list[int] = []  # each item: when it was recorded (ms)
        self._marks: dict[str, int] = {}  # legacy batch checkpoints
        self._started = 1  # the seq of the last message.started

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.ItemPopped):
            if e.memory == ITEM_KEY and e.event_id in self.recorded_by:
                at = len(self.recorded_by) - 1 - self.recorded_by[::-1].index(e.event_id)
                del self.items[at], self.recorded_by[at], self.before[at], self.times[at]
        elif isinstance(e, ev.ItemsCleared):
            if e.memory == ITEM_KEY:
                self._cut(0)
        elif isinstance(e, ev.CheckpointCreated):
            if e.tag.startswith(CHECKPOINT_PREFIX):
                self._marks[e.tag] = len(self.items)
        elif isinstance(e, ev.CheckpointRestored):
            mark = self._marks.get(e.tag)
            if mark is not None:
                self._cut(mark)
        elif isinstance(e, ev.HistoryCleared):  # legacy clear
            self._cut(0)
        else:
            if isinstance(e, ev.MessageStarted):
                self._started = e.seq
            meta = getattr(e, "metadata", None)
            if isinstance(meta, Mapping) and ITEM_KEY in meta:
                self.items.append(meta[ITEM_KEY])
                self.recorded_by.append(e.id)
                self.before.append(self._started - 1)
                self.times.append(e.time)

    def _cut(self, at: int) -> None:
        del self.items[at:], self.recorded_by[at:], self.before[at:], self.times[at:]


def convlog_id(session_id: str) -> str:
    return session_id if is_uuid(session_id) else str(uuid.uuid5(NAMESPACE, session_id))


class AgentFold:
    """The agent the next message is written for: the last handoff's target, else
    the agent of the last assistant message, else ``first`` (pure)."""

    def __init__(self, first: str) -> None:
        self.agent = first

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.AgentAdded):
            self.agent = e.name
        elif isinstance(e, ev.MessageStarted) and e.role == "assistant" and e.agent:
            self.agent = e.agent


class ConvlogSession:
    """An Agents SDK ``Session`` whose memory is a convlog session.

    Any number of objects, threads and processes may use the same session id
    at once, as with the SDK's own sessions: each operation catches up with the
    log first and is planned again after a version conflict, so every write
    lands, in order, and reads see what the others wrote. The store I/O runs in
    a worker thread (``asyncio.to_thread``), off the event loop.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, store: Store, session_id: str, *, agent: str = "",
                 session_settings: SessionSettings | dict[str, Any] | None = None,
                 tool_error: ToolErrorCheck = sdk_tool_error) -> None:
        self.session_id = session_id
        self.session_settings = (coerce_session_settings(session_settings)
                                 if session_settings is not None else SessionSettings())
        self.store = store
        self._lock = threading.RLock()  # one object, many threads: one operation at a time
        self._closed = False
        self._first_agent = agent
        self._tool_error = tool_error
        self._attach(open_shared(store, convlog_id(session_id)))

    def _attach(self, session: Session) -> None:
        """Keep the memory in ``session`` (a branch switches to its fork)."""
        self.session = session
        self.fold = ItemsFold()
        self.agents = AgentFold(self._first_agent)
        # Exactly the events the session folded: later ones reach the fold through
        # the catch-up, once.
        for e in self.store.read(session.id, 1, session.version):
            self._seen(e)
        session.subscribe(self._seen)
        self.writer = ItemWriter(session, agent=self._first_agent, tool_error=self._tool_error)

    def _seen(self, e: ev.Event) -> None:
        self.fold(e)
        self.agents(e)

    def _run(self, operation: Callable[[], T]) -> T:
        """An operation on a caught-up session, repeated after a version conflict."""
        with self._lock:
            if self._closed:
                raise SessionClosed(f"ConvlogSession {self.session_id!r} is closed")
            return retrying(self.session, operation, seen=self._seen)

    # ------------------------------------------------------------------ the protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        wanted = resolve_session_limit(limit, self.session_settings)

        def read() -> list[Any]:
            items = self.fold.items
            # SQLiteSession's semantics: None or a negative limit is everything, 0 nothing.
            chosen = items if wanted is None or wanted < 0 else items[-wanted:] if wanted else []
            return [dict(i) for i in chosen]

        return await asyncio.to_thread(self._run, read)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        given = [dict(i) for i in items]
        await asyncio.to_thread(self._run, lambda: self.writer.add(given,
                                                                   agent=self.agents.agent))

    async def pop_item(self) -> TResponseInputItem | None:
        def pop() -> Any:
            if not self.fold.items:
                return None
            last = self.fold.items[-1]
            self.writer.pop(self.fold.recorded_by[-1])
            return dict(last)

        popped: TResponseInputItem | None = await asyncio.to_thread(self._run, pop)
        return popped

    async def clear_session(self) -> None:
        def clear() -> None:
            if self.fold.items:
                self.writer.clear()

        await asyncio.to_thread(self._run, clear)

    def close(self) -> None:
        """Stop using the session (the store stays open: it is the caller's)."""
        with self._lock:
            self._closed = True
