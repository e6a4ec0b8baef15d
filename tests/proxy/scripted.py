"""A scripted session, built as convlog events: what ``convlog replay`` serves as the
model in the closed loops (each call: the request it answers and the provider
stream of its answer, recorded as the proxy records a call)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from engine import events as ev
from engine.ids import part_id, uuid7
from engine.proxy.recorder import INGESTS
from engine.session import Session
from engine.store import Store

JSON = dict[str, Any]


@attrs.frozen
class Call:
    request: JSON  # the request as the provider's API takes it (what must match)
    answer: Sequence[JSON]  # the answer's stream events
    results: dict[str, str] = attrs.Factory(dict)  # tool call id -> its output


def build(store: Store, provider: str, calls: Sequence[Call], *,
          path: str = "/v1/messages") -> str:
    """Record ``calls`` into a new session; its id."""
    session = Session.create(store)
    for call in calls:
        context = uuid7()
        text = _last_text(call.request)
        batch: list[ev.Event] = [ev.MessageStarted(
            message_id=context, role="user",
            metadata={"proxy": {"provider": provider, "method": "POST", "path": path,
                                "query": "", "headers": {}, "status": 200,
                                "request": call.request}})]
        if text:
            pid = part_id()
            batch += [ev.TextAdded(message_id=context, part_id=pid, text=text),
                      ev.PartEnded(message_id=context, part_id=pid)]
        batch.append(ev.MessageCompleted(message_id=context))
        session.record(batch)
        ingest = INGESTS[provider](session, parent_id=context)
        result = ingest.ingest(call.answer)
        if not result.completed:
            for tool in result.tool_calls:
                session.start_tool(tool.ref)
                session.complete_tool(tool.ref, call.results.get(tool.call_id, "ok"))
            ingest.complete()
    return session.id


def _last_text(request: JSON) -> str:
    items = request.get("messages") or request.get("input") or request.get("contents") or []
    if isinstance(items, str):
        return items
    last = items[-1] if items else {}
    content = last.get("content") if isinstance(last, dict) else None
    return content if isinstance(content, str) else ""
