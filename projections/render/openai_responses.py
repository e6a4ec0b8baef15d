"""OpenAI Responses API: ``input`` items for a request, and ``response`` (the SDK's view).

User turns are ``message`` items (``input_text`` / ``input_image``), assistant
text an assistant ``message`` (``output_text``, or ``refusal`` for a part marked
``metadata.openai.refusal``; text of one Responses message item stays one
message, with its ``phase``), calls ``function_call`` items and results
``function_call_output`` items. A freeform tool's call (a part whose provider
metadata, ``openai`` from a stream or ``codex`` from a rollout, has ``type``
``custom_tool_call``) goes back as a ``custom_tool_call`` item, its input the
model's text byte for byte (and its ``namespace``), and its result as a
``custom_tool_call_output``. Reasoning is sent back only as the Responses
``reasoning`` item it came from (its id and encrypted content kept in
``metadata.openai``); other reasoning cannot be carried, nor server tools (the
Responses ones are kept whole in ``metadata.openai.block`` but not sent: re-sent
alone they would lack their reasoning item), error flags on results, or part
metadata.
"""

from __future__ import annotations

import json
from typing import Any

from projections import views as v
from projections.render import common as c
from projections.render.openai_chat import (
    CUSTOM_TOOL_CALL,
    freeform_input,
    tool_arguments,
)
from projections.render.openai_chat import freeform as _chat_freeform

JSON = dict[str, Any]

# A freeform call is recognised, and its text read, as the Chat render does.
CUSTOM = CUSTOM_TOOL_CALL
freeform = _chat_freeform
_freeform_input = freeform_input


def _custom_call(call_id: str, name: str, text: str, data: JSON) -> JSON:
    item: JSON = {"type": CUSTOM, "call_id": call_id, "name": name, "input": text}
    if isinstance(data.get("namespace"), str):
        item["namespace"] = data["namespace"]
    return item


def input_items(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    custom: set[str] = set()  # the call ids of freeform calls, to answer in kind
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
                kind = "custom_tool_call_output" if r.call_id in custom \
                    else "function_call_output"
                out.append({"type": kind, "call_id": r.call_id, "output": r.output})
        else:
            out += _assistant_items(turn.items)
            custom.update(i.call_id for i in turn.items
                          if isinstance(i, c.ToolCall) and freeform(i.metadata) is not None)
    return out


def _assistant_items(items: tuple[c.Item, ...]) -> list[JSON]:
    out: list[JSON] = []
    content: list[JSON] = []
    key: tuple[Any, Any] = (None, None)  # (item id, phase) of the message being built

    def flush() -> None:
        if content:
            message: JSON = {"type": "message", "role": "assistant", "content": list(content)}
            if key[1] is not None:
                message["phase"] = key[1]
            out.append(message)
            content.clear()

    for i in items:
        if isinstance(i, c.Text):
            data = c.provider_data(i.metadata, "openai")
            if (data.get("item_id"), data.get("phase")) != key:
                flush()  # another Responses message item: keep the boundary
                key = (data.get("item_id"), data.get("phase"))
            content.append({"type": "refusal", "refusal": i.text} if data.get("refusal")
                           else {"type": "output_text", "text": i.text, "annotations": []})
        elif isinstance(i, c.ToolCall) and not i.server:
            flush()
            custom = freeform(i.metadata)
            if custom is not None:
                out.append(_custom_call(i.call_id, i.name, _freeform_input(i.raw, i.input),
                                        custom))
                continue
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


def _usage(tokens: v.Tokens) -> JSON:
    read, write = tokens.cache.read, tokens.cache.write
    input_tokens = tokens.input + read + write
    output_tokens = tokens.output + tokens.reasoning
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
            "total_tokens": input_tokens + output_tokens}


def _reasoning(p: v.ReasoningPart, meta: JSON) -> JSON:
    item: JSON = {"type": "reasoning", "id": meta.get("item_id"),
                  "summary": [{"type": "summary_text", "text": s}
                              for s in meta.get("summary", [p.text] if p.text else [])]}
    if "encrypted_content" in meta:
        item["encrypted_content"] = meta["encrypted_content"]
    if "content" in meta:
        item["content"] = [{"type": "reasoning_text", "text": t} for t in meta["content"]]
    return item


def response(wp: v.WithParts) -> JSON:
    """The assistant message as a Responses API ``Response``: model, status, output, usage.

    For a message ingested from a Responses stream, the response's own fields
    (id, created_at, status, usage as sent, ...) come from
    ``info.metadata.openai.response`` and each output item's (status, ids) from
    ``info.metadata.openai.items``, and ``output`` equals what the
    SDK's ``ResponseStreamState`` holds at the end: messages (text parts of one
    item regrouped, refusals and annotations), function calls (arguments as
    streamed while pending), reasoning items (summaries, encrypted content) and
    every other item kept whole. The finish reason ``"completed"`` is status
    ``completed``; another is status ``incomplete`` with that reason.
    """
    output: list[JSON] = []
    message: JSON | None = None  # the message item text parts are added to
    reason: str | None = None
    tokens = v.Tokens()
    for p in wp.parts:
        meta = c.provider_data(getattr(p, "metadata", None), "openai")
        if isinstance(p, v.TextPart) and not p.ignored:
            if message is None or message["id"] != meta.get("item_id"):
                message = {"type": "message", "id": meta.get("item_id"), "role": "assistant",
                           "content": []}
                if meta.get("phase") is not None:
                    message["phase"] = meta["phase"]
                output.append(message)
            message["content"].append(
                {"type": "refusal", "refusal": p.text} if meta.get("refusal") else
                {"type": "output_text", "text": p.text,
                 "annotations": list(meta.get("annotations") or [])})
            continue
        if isinstance(p, v.StepFinishPart):
            reason, tokens = p.reason or None, p.tokens
            continue
        message = None
        if isinstance(p, v.TextPart):
            if isinstance(meta.get("block"), dict):  # an item kept whole
                output.append(dict(meta["block"]))
        elif isinstance(p, v.ReasoningPart):
            output.append(_reasoning(p, meta))
        elif isinstance(p, v.ToolPart) and meta.get("type") == CUSTOM:
            output.append({**_custom_call(p.call_id, p.tool,
                                          _freeform_input(p.raw, dict(p.state.input)), meta),
                           "id": meta.get("item_id")})
        elif isinstance(p, v.ToolPart):
            output.append({"type": "function_call", "id": meta.get("item_id"),
                           "call_id": p.call_id, "name": p.tool,
                           "arguments": tool_arguments(p)})
    info = wp.info
    kept = c.provider_data(info.metadata, "openai")
    envelope, items = kept.get("response"), kept.get("items")
    if isinstance(envelope, dict):  # ingested from a Responses stream: as it ended
        if isinstance(items, list):
            output = [{**o, **e} for o, e in zip(output, items, strict=False)]
        return {**envelope, "output": output}
    status = None if reason is None else "completed" if reason == "completed" else "incomplete"
    if isinstance(info, v.AssistantInfo) and info.error is not None:
        status = "failed"
    return {"model": getattr(info, "model_id", None), "status": status,
            "incomplete_details": {"reason": None if reason == "incomplete" else reason}
            if status == "incomplete" else None,
            "output": output, "usage": _usage(tokens)}
