"""OpenAI SDK: record streamed Chat Completions and Responses calls.

``client = record_openai(OpenAI(), session)`` (or an ``AsyncOpenAI``) records
``chat.completions.create(stream=True)``, ``chat.completions.stream(...)``,
``responses.create(stream=True)`` and ``responses.stream(...)``, one assistant
message per call (see :mod:`.recording`). The history goes back with
``projections.render.openai_chat.messages`` or
``projections.render.openai_responses.input_items``.
"""

from __future__ import annotations

from typing import Any

import openai

from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.integrations.clients import RecordedClient
from engine.session import Session

ROUTES = {
    "chat.completions.create": OpenAIChatIngest,
    "chat.completions.stream": OpenAIChatIngest,
    "responses.create": OpenAIResponsesIngest,
    "responses.stream": OpenAIResponsesIngest,
}


def record_openai(client: openai.OpenAI | openai.AsyncOpenAI, session: Session, *,
                  strict: bool = False, **ingest_options: Any) -> Any:
    """The client, with its streamed Chat Completions and Responses calls recorded."""
    return RecordedClient(client, session, dict(ROUTES),
                          is_async=isinstance(client, openai.AsyncOpenAI),
                          strict=strict, **ingest_options)
