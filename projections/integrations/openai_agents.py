"""``ConvlogSession``: the OpenAI Agents SDK's session memory, kept in a convlog log.

``Runner.run(agent, input, session=ConvlogSession(store, session_id))`` keeps
the run's items in a convlog session instead of the SDK's mutable rows (the
item writer is :class:`engine.integrations.openai_agents.ItemWriter`). The
items come back exactly as they were added; ``pop_item`` and ``clear_session``
are events, so the log keeps everything and time travel or a fork sees the
memory as it was at any point.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings

from engine import events as ev
from engine.ids import is_uuid
from engine.integrations.openai_agents import CHECKPOINT_PREFIX, ITEM_KEY, ItemWriter
from engine.session import Session
from engine.store import Store

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
        self._marks: dict[str, int] = {}  # legacy batch checkpoints

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.ItemPopped):
            if e.memory == ITEM_KEY and e.event_id in self.recorded_by:
                at = len(self.recorded_by) - 1 - self.recorded_by[::-1].index(e.event_id)
                del self.items[at], self.recorded_by[at]
        elif isinstance(e, ev.ItemsCleared):
            if e.memory == ITEM_KEY:
                self.items.clear()
                self.recorded_by.clear()
        elif isinstance(e, ev.CheckpointCreated):
            if e.tag.startswith(CHECKPOINT_PREFIX):
                self._marks[e.tag] = len(self.items)
        elif isinstance(e, ev.CheckpointRestored):
            mark = self._marks.get(e.tag)
            if mark is not None:
                del self.items[mark:], self.recorded_by[mark:]
        elif isinstance(e, ev.HistoryCleared):  # legacy clear
            self.items.clear()
            self.recorded_by.clear()
        else:
            meta = getattr(e, "metadata", None)
            if isinstance(meta, Mapping) and ITEM_KEY in meta:
                self.items.append(meta[ITEM_KEY])
                self.recorded_by.append(e.id)


def convlog_id(session_id: str) -> str:
    return session_id if is_uuid(session_id) else str(uuid.uuid5(NAMESPACE, session_id))


class ConvlogSession:
    """An Agents SDK ``Session`` whose memory is a convlog session."""

    session_settings: SessionSettings | None = None

    def __init__(self, store: Store, session_id: str, *, agent: str = "",
                 session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.session = Session.open_or_create(store, convlog_id(session_id))
        self.fold = ItemsFold()
        for e in store.read(self.session.id):
            self.fold(e)
        self.session.subscribe(self.fold)
        self.writer = ItemWriter(self.session, agent=agent)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = self.fold.items if limit is None else self.fold.items[-limit:] if limit else []
        return [dict(i) for i in items]  # type: ignore[misc]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if items:
            self.writer.add(items)

    async def pop_item(self) -> TResponseInputItem | None:
        if not self.fold.items:
            return None
        last = self.fold.items[-1]
        self.writer.pop(self.fold.recorded_by[-1])
        return dict(last)  # type: ignore[return-value]

    async def clear_session(self) -> None:
        if self.fold.items:
            self.writer.clear()
