"""An assistant message's content blocks as the Anthropic stream that sends them."""

from __future__ import annotations

import json
from typing import Any

JSON = dict[str, Any]


def as_anthropic_stream(content: list[JSON]) -> list[JSON]:
    """The Messages API stream events that accumulate to this assistant ``content``."""
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": "m", "model": "x", "content": [], "usage": {"input_tokens": 1}}}]
    for i, block in enumerate(content):
        kind = block["type"]
        start = {"text": {"type": "text", "text": ""},
                 "thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "tool_use": {**block, "input": {}},
                 "server_tool_use": {**block, "input": {}}}.get(kind, block)
        events.append({"type": "content_block_start", "index": i, "content_block": start})
        if kind == "text":
            events += [{"type": "content_block_delta", "index": i, "delta": {
                "type": "citations_delta", "citation": c}} for c in block.get("citations", [])]
            delta: JSON = {"type": "text_delta", "text": block["text"]}
        elif kind == "thinking":
            events.append({"type": "content_block_delta", "index": i, "delta": {
                "type": "thinking_delta", "thinking": block["thinking"]}})
            delta = {"type": "signature_delta", "signature": block["signature"]}
        elif kind in ("tool_use", "server_tool_use"):
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            delta = {}
        if delta:
            events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1}}, {"type": "message_stop"}]
    return events
