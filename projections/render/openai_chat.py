"""OpenAI Chat Completions: ``messages`` for a request, and ``response`` (the SDK's view).

Each assistant turn is one ``assistant`` message (its text joined, its calls in
``tool_calls``), followed by one ``tool`` message per call. Cannot carry:
reasoning (Chat Completions takes none back), server-executed tools and other
providers' opaque blocks, error flags on results (the error text is sent as the
result), files other than images (sent as a note), part metadata.

A freeform tool's call (recorded from a Responses ``custom_tool_call``: Codex's
``apply_patch``) is a Chat ``custom`` tool call, ``{"id", "type": "custom",
"custom": {"name", "input"}}`` with the model's text byte for byte, in a request's
``tool_calls`` and in the response's message, as the SDK's
``ChatCompletionMessageCustomToolCall`` types it; its result is a ``tool`` message
like any other. (Sent as a ``function`` call, its text would be taken for JSON
arguments, which it is not.)
"""

from __future__ import annotations

import json
from typing import Any

from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


CUSTOM_TOOL_CALL = "custom_tool_call"


def freeform(metadata: JSON | None) -> JSON | None:
    """The provider data of a freeform tool's call (``type`` ``custom_tool_call``), or None."""
    for data in (metadata or {}).values():
        if isinstance(data, dict) and data.get("type") == CUSTOM_TOOL_CALL:
            return data
    return None


def freeform_input(raw: str | None, input: JSON) -> str:
    """A freeform call's text: as the model wrote it, else the input it was read as."""
    if raw is not None:
        return raw
    text = input.get("input", "")
    return text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)


def _call(call_id: str, name: str, arguments: str, metadata: JSON | None) -> JSON:
    """One ``tool_calls`` entry: a ``custom`` call for a freeform tool, else a function."""
    if freeform(metadata) is not None:
        return {"id": call_id, "type": "custom", "custom": {"name": name, "input": arguments}}
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def arguments(call: c.ToolCall) -> str:
    """The call's arguments string: the raw JSON as streamed when known, else the input."""
    return call.raw if call.raw else json.dumps(call.input, ensure_ascii=False)


def _user_content(items: tuple[c.Item, ...]) -> str | list[JSON]:
    if all(isinstance(i, c.Text) for i in items):
        return "\n\n".join(i.text for i in items if isinstance(i, c.Text))
    parts: list[JSON] = []
    for i in items:
        if isinstance(i, c.Text):
            parts.append({"type": "text", "text": i.text})
        elif isinstance(i, c.File):
            if i.mime.startswith("image/"):
                parts.append({"type": "image_url", "image_url": {"url": i.url}})
            else:
                parts.append({"type": "text", "text": c.file_note(i)})
    return parts


def messages(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    for turn in c.turns(history):
        if turn.role == "user":
            out.append({"role": "user", "content": _user_content(turn.items)})
        elif turn.role == "tool":
            for r in turn.items:
                assert isinstance(r, c.ToolResult)
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.output})
        else:
            text = "".join(i.text for i in turn.items if isinstance(i, c.Text))
            calls = [_call(i.call_id, i.name, freeform_input(i.raw, i.input)
                           if freeform(i.metadata) is not None else arguments(i), i.metadata)
                     for i in turn.items if isinstance(i, c.ToolCall) and not i.server]
            if not text and not calls:
                continue
            msg: JSON = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    return out


def _usage(tokens: v.Tokens) -> JSON:
    prompt = tokens.input + tokens.cache.read + tokens.cache.write
    completion = tokens.output + tokens.reasoning
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": tokens.cache.read},
            "completion_tokens_details": {"reasoning_tokens": tokens.reasoning}}


def tool_arguments(p: v.ToolPart) -> str:
    """The arguments text as the model wrote it, byte for byte (whatever the call's
    state); a call that came with no text renders its input as JSON, and an empty
    input ``""``, as the SDKs accumulate a call whose arguments never streamed."""
    if p.raw is not None:
        return p.raw
    state = p.state
    if isinstance(state, v.ToolStateError) and state.metadata is not None \
            and state.metadata.get("kind") == "truncated":
        return str(state.metadata.get("raw", ""))
    return json.dumps(dict(state.input), ensure_ascii=False) if state.input else ""


def response(wp: v.WithParts) -> JSON:
    """The assistant message as the ``ChatCompletion`` the SDK's stream state ends with.

    The completion's own fields (id, created, model, system_fingerprint, usage
    as sent or None, ...) come from ``info.metadata.openai.completion`` for a
    message ingested from a Chat stream; otherwise usage is built from the
    message's tokens. ``choices[0]`` holds the message: content ("" when the
    stream sent only ""), refusal, tool calls, finish reason.
    """
    content: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: list[JSON] = []
    finish: str | None = None
    tokens: v.Tokens | None = None
    kept = c.provider_data(wp.info.metadata, "openai")
    if kept.get("content") == "":
        content.append("")  # the stream sent only "": the SDK's "", not None
    for p in wp.parts:
        if isinstance(p, v.ReasoningPart) and c.provider_data(p.metadata, "openai").get(
                "field") == "reasoning_content":
            reasoning.append(p.text)
        elif isinstance(p, v.TextPart) and not p.ignored:
            if c.provider_data(p.metadata, "openai").get("refusal"):
                refusal.append(p.text)
            else:
                content.append(p.text)
        elif isinstance(p, v.ToolPart):
            text = freeform_input(p.raw, dict(p.state.input)) \
                if freeform(p.metadata) is not None else tool_arguments(p)
            calls.append({"index": len(calls), **_call(p.call_id, p.tool, text, p.metadata)})
        elif isinstance(p, v.StepFinishPart):
            finish, tokens = p.reason or None, p.tokens
    message: JSON = {"role": "assistant", "content": "".join(content) if content else None,
                     "refusal": "".join(refusal) if refusal else None,
                     "tool_calls": calls or None}
    if reasoning:  # a provider's extra field, accumulated by the SDK as sent
        message["reasoning_content"] = "".join(reasoning)
    envelope = kept.get("completion")
    if not isinstance(envelope, dict):
        envelope = {"object": "chat.completion",
                    "usage": _usage(tokens or v.Tokens())}  # not from a stream: tokens
    return {**envelope, "choices": [{"index": 0, "finish_reason": finish,
                                     "message": message}]}
