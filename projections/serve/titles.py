"""What the session list says about a session: its title, where and with what it ran.

Read from the log's edges, never from a whole fold, so that listing a store of long
sessions stays fast: the first ``EDGE`` events (the import's label, the first prompt,
the first messages' model and working directory) and the last ``EDGE`` (a late title).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine import events as ev
from engine.store.base import Store
from projections import views as v
from projections.titles import TitleFold

EDGE = 400  # events read at each end of a session
TITLE_CHARS = 120


def session_title(events: Iterable[Any], session_id: str) -> str | None:
    """A session's title as the list shows it (:class:`projections.titles.TitleFold`,
    the one rule ``convlog sessions`` follows too): the latest ``session.titled``,
    else the first prompt a person typed; None without either. ``events`` are the
    session's events in seq order, or its edges (see EDGE)."""
    title, _ = TitleFold().apply_all(events).shown(TITLE_CHARS)
    return title or None


def edges(store: Store, sid: str, version: int) -> list[ev.AnyEvent]:
    """The first and last ``EDGE`` events of the session, in seq order."""
    head = list(store.read(sid, 1, min(version, EDGE)))
    tail = list(store.read(sid, max(EDGE + 1, version - EDGE + 1), version)) \
        if version > EDGE else []
    return head + tail


def describe(store: Store, sid: str, version: int) -> dict[str, Any]:
    """Title, working directory and model from the session's edges."""
    events = edges(store, sid, version)
    cwd = model = None
    for e in events:
        if isinstance(e, ev.MessageStarted):
            if cwd is None and e.path is not None and e.path.cwd:
                cwd = e.path.cwd
            if model is None and e.model is not None and e.model.model_id:
                model = e.model.model_id
        if cwd is not None and model is not None:
            break
    return {"title": session_title(events, sid), "cwd": cwd, "model": model}


def usage(messages: list[v.WithParts]) -> dict[str, Any]:
    """Messages, tokens and cost of a state, summed over its assistant messages."""
    tokens = {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    cost = 0.0
    for m in messages:
        info = m.info
        if not isinstance(info, v.AssistantInfo):
            continue
        # The message's own totals when its source gave them, else its steps' sums.
        steps = [p for p in m.parts if isinstance(p, v.StepFinishPart)]
        own = info.cost or info.tokens.input or info.tokens.output
        for cost_of, t in ([(info.cost, info.tokens)] if own or not steps
                           else [(p.cost, p.tokens) for p in steps]):
            cost += cost_of
            tokens["input"] += t.input
            tokens["output"] += t.output
            tokens["reasoning"] += t.reasoning
            tokens["cache_read"] += t.cache.read
            tokens["cache_write"] += t.cache.write
    return {"messages": len(messages), "tokens": tokens, "cost": round(cost, 6)}
