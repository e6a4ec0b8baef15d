"""A recorded answer rendered back as its provider's stream.

Each recorded event becomes the stream event it was ingested from (a text
delta a ``text_delta``, a JSON fragment an ``input_json_delta``, ...), so
recording a replayed answer again gives the same events; the envelopes (ids,
model, usage, stop reason) come from the message's metadata as the ingest kept
them. Non-streamed calls get the whole object (the ``projections.render``
responses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from engine import events as ev
from engine.adapters.partial_json import parse_partial
from engine.proxy.routes import ANTHROPIC, CHAT, GEMINI, RESPONSES
from projections import views as v
from projections.render import anthropic as render_anthropic
from projections.render import common as c
from projections.render import openai_chat as render_chat
from projections.render import openai_responses as render_responses
from projections.replay.catalog import Answer

JSON = dict[str, Any]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse(provider: str, answer: Answer) -> Iterator[bytes]:
    """The answer's stream as SSE bytes, one chunk per stream event."""
    if provider == ANTHROPIC:
        for kind, data in anthropic_events(answer):
            yield f"event: {kind}\ndata: {_dumps(data)}\n\n".encode()
    elif provider == RESPONSES:
        for data in responses_events(answer):
            yield f"event: {data['type']}\ndata: {_dumps(data)}\n\n".encode()
    elif provider == CHAT:
        for data in chat_chunks(answer):
            yield f"data: {_dumps(data)}\n\n".encode()
        yield b"data: [DONE]\n\n"
    elif provider == GEMINI:
        for data in gemini_chunks(answer):
            yield f"data: {_dumps(data)}\r\n\r\n".encode()
    else:
        raise ValueError(f"unknown provider {provider!r}")


def whole(provider: str, answer: Answer) -> JSON:
    """The answer as a non-streamed response body."""
    if provider == ANTHROPIC:
        if _final_recorded(answer):
            return render_anthropic.response(answer.message)
        return _anthropic_whole(answer)
    if provider == RESPONSES:
        last = list(responses_events(answer))[-1]
        return dict(last["response"])
    if provider == CHAT:
        whole_chat = render_chat.response(answer.message)
        step = _step(answer)
        if not _final_recorded(answer) and step is not None:
            whole_chat["usage"] = _chat_usage(step.tokens)
        return whole_chat
    return _gemini_whole(answer)


def _anthropic_whole(answer: Answer) -> JSON:
    """The message an SDK accumulates from :func:`anthropic_events` (for an answer whose
    final envelope is not recorded yet: the stop reason and usage are the step's)."""
    message: JSON = {}
    raw: dict[int, str] = {}
    for kind, data in anthropic_events(answer):
        if kind == "message_start":
            message = {**data["message"], "content": []}
        elif kind == "content_block_start":
            message["content"].append(dict(data["content_block"]))
            if "input" in data["content_block"]:
                raw[data["index"]] = ""
        elif kind == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                raw[data["index"]] += delta["partial_json"]
        elif kind == "content_block_stop" and raw.get(data["index"]):
            try:
                message["content"][data["index"]]["input"] = json.loads(raw[data["index"]])
            except ValueError:
                message["content"][data["index"]]["input"] = parse_partial(raw[data["index"]])
        elif kind == "message_delta":
            delta = data["delta"]
            message.update(stop_reason=delta.get("stop_reason"),
                           stop_sequence=delta.get("stop_sequence"),
                           stop_details=delta.get("stop_details"))
            message["usage"] = {**message.get("usage", {}), **data["usage"]}
    return message


def _meta(metadata: Any, provider: str) -> JSON:
    return c.provider_data(metadata, provider)


def _started(answer: Answer) -> ev.MessageStarted:
    first = answer.events[0]
    assert isinstance(first, ev.MessageStarted)
    return first


def _step(answer: Answer) -> ev.StepFinished | None:
    return next((e for e in answer.events if isinstance(e, ev.StepFinished)), None)


def _broken(answer: Answer) -> str | None:
    """The reason a stream broke before its end (an aborted message, no step finish)."""
    for e in answer.events:
        if isinstance(e, ev.StepFinished):
            return None
        if isinstance(e, ev.MessageCompleted) and e.error is not None:
            return e.error.message or e.error.kind
    return None


def _final_recorded(answer: Answer) -> bool:
    """The answer's final envelope is in the log: recorded when its stream ended
    (``message.stream_ended``), or kept with its completion."""
    return any(isinstance(e, ev.MessageStreamEnded | ev.MessageCompleted) and e.metadata
               for e in answer.events)


def _until_step(answer: Answer) -> Iterator[ev.Event]:
    for e in answer.events[1:]:
        if isinstance(e, ev.StepFinished | ev.MessageCompleted):
            return
        yield e


# --------------------------------------------------------------------------- Anthropic


def anthropic_events(answer: Answer) -> Iterator[tuple[str, JSON]]:
    started = _started(answer)
    start = _meta(started.metadata, "anthropic").get("message")
    if not isinstance(start, dict):
        model = started.model.model_id if started.model else ""
        start = {"id": f"msg_{started.message_id.replace('-', '')}", "type": "message",
                 "role": "assistant", "model": model, "stop_reason": None,
                 "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}
    yield "message_start", {"type": "message_start", "message": {**start, "content": []}}
    index: dict[str, int] = {}
    open_blocks: list[str] = []
    kinds: dict[str, str] = {}

    def stop(pid: str) -> Iterator[tuple[str, JSON]]:
        if pid in open_blocks:
            open_blocks.remove(pid)
            yield "content_block_stop", {"type": "content_block_stop", "index": index[pid]}

    def begin(pid: str, block: JSON, kind: str) -> Iterator[tuple[str, JSON]]:
        for other in list(open_blocks):
            yield from stop(other)
        index[pid] = len(index)
        kinds[pid] = kind
        open_blocks.append(pid)
        yield "content_block_start", {"type": "content_block_start", "index": index[pid],
                                      "content_block": block}

    def delta(pid: str, body: JSON) -> tuple[str, JSON]:
        return "content_block_delta", {"type": "content_block_delta", "index": index[pid],
                                       "delta": body}

    for e in _until_step(answer):
        meta = _meta(getattr(e, "metadata", None), "anthropic")
        if isinstance(e, ev.TextAdded):
            if e.ignored:
                if isinstance(meta.get("block"), dict):
                    yield from begin(e.part_id, dict(meta["block"]), "opaque")
                continue
            yield from begin(e.part_id, {"type": "text", "text": e.text}, "text")
        elif isinstance(e, ev.TextDelta) and e.part_id in index:
            yield delta(e.part_id, {"type": "text_delta", "text": e.delta})
        elif isinstance(e, ev.ReasoningAdded):
            if "redacted" in meta:
                yield from begin(e.part_id, {"type": "redacted_thinking",
                                             "data": meta["redacted"]}, "redacted")
            else:
                yield from begin(e.part_id, {"type": "thinking", "thinking": e.text,
                                             "signature": ""}, "thinking")
        elif isinstance(e, ev.ReasoningDelta) and e.part_id in index:
            yield delta(e.part_id, {"type": "thinking_delta", "thinking": e.delta})
        elif isinstance(e, ev.PartEnded) and e.part_id in index:
            if kinds[e.part_id] == "thinking" and meta.get("signature"):
                yield delta(e.part_id, {"type": "signature_delta",
                                        "signature": meta["signature"]})
            yield from stop(e.part_id)
        elif isinstance(e, ev.ToolAdded):
            block = {**meta.get("fields", {}), "type": meta.get("type", "tool_use"),
                     "id": e.call_id, "name": e.tool, "input": dict(e.input)}
            yield from begin(e.part_id, block, "tool")
        elif isinstance(e, ev.ToolInputDelta) and e.part_id in index:
            yield delta(e.part_id, {"type": "input_json_delta", "partial_json": e.fragment})
        elif isinstance(e, ev.ToolInputReady) and e.part_id in index:
            yield from stop(e.part_id)
    for pid in list(open_blocks):
        yield from stop(pid)
    broken = _broken(answer)
    if broken is not None:
        yield "error", {"type": "error", "error": {"type": "api_error", "message": broken}}
        return
    final = _meta(answer.message.info.metadata, "anthropic").get("message")
    step = _step(answer)
    if not isinstance(final, dict) or not _final_recorded(answer):
        # Still waiting for its tools' results: the step has the stop reason and usage.
        final = {k: val for k, val in start.items() if k != "usage"}
    body: JSON = {"stop_reason": final.get("stop_reason") or (step.reason if step else None),
                  "stop_sequence": final.get("stop_sequence")}
    for key in ("stop_details", "container"):
        if key in final and final[key] != start.get(key):
            body[key] = final[key]
    usage = final.get("usage")
    if not isinstance(usage, dict):
        tokens = step.tokens if step else ev.Tokens()
        usage = {"input_tokens": tokens.input, "output_tokens": tokens.output}
        if tokens.cache.read:
            usage["cache_read_input_tokens"] = tokens.cache.read
        if tokens.cache.write:
            usage["cache_creation_input_tokens"] = tokens.cache.write
    yield "message_delta", {"type": "message_delta", "delta": body, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------- Responses


def _item_groups(message: v.WithParts) -> list[list[Any]]:
    """The message's parts grouped by output item, as ``render.openai_responses`` groups
    them (consecutive text parts of one item together)."""
    groups: list[list[Any]] = []
    current: str | None = None
    for p in message.parts:
        meta = _meta(getattr(p, "metadata", None), "openai")
        if isinstance(p, v.TextPart) and not p.ignored:
            if current is None or current != meta.get("item_id") or not groups:
                groups.append([])
            current = meta.get("item_id")
            groups[-1].append(p)
            continue
        current = None
        if isinstance(p, v.StepFinishPart):
            continue
        if isinstance(p, v.TextPart) and not isinstance(meta.get("block"), dict):
            continue
        if isinstance(p, v.TextPart | v.ReasoningPart | v.ToolPart):
            groups.append([p])
    return groups


def responses_events(answer: Answer) -> Iterator[JSON]:
    started = _started(answer)
    start = _meta(started.metadata, "openai").get("response")
    final = render_responses.response(answer.message)
    if not isinstance(start, dict):
        start = {k: val for k, val in final.items() if k != "output"}
        start["status"] = "in_progress"
    deltas: dict[str, list[str]] = {}
    for e in answer.events:
        if isinstance(e, ev.TextDelta | ev.ReasoningDelta):
            deltas.setdefault(e.part_id, []).append(e.delta)
        elif isinstance(e, ev.ToolInputDelta):
            deltas.setdefault(e.part_id, []).append(e.fragment)
    seq = iter(range(1 << 30))

    def out(kind: str, **fields: Any) -> JSON:
        return {"type": kind, "sequence_number": next(seq), **fields}

    yield out("response.created", response={**start, "output": []})
    broken = _broken(answer)
    for idx, (item, parts) in enumerate(zip(final.get("output") or [],
                                            _item_groups(answer.message), strict=False)):
        kind = item.get("type")
        if kind == "message":
            yield out("response.output_item.added", output_index=idx,
                      item={**item, "content": [], "status": "in_progress"})
            for j, (content, p) in enumerate(zip(item.get("content") or [], parts,
                                                 strict=False)):
                refusal = content.get("type") == "refusal"
                empty = {**content, "refusal": ""} if refusal else {**content, "text": ""}
                ref = {"item_id": item.get("id"), "output_index": idx, "content_index": j}
                yield out("response.content_part.added", **ref, part=empty)
                name = "response.refusal" if refusal else "response.output_text"
                for d in deltas.get(p.id, ()):
                    yield out(f"{name}.delta", **ref, delta=d)
                done = {"refusal": content["refusal"]} if refusal else {"text": content["text"]}
                yield out(f"{name}.done", **ref, **done)
                yield out("response.content_part.done", **ref, part=content)
            yield out("response.output_item.done", output_index=idx, item=item)
        elif kind == "function_call":
            yield from _call_input(out, idx, {**item, "arguments": "", "status": "in_progress"},
                                   item, deltas.get(parts[0].id, ()),
                                   name="response.function_call_arguments", field="arguments")
        elif kind == render_responses.CUSTOM:
            # A freeform call streams its text as a function call streams its
            # arguments, under its own event names (custom_tool_call_input).
            added = {**item, "input": ""}
            if "status" in item:
                added["status"] = "in_progress"
            yield from _call_input(out, idx, added, item, deltas.get(parts[0].id, ()),
                                   name="response.custom_tool_call_input", field="input")
        else:
            yield out("response.output_item.added", output_index=idx, item=item)
            yield out("response.output_item.done", output_index=idx, item=item)
    if broken is not None:
        yield out("response.failed", response={**final, "status": "failed",
                                               "error": {"code": "server_error",
                                                         "message": broken}})
        return
    kind = "response.incomplete" if final.get("status") == "incomplete" else \
        "response.completed"
    if not _final_recorded(answer):  # waiting for its tools: usage from the step
        step = _step(answer)
        final = {**final, "usage": _responses_usage(step.tokens if step else ev.Tokens())}
    yield out(kind, response=final)


def _call_input(out: Callable[..., JSON], idx: int, added: JSON, item: JSON,
                fragments: Iterable[str], *, name: str, field: str) -> Iterator[JSON]:
    """A call item streamed as the API streams it: added with its input empty, each
    recorded fragment a ``<name>.delta``, the whole input (``item[field]``) in
    ``<name>.done``, then the item done."""
    yield out("response.output_item.added", output_index=idx, item=added)
    for d in fragments:
        yield out(f"{name}.delta", item_id=item.get("id"), output_index=idx, delta=d)
    yield out(f"{name}.done", item_id=item.get("id"), output_index=idx,
              **{field: item.get(field, "")})
    yield out("response.output_item.done", output_index=idx, item=item)


def _responses_usage(tokens: ev.Tokens) -> JSON:
    read = tokens.cache.read
    inputs, outputs = tokens.input + read, tokens.output + tokens.reasoning
    return {"input_tokens": inputs, "input_tokens_details": {"cached_tokens": read},
            "output_tokens": outputs,
            "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
            "total_tokens": inputs + outputs}


# --------------------------------------------------------------------------- Chat


def chat_chunks(answer: Answer) -> Iterator[JSON]:
    started = _started(answer)
    start = _meta(started.metadata, "openai").get("completion")
    final = _meta(answer.message.info.metadata, "openai").get("completion")
    if not isinstance(start, dict):
        start = {"id": f"chatcmpl-{started.message_id}", "object": "chat.completion",
                 "model": started.model.model_id if started.model else ""}
    if not isinstance(final, dict):
        final = start
    base = {k: val for k, val in start.items() if k != "usage"}
    base["object"] = "chat.completion.chunk"
    later = {**base, "system_fingerprint": final.get("system_fingerprint")}

    def chunk(delta: JSON, finish: str | None = None, env: JSON = later) -> JSON:
        return {**env, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant"}, env=base)
    if _meta(answer.message.info.metadata, "openai").get("content") == "":
        # The stream sent only content "" (beside its tool calls): the envelope keeps it.
        yield chunk({"content": ""})
    tools: dict[str, int] = {}
    refusals: set[str] = set()
    for e in _until_step(answer):
        if isinstance(e, ev.TextAdded) and not e.ignored:
            if _meta(e.metadata, "openai").get("refusal"):
                refusals.add(e.part_id)
                yield chunk({"refusal": e.text})
            else:
                yield chunk({"content": e.text})
        elif isinstance(e, ev.TextDelta):
            yield chunk({"refusal" if e.part_id in refusals else "content": e.delta})
        elif isinstance(e, ev.ReasoningDelta):
            yield chunk({"reasoning_content": e.delta})
        elif isinstance(e, ev.ToolAdded):
            tools[e.part_id] = len(tools)
            yield chunk({"tool_calls": [{"index": tools[e.part_id], "id": e.call_id,
                                         "type": "function",
                                         "function": {"name": e.tool, "arguments": ""}}]})
        elif isinstance(e, ev.ToolInputDelta) and e.part_id in tools:
            yield chunk({"tool_calls": [{"index": tools[e.part_id],
                                         "function": {"arguments": e.fragment}}]})
    step = _step(answer)
    if step is None:
        return  # a broken stream: it ends without a finish_reason
    yield chunk({}, step.reason or "stop")
    usage = final.get("usage") if _final_recorded(answer) else _chat_usage(step.tokens)
    if usage is not None:
        yield {**later, "choices": [], "usage": usage}


def _chat_usage(tokens: ev.Tokens) -> JSON | None:
    if tokens == ev.Tokens():
        return None
    prompt, completion = tokens.input + tokens.cache.read, tokens.output + tokens.reasoning
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": tokens.cache.read},
            "completion_tokens_details": {"reasoning_tokens": tokens.reasoning}}


# --------------------------------------------------------------------------- Gemini


def gemini_chunks(answer: Answer) -> Iterator[JSON]:
    started = _started(answer)
    start = _meta(started.metadata, "gemini").get("response")
    final = _meta(answer.message.info.metadata, "gemini").get("response")
    if not isinstance(start, dict):
        start = {"modelVersion": started.model.model_id if started.model else ""}
    if not isinstance(final, dict):
        final = start
    base = {k: val for k, val in start.items() if k != "usageMetadata"}

    def chunk(parts: list[JSON], **extra: Any) -> JSON:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0,
                                **extra}], **base}

    for e in _until_step(answer):
        meta = _meta(getattr(e, "metadata", None), "gemini")
        if isinstance(e, ev.TextDelta):
            yield chunk([{"text": e.delta}])
        elif isinstance(e, ev.ReasoningDelta):
            yield chunk([{"text": e.delta, "thought": True}])
        elif isinstance(e, ev.PartEnded) and meta.get("thoughtSignature"):
            yield chunk([{"text": "", "thoughtSignature": meta["thoughtSignature"]}])
        elif isinstance(e, ev.ToolInputReady):
            added = next(a for a in answer.events
                         if isinstance(a, ev.ToolAdded) and a.part_id == e.part_id)
            # The id is sent even when the recorded stream had none (the ingest made
            # one): the client sends it back, so a recording of the replay keeps it.
            call: JSON = {"name": added.tool, "args": dict(e.input), "id": added.call_id}
            part: JSON = {"functionCall": call}
            signature = _meta(added.metadata, "gemini").get("thoughtSignature")
            if signature:
                part["thoughtSignature"] = signature
            yield chunk([part])
    step = _step(answer)
    if step is None:
        return
    last = chunk([], finishReason=step.reason)
    usage = final.get("usageMetadata") if _final_recorded(answer) else _gemini_usage(
        step.tokens)
    if usage is not None:
        last["usageMetadata"] = usage
    yield last


def _gemini_usage(tokens: ev.Tokens) -> JSON | None:
    if tokens == ev.Tokens():
        return None
    usage = {"promptTokenCount": tokens.input + tokens.cache.read,
             "candidatesTokenCount": tokens.output}
    if tokens.reasoning:
        usage["thoughtsTokenCount"] = tokens.reasoning
    if tokens.cache.read:
        usage["cachedContentTokenCount"] = tokens.cache.read
    return usage


def _gemini_whole(answer: Answer) -> JSON:
    parts: list[JSON] = []
    finish = None
    usage = None
    base: JSON = {}
    for data in gemini_chunks(answer):
        candidate = data["candidates"][0]
        for part in candidate["content"]["parts"]:
            if parts and "text" in part and "text" in parts[-1] and \
                    bool(part.get("thought")) == bool(parts[-1].get("thought")) \
                    and "thoughtSignature" not in parts[-1]:
                parts[-1] = {**parts[-1], **part, "text": parts[-1]["text"] + part["text"]}
            else:
                parts.append(dict(part))
        finish = candidate.get("finishReason", finish)
        usage = data.get("usageMetadata", usage)
        base = {k: val for k, val in data.items() if k not in ("candidates", "usageMetadata")}
    out = {"candidates": [{"content": {"role": "model", "parts": parts},
                           "finishReason": finish, "index": 0}], **base}
    if usage is not None:
        out["usageMetadata"] = usage
    return out
