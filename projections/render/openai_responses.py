"""OpenAI Responses API: ``input`` items for a request.

User turns are ``message`` items (``input_text`` / ``input_image``), assistant
text an assistant ``message`` (``output_text``), calls ``function_call`` items
and results ``function_call_output`` items. Reasoning is sent back only as the
Responses ``reasoning`` item it came from (its id and encrypted content kept in
``metadata.openai``); other reasoning cannot be carried, nor server tools of
other providers, error flags on results, or part metadata.
"""

from __future__ import annotations

import json
from typing import Any

from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


def input_items(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    for turn in c.turns(history):
        if turn.role == "user":
            content: list[JSON] = []
            for i in turn.items:
                if isinstance(i, c.Text):
                    content.append({"type": "input_text", "text": i.text})
                elif isinstance(i, c.File):
                    if i.mime.startswith("image/"):
                        content.append({"type": "input_image", "image_url": i.url,
                                        "detail": "auto"})
                    else:
                        content.append({"type": "input_text", "text": c.file_note(i)})
            out.append({"type": "message", "role": "user", "content": content})
        elif turn.role == "tool":
            for r in turn.items:
                assert isinstance(r, c.ToolResult)
                out.append({"type": "function_call_output", "call_id": r.call_id,
                            "output": r.output})
        else:
            text: list[JSON] = []

            def flush(text: list[JSON] = text) -> None:
                if text:
                    out.append({"type": "message", "role": "assistant", "content": list(text)})
                    text.clear()

            for i in turn.items:
                if isinstance(i, c.Text):
                    text.append({"type": "output_text", "text": i.text, "annotations": []})
                elif isinstance(i, c.ToolCall) and not i.server:
                    flush()
                    out.append({"type": "function_call", "call_id": i.call_id, "name": i.name,
                                "arguments": i.raw or json.dumps(i.input, ensure_ascii=False)})
                elif isinstance(i, c.Reasoning):
                    data = i.provider("openai")
                    if data.get("item_id") and data.get("encrypted_content"):
                        flush()
                        out.append({"type": "reasoning", "id": data["item_id"],
                                    "summary": [{"type": "summary_text", "text": s}
                                                for s in data.get("summary", [i.text]) if s],
                                    "encrypted_content": data["encrypted_content"]})
            flush()
    return out


def response(wp: v.WithParts) -> JSON:
    """The assistant message as the Responses API ``output`` (messages and calls) + status."""
    output: list[JSON] = []
    status: str | None = None
    tokens = v.Tokens()
    for p in wp.parts:
        meta = (getattr(p, "metadata", None) or {}).get("openai", {})
        if isinstance(p, v.TextPart) and not p.ignored:
            output.append({"type": "message", "id": meta.get("item_id"),
                           "text": p.text})
        elif isinstance(p, v.ReasoningPart):
            output.append({"type": "reasoning", "id": meta.get("item_id"),
                           "summary": meta.get("summary", [p.text] if p.text else [])})
        elif isinstance(p, v.ToolPart):
            raw = p.state.raw if isinstance(p.state, v.ToolStatePending) else ""
            output.append({"type": "function_call", "call_id": p.call_id, "name": p.tool,
                           "id": (p.metadata or {}).get("openai", {}).get("item_id"),
                           "arguments": raw or json.dumps(dict(p.state.input),
                                                          ensure_ascii=False)})
        elif isinstance(p, v.StepFinishPart):
            status, tokens = p.reason or None, p.tokens
    return {"output": output, "status": status,
            "usage": {"input_tokens": tokens.input + tokens.cache.read,
                      "output_tokens": tokens.output + tokens.reasoning,
                      "cached_tokens": tokens.cache.read,
                      "reasoning_tokens": tokens.reasoning}}
