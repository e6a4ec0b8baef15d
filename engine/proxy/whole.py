"""A non-streamed answer as the stream events it would have been sent as, and the
tool results a request carries (they settle the calls of the call before it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.proxy.routes import ANTHROPIC, CHAT, GEMINI, RESPONSES

JSON = dict[str, Any]


def stream_events(provider: str, body: JSON) -> list[JSON]:
    if provider == ANTHROPIC:
        content = body.get("content") or []
        start = {k: v for k, v in body.items() if k != "content"}
        start.update(content=[], stop_reason=None, stop_sequence=None)
        events: list[JSON] = [{"type": "message_start", "message": start}]
        for i, block in enumerate(content):
            events.append({"type": "content_block_start", "index": i, "content_block": block})
            events.append({"type": "content_block_stop", "index": i})
        events.append({"type": "message_delta", "usage": body.get("usage") or {},
                       "delta": {"stop_reason": body.get("stop_reason"),
                                 "stop_sequence": body.get("stop_sequence")}})
        events.append({"type": "message_stop"})
        return events
    if provider == CHAT:
        choices = []
        for choice in body.get("choices") or ():
            message = dict(choice.get("message") or {})
            calls = [{"index": j, **call} for j, call in enumerate(message.pop("tool_calls", None)
                                                                   or ())]
            delta = {k: v for k, v in message.items() if v is not None}
            if calls:
                delta["tool_calls"] = calls
            choices.append({"index": choice.get("index", 0), "delta": delta,
                            "finish_reason": choice.get("finish_reason")})
        return [{**{k: v for k, v in body.items() if k != "choices"},
                 "object": "chat.completion.chunk", "choices": choices}]
    if provider == RESPONSES:
        output = body.get("output") or []
        events = [{"type": "response.created", "sequence_number": 0,
                   "response": {**body, "output": [], "status": "in_progress"}}]
        for i, item in enumerate(output):
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": item})
            events.append({"type": "response.output_item.done", "output_index": i,
                           "item": item})
        status = body.get("status")
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        events.append({"type": kind, "response": body})
        return events
    if provider == GEMINI:
        return [body]
    raise ValueError(f"unknown provider {provider!r}")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b.get("text") for b in value if isinstance(b, dict)]
        if all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    return json.dumps(value, ensure_ascii=False)


def _gemini_result(body: Any) -> tuple[str, bool]:
    """A ``functionResponse.response``: its one text field (``output``, ``result``,
    ``content``; ``error`` for a failure) when it is that, else its JSON."""
    if isinstance(body, dict) and len(body) == 1:
        [(name, value)] = body.items()
        if isinstance(value, str) and name in ("output", "result", "content", "error"):
            return value, name == "error"
    return _text(body), False


def tool_results(provider: str, items: Sequence[Any]) -> dict[str, tuple[str, bool]]:
    """Each tool result in ``items``: call id -> (output as text, is an error)."""
    out: dict[str, tuple[str, bool]] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        if provider == ANTHROPIC and isinstance(item.get("content"), list):
            for block in item["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out[str(block.get("tool_use_id"))] = (_text(block.get("content", "")),
                                                          bool(block.get("is_error")))
        elif provider == RESPONSES and str(item.get("type", "")).endswith("call_output"):
            out[str(item.get("call_id"))] = (_text(item.get("output", "")), False)
        elif provider == CHAT and item.get("role") == "tool":
            out[str(item.get("tool_call_id"))] = (_text(item.get("content", "")), False)
        elif provider == GEMINI:
            for part in item.get("parts") or ():
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(response, dict):
                    key = str(response.get("id") or response.get("name"))
                    out[key] = _gemini_result(response.get("response"))
    return out
