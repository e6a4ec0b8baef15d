"""Anthropic Messages: ``messages`` for a request, and ``response`` (what the SDK accumulates).

Request rules beyond :mod:`projections.render.common`: roles alternate (adjacent
turns of one role merge; a tool turn is a user message of ``tool_result``
blocks, placed before any text); thinking is sent only with its Anthropic
signature (reasoning from other providers cannot be verified and is dropped),
as it was received, even when its text is empty (the API wants it back
unchanged in a tool-use loop); redacted thinking, text citations, a tool
block's other fields (``caller``, ...), server tool calls and their result
blocks are sent back verbatim. A server tool call is sent only together with
its result block, after it in the same assistant message, and never gets a
``tool_result``; a server call without its result (a ``pause_turn``, an aborted
stream) and a result without its call are left out. Cannot carry:
non-Anthropic reasoning, files other than images, PDFs and plain text (sent as
a note), part timing and metadata.
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any

from engine.adapters.ingest import loads
from engine.adapters.partial_json import parse_partial
from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


def _file_block(f: c.File) -> JSON:
    decoded = c.data_url(f.url)
    if f.mime.startswith("image/"):
        if decoded is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": decoded[0],
                                                "data": decoded[1]}}
        return {"type": "image", "source": {"type": "url", "url": f.url}}
    if f.mime == "application/pdf":
        if decoded is not None:
            return {"type": "document", "source": {"type": "base64", "media_type": decoded[0],
                                                   "data": decoded[1]}}
        return {"type": "document", "source": {"type": "url", "url": f.url}}
    if f.mime.startswith("text/") and decoded is not None:
        text = base64.b64decode(decoded[1]).decode("utf-8", "replace")
        if text:
            return {"type": "text", "text": text}
    return {"type": "text", "text": c.file_note(f)}


def _is_server_call(block: JSON) -> bool:
    kind: str = block["type"]
    return kind != "tool_use" and kind.endswith("_tool_use")


def _server_pairs(blocks: list[JSON]) -> list[JSON]:
    """Server calls that have their result after them, with that (first) result."""
    calls: set[str] = set()
    paired: set[str] = set()
    kept: list[JSON] = []
    for b in blocks:
        if _is_server_call(b):
            calls.add(b.get("id", ""))
        elif "tool_use_id" in b:  # in an assistant turn, only a server tool's result
            if b["tool_use_id"] not in calls or b["tool_use_id"] in paired:
                continue
            paired.add(b["tool_use_id"])
        kept.append(b)
    return [b for b in kept if not _is_server_call(b) or b.get("id") in paired]


def _assistant_block(item: c.Item) -> JSON | None:
    if isinstance(item, c.Text):
        block: JSON = {"type": "text", "text": item.text}
        citations = c.provider_data(item.metadata, "anthropic").get("citations")
        if citations:
            block["citations"] = citations
        return block
    if isinstance(item, c.Reasoning):
        data = item.provider("anthropic")
        if "redacted" in data:
            return {"type": "redacted_thinking", "data": data["redacted"]}
        if data.get("signature"):  # sent back unchanged, even with no text (a redacted log)
            return {"type": "thinking", "thinking": item.text, "signature": data["signature"]}
        return None
    if isinstance(item, c.ToolCall):
        data = c.provider_data(item.metadata, "anthropic")
        kind = data.get("type", "server_tool_use") if item.server else "tool_use"
        fields = {k: v for k, v in (data.get("fields") or {}).items() if v is not None}
        return {**fields, "type": kind, "id": item.call_id, "name": item.name,
                "input": item.input}
    if isinstance(item, c.Opaque):
        return dict(item.block) if item.provider == "anthropic" else None
    if isinstance(item, c.File):
        return _file_block(item)
    return None


def messages(history: list[v.WithParts]) -> list[JSON]:
    """The ``messages`` of a Messages API request for this history."""
    out: list[JSON] = []
    for turn in c.turns(history):
        blocks: list[JSON] = []
        if turn.role == "tool":
            for r in turn.items:
                assert isinstance(r, c.ToolResult)
                block: JSON = {"type": "tool_result", "tool_use_id": r.call_id,
                               "content": r.output}
                if r.is_error:
                    block["is_error"] = True
                blocks.append(block)
            role = "user"
        elif turn.role == "user":
            for item in turn.items:
                if isinstance(item, c.Text):
                    blocks.append({"type": "text", "text": item.text})
                elif isinstance(item, c.File):
                    blocks.append(_file_block(item))
            role = "user"
        else:
            blocks = _server_pairs([b for b in map(_assistant_block, turn.items)
                                    if b is not None])
            if not any(b["type"] not in ("thinking", "redacted_thinking") for b in blocks):
                continue  # thinking alone is no answer
            role = "assistant"
        if blocks:
            out.append({"role": role, "content": blocks})
    return c.merge_adjacent(out)


# --------------------------------------------------------------------------- response


def _usage(tokens: v.Tokens) -> JSON:
    return {"input_tokens": tokens.input, "output_tokens": tokens.output,
            "cache_read_input_tokens": tokens.cache.read,
            "cache_creation_input_tokens": tokens.cache.write}


def tool_input(p: v.ToolPart) -> Any:
    """A tool call's input as the SDK shows it: the arguments the model wrote, parsed
    (whatever input a runner then gave the call), cut-off ones partially parsed."""
    state = p.state
    if p.raw and not isinstance(state, v.ToolStatePending):
        with contextlib.suppress(ValueError, RecursionError):
            value = loads(p.raw)
            if isinstance(value, dict):
                return value
    if isinstance(state, v.ToolStateError) and state.metadata is not None \
            and state.metadata.get("kind") == "truncated":
        try:
            return parse_partial(state.metadata.get("raw", ""))
        except ValueError:
            return dict(state.input)
    return dict(state.input)


def response(wp: v.WithParts) -> JSON:
    """The assistant message as the Messages API returns it (every block, even empty ones).

    Equals what the SDK accumulates from the stream the message was ingested
    from, envelope included: the message's fields as kept in
    ``info.metadata.anthropic.message`` (id, model, stop reason and sequence,
    usage as sent), and every content block. A message that was not ingested
    from Anthropic gets role, stop reason and usage from convlog's own fields.
    """
    content: list[JSON] = []
    stop_reason: str | None = None
    tokens = v.Tokens()
    for p in wp.parts:
        meta = c.provider_data(getattr(p, "metadata", None), "anthropic")
        if isinstance(p, v.TextPart):
            if p.ignored:
                if "block" in meta:
                    content.append(dict(meta["block"]))
                continue
            block: JSON = {"type": "text", "text": p.text}
            if "citations" in meta:  # as the stream sent them, even null or []
                block["citations"] = meta["citations"]
            content.append(block)
        elif isinstance(p, v.ReasoningPart):
            if "redacted" in meta:
                content.append({"type": "redacted_thinking", "data": meta["redacted"]})
            else:
                content.append({"type": "thinking", "thinking": p.text,
                                "signature": meta.get("signature", "")})
        elif isinstance(p, v.ToolPart):
            content.append({**meta.get("fields", {}), "type": meta.get("type", "tool_use"),
                            "id": p.call_id, "name": p.tool, "input": tool_input(p)})
        elif isinstance(p, v.StepFinishPart):
            stop_reason, tokens = p.reason or None, p.tokens
    info = wp.info
    envelope = c.provider_data(info.metadata, "anthropic").get("message")
    if isinstance(envelope, dict):
        return {**envelope, "content": content}
    if isinstance(info, v.AssistantInfo) and info.time.completed is not None:
        stop_reason = info.finish if info.finish is not None else stop_reason
        if info.error is None:
            tokens = info.tokens
    return {"role": "assistant", "content": content, "stop_reason": stop_reason,
            "usage": _usage(tokens)}
