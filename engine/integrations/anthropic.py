"""Anthropic SDK: record ``messages.create(stream=True)`` and ``messages.stream(...)``.

``client = record_anthropic(Anthropic(), session)`` (or an ``AsyncAnthropic``)
is the client the agent already uses; each streamed call becomes one assistant
message of ``session`` as its events pass (see :mod:`.recording` for how a
broken, closed or failing stream is settled). The history goes back with
``projections.render.anthropic.messages(view.messages())``.
"""

from __future__ import annotations

from typing import Any

import anthropic

from engine.adapters.anthropic import AnthropicIngest
from engine.integrations.clients import RecordedClient
from engine.session import Session

ROUTES = {
    "messages.create": AnthropicIngest,
    "messages.stream": AnthropicIngest,
    "beta.messages.create": AnthropicIngest,
    "beta.messages.stream": AnthropicIngest,
}


def record_anthropic(client: anthropic.Anthropic | anthropic.AsyncAnthropic, session: Session,
                     *, strict: bool = False, **ingest_options: Any) -> Any:
    """The client, with its streamed Messages calls recorded into ``session``.

    ``ingest_options`` go to each :class:`AnthropicIngest` (``coalesce_chars``,
    ``batch``, ``agent``, ...). Typed as ``Any``: the proxy answers every
    attribute of the client.
    """
    return RecordedClient(client, session, dict(ROUTES),
                          is_async=isinstance(client, anthropic.AsyncAnthropic),
                          strict=strict, **ingest_options)
