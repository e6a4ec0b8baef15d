"""OpenAI SDK: record streamed Chat Completions and Responses calls.

``client = record_openai(OpenAI(), session)`` (or an ``AsyncOpenAI``) records
``chat.completions.create(stream=True)``, ``chat.completions.stream(...)``,
``responses.create(stream=True)`` and ``responses.stream(...)``, one assistant
message per call (see :mod:`.recording`), and their ``create()`` without
``stream=True``, recorded whole when the SDK returns the completion or
response. The history goes back with
``projections.render.openai_chat.messages`` or
``projections.render.openai_responses.input_items``.
"""

from __future__ import annotations

from typing import Any

import openai

from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.integrations.clients import RecordedClient, WholeEvents
from engine.session import Session

ROUTES = {
    "chat.completions.create": OpenAIChatIngest,
    "chat.completions.stream": OpenAIChatIngest,
    "responses.create": OpenAIResponsesIngest,
    "responses.stream": OpenAIResponsesIngest,
}


def _dump(obj: Any) -> dict[str, Any]:
    return obj.model_dump(mode="json") if hasattr(obj, "model_dump") else dict(obj)


def completion_chunks(completion: Any) -> list[dict[str, Any]]:
    """The one chunk a whole ``ChatCompletion`` (choice 0) would have been streamed as."""
    data = _dump(completion)
    choices = []
    for choice in data.get("choices") or ():
        message = choice.get("message") or {}
        delta = {k: message.get(k) for k in ("role", "content", "refusal")}
        calls = message.get("tool_calls") or []
        if calls:
            delta["tool_calls"] = [{"index": i, "id": c["id"], "type": c.get("type"),
                                    "function": c.get("function")} for i, c in enumerate(calls)]
        choices.append({"index": choice.get("index", 0), "delta": delta,
                        "finish_reason": choice.get("finish_reason")})
    chunk = {k: v for k, v in data.items() if k not in ("choices", "object")}
    return [{**chunk, "object": "chat.completion.chunk", "choices": choices}]


# A whole response's status, as the event its stream would have ended with.
ENDINGS: dict[str, str] = {"completed": "response.completed", "incomplete": "response.incomplete",
           "failed": "response.failed"}


def response_events(response: Any) -> list[dict[str, Any]]:
    """The events a whole ``Response`` would have been streamed as: items added whole."""
    data = _dump(response)
    ending = ENDINGS.get(str(data.get("status")))
    if ending is None:
        return []  # queued or in progress (background=True): nothing to record yet
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**data, "output": [],
                                                  "status": "in_progress"}}]
    for index, item in enumerate(data.get("output") or ()):
        events += [{"type": "response.output_item.added", "output_index": index, "item": item},
                   {"type": "response.output_item.done", "output_index": index, "item": item}]
    events.append({"type": ending, "response": data})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


WHOLE: dict[str, WholeEvents] = {"chat.completions.create": completion_chunks,
                                 "responses.create": response_events}


def record_openai(client: openai.OpenAI | openai.AsyncOpenAI, session: Session, *,
                  strict: bool = False, **ingest_options: Any) -> Any:
    """The client, with its streamed Chat Completions and Responses calls recorded."""
    return RecordedClient(client, session, dict(ROUTES),
                          is_async=isinstance(client, openai.AsyncOpenAI), whole=WHOLE,
                          strict=strict, **ingest_options)
