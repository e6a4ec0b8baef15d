"""What the closed loops compare: answers event for event, and conversations as
(text, call, result) items."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from engine import events as ev
from engine.store import Store
from projections import views as v
from projections.withparts import WithPartsProjection

JSON = dict[str, Any]
_ENVELOPE = ("id", "session_id", "seq", "time", "actor", "message_id", "part_id",
             "parent_id")
# The tool's run is the client's, not the model's: its output depends on the machine.
_RUN = (ev.ToolStarted, ev.ToolCompleted, ev.ToolFailed)


def answers(store: Store, session_id: str) -> list[list[ev.Event]]:
    """The events of each assistant message of the session, in order."""
    out: dict[str, list[ev.Event]] = {}
    assistants: set[str] = set()
    for e in store.read(session_id):
        if isinstance(e, ev.MessageStarted) and e.role == "assistant":
            assistants.add(e.message_id)
        if isinstance(e, ev.MessageEvent) and e.message_id in assistants:
            out.setdefault(e.message_id, []).append(e)
    return list(out.values())


def shape(events: Iterable[ev.Event]) -> list[JSON]:
    """Events without their ids, times and seqs (parts numbered in order), tool runs
    left out: two recordings of one answer have the same shape."""
    parts: dict[str, int] = {}
    out = []
    for e in events:
        if isinstance(e, _RUN):
            continue
        data = msgspec.to_builtins(e)
        for key in _ENVELOPE:
            data.pop(key, None)
        if isinstance(e, ev.PartEvent):
            data["part"] = parts.setdefault(e.part_id, len(parts))
        out.append(data)
    return out


def items(messages: Sequence[v.WithParts]) -> list[tuple[Any, ...]]:
    """The conversation's assistant turns as items: texts, tool calls, tool results."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        if m.info.role != "assistant":
            continue
        for p in m.parts:
            if isinstance(p, v.TextPart) and not p.ignored and not p.synthetic and p.text:
                out.append(("text", p.text))
            elif isinstance(p, v.ToolPart):
                out.append(("call", p.call_id, p.tool, json.dumps(dict(p.state.input),
                                                                 sort_keys=True)))
                state = p.state
                if isinstance(state, v.ToolStateCompleted):
                    out.append(("result", p.call_id, state.output.strip()))
    return out


def session_items(store: Store, session_id: str) -> list[tuple[Any, ...]]:
    return items(WithPartsProjection.replay(store, session_id).messages())
