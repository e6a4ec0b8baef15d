"""Anthropic SDK: record ``messages.create(stream=True)`` and ``messages.stream(...)``.

``client = record_anthropic(Anthropic(), session)`` (or an ``AsyncAnthropic``)
is the client the agent already uses; each streamed call becomes one assistant
message of ``session`` as its events pass (see :mod:`.recording` for how a
broken, closed or failing stream is settled), and a ``create()`` without
``stream=True`` one message recorded whole when the SDK returns it. The history goes back with
``projections.render.anthropic.messages(view.messages())``.
"""

from __future__ import annotations

from typing import Any

import anthropic

from engine.adapters.anthropic import AnthropicIngest
from engine.integrations.clients import RecordedClient, WholeEvents
from engine.session import Session

ROUTES = {
    "messages.create": AnthropicIngest,
    "messages.stream": AnthropicIngest,
    "beta.messages.create": AnthropicIngest,
    "beta.messages.stream": AnthropicIngest,
}


def message_events(message: Any) -> list[dict[str, Any]]:
    """The stream a whole ``Message`` would have been sent as: its blocks start whole."""
    data = message.model_dump(mode="json", exclude_none=True) if hasattr(
        message, "model_dump") else dict(message)
    usage = dict(data.get("usage") or {})
    start = {**data, "stop_reason": None, "stop_sequence": None}
    return [
        {"type": "message_start", "message": start},
        *({"type": "content_block_stop", "index": i} for i in range(len(data["content"]))),
        {"type": "message_delta", "usage": usage,
         "delta": {"stop_reason": data.get("stop_reason"),
                   "stop_sequence": data.get("stop_sequence")}},
        {"type": "message_stop"},
    ]


WHOLE: dict[str, WholeEvents] = {"messages.create": message_events,
                                 "beta.messages.create": message_events}


def record_anthropic(client: anthropic.Anthropic | anthropic.AsyncAnthropic, session: Session,
                     *, strict: bool = False, **ingest_options: Any) -> Any:
    """The client, with its streamed Messages calls recorded into ``session``.

    ``ingest_options`` go to each :class:`AnthropicIngest` (``coalesce_chars``,
    ``batch``, ``agent``, ...). Typed as ``Any``: the proxy answers every
    attribute of the client.
    """
    return RecordedClient(client, session, dict(ROUTES),
                          is_async=isinstance(client, anthropic.AsyncAnthropic), whole=WHOLE,
                          strict=strict, **ingest_options)
