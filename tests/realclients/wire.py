"""Each provider API's request read into a :class:`Turn`, a :class:`Reply` written as
that API's stream events (the shapes of docs/streaming.md; the SDKs' parsers are
the reference): Anthropic Messages, OpenAI Responses, OpenAI Chat Completions, Gemini.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from tests.realclients.script import MARKER, Reply, Result, Turn

Event = dict[str, Any]


def _texts(content: Any, kinds: tuple[str, ...] = ("text", "input_text")) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(b.get("text", "")) for b in content
            if isinstance(b, dict) and b.get("type") in kinds]


def _human(texts: list[str]) -> str:
    """The prompt among a user message's texts: the CLIs add their context in
    ``<tag>`` blocks (system reminders, environment context) beside it. Another
    agent's message (Claude Code's ``<teammate-message>``) is a prompt."""
    kept = [t for t in texts if t.strip() and (not t.lstrip().startswith("<")
                                               or t.lstrip().startswith("<teammate-message"))]
    marked = [t for t in kept if MARKER.search(t)]
    return (marked or kept or [""])[-1]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_texts(content, ("text", "input_text", "output_text")))
    return json.dumps(content)


# --- Anthropic Messages ------------------------------------------------------------

def anthropic_turn(body: dict[str, Any]) -> Turn:
    messages = body.get("messages") or []
    prompt, rounds = "", 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            rounds += 1
            continue
        if m.get("role") != "user":  # Claude Code 2.1.x puts "system" messages here
            continue
        prompt = _human(_texts(m.get("content")))
        if prompt:
            break
    results: list[Result] = []
    talk = [m for m in messages if m.get("role") in ("user", "assistant")]
    last = talk[-1] if talk else {}
    if isinstance(last.get("content"), list):
        results = [Result(b.get("tool_use_id", ""), _result_text(b.get("content")),
                          bool(b.get("is_error")))
                   for b in last["content"] if b.get("type") == "tool_result"]
    system = body.get("system")
    return Turn("anthropic", str(body.get("model", "")), prompt, rounds, results,
                [str(t.get("name")) for t in body.get("tools") or []],
                system="\n".join(_texts(system)) if system else "")


def anthropic_events(r: Reply, n: int, model: str) -> Iterator[Event]:
    yield {"type": "message_start", "message": {
        "id": f"msg_scripted_{n}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": r.input_tokens, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}
    index = 0
    if r.thinking:
        yield {"type": "content_block_start", "index": index,
               "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
        yield {"type": "content_block_delta", "index": index,
               "delta": {"type": "thinking_delta", "thinking": r.thinking}}
        yield {"type": "content_block_delta", "index": index,
               "delta": {"type": "signature_delta", "signature": f"sig{n}"}}
        yield {"type": "content_block_stop", "index": index}
        index += 1
    if r.text:
        yield {"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}
        half = len(r.text) // 2
        for piece in (r.text[:half], r.text[half:]):
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": piece}}
        yield {"type": "content_block_stop", "index": index}
        index += 1
    for call in r.calls:
        yield {"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call.id.replace("call_", "toolu_"), "name": call.name,
            "input": {}}}
        yield {"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.input)}}
        yield {"type": "content_block_stop", "index": index}
        index += 1
    yield {"type": "message_delta",
           "delta": {"stop_reason": "tool_use" if r.calls else "end_turn",
                     "stop_sequence": None},
           "usage": {"output_tokens": r.output_tokens}}
    yield {"type": "message_stop"}


def anthropic_error(message: str) -> Event:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


# --- OpenAI Responses --------------------------------------------------------------

_RESPONSES_OUTPUT = ("function_call", "custom_tool_call", "local_shell_call", "reasoning")


def responses_turn(body: dict[str, Any]) -> Turn:
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    prompt, rounds, in_output = "", 0, False
    for item in reversed(items):
        kind = item.get("type", "message")
        role = item.get("role")
        is_output = kind in _RESPONSES_OUTPUT or (kind == "message" and role == "assistant")
        if is_output and not in_output:
            rounds += 1
        in_output = is_output
        if kind == "message" and role == "user":
            prompt = _human(_texts(item.get("content")))
            if prompt:
                break
    results: list[Result] = []
    for item in reversed(items):  # every output after the model's last turn
        kind = item.get("type", "message")
        if kind in _RESPONSES_OUTPUT or (kind == "message" and item.get("role") == "assistant"):
            break
        if kind not in ("function_call_output", "custom_tool_call_output"):
            continue
        output = item.get("output")
        results.insert(0, Result(str(item.get("call_id")), _result_text(
            output.get("content") if isinstance(output, dict) else output)))
    tools, namespaces = [], {}
    for t in body.get("tools") or []:
        tools.append(str(t.get("name") or t.get("type")))
        for inner in t.get("tools") or []:  # a namespace of tools
            tools.append(str(inner.get("name")))
            namespaces[str(inner.get("name"))] = str(t.get("name"))
    return Turn("responses", str(body.get("model", "")), prompt, rounds, results, tools,
                namespaces, system=str(body.get("instructions") or ""))


def responses_events(r: Reply, n: int, model: str) -> Iterator[Event]:
    rid = f"resp_scripted_{n}"
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": base}
    yield {"type": "response.in_progress", "response": base}
    output: list[Event] = []
    if r.thinking:
        item = {"id": f"rs_{n}", "type": "reasoning", "summary": []}
        yield {"type": "response.output_item.added", "output_index": len(output), "item": item}
        yield {"type": "response.reasoning_summary_part.added", "item_id": item["id"],
               "output_index": len(output), "summary_index": 0,
               "part": {"type": "summary_text", "text": ""}}
        yield {"type": "response.reasoning_summary_text.delta", "item_id": item["id"],
               "output_index": len(output), "summary_index": 0, "delta": r.thinking}
        yield {"type": "response.reasoning_summary_text.done", "item_id": item["id"],
               "output_index": len(output), "summary_index": 0, "text": r.thinking}
        done = {**item, "summary": [{"type": "summary_text", "text": r.thinking}]}
        yield {"type": "response.output_item.done", "output_index": len(output), "item": done}
        output.append(done)
    if r.text:
        mid = f"msg_{n}"
        item = {"id": mid, "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        at = len(output)
        yield {"type": "response.output_item.added", "output_index": at, "item": item}
        yield {"type": "response.content_part.added", "item_id": mid, "output_index": at,
               "content_index": 0, "part": {"type": "output_text", "text": "",
                                            "annotations": []}}
        half = len(r.text) // 2
        for piece in (r.text[:half], r.text[half:]):
            yield {"type": "response.output_text.delta", "item_id": mid, "output_index": at,
                   "content_index": 0, "delta": piece}
        part = {"type": "output_text", "text": r.text, "annotations": []}
        yield {"type": "response.output_text.done", "item_id": mid, "output_index": at,
               "content_index": 0, "text": r.text}
        yield {"type": "response.content_part.done", "item_id": mid, "output_index": at,
               "content_index": 0, "part": part}
        done = {**item, "status": "completed", "content": [part]}
        yield {"type": "response.output_item.done", "output_index": at, "item": done}
        output.append(done)
    for call in r.calls:
        at = len(output)
        kind = "custom_tool_call" if call.custom else "function_call"
        field = "input" if call.custom else "arguments"
        item = {"id": f"fc_{call.id}", "type": kind, "status": "in_progress",
                "call_id": call.id, "name": call.name, field: ""}
        if call.namespace:
            item["namespace"] = call.namespace
        yield {"type": "response.output_item.added", "output_index": at, "item": item}
        if not call.custom:
            yield {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                   "output_index": at, "delta": call.arguments()}
            yield {"type": "response.function_call_arguments.done", "item_id": item["id"],
                   "output_index": at, "arguments": call.arguments()}
        done = {**item, "status": "completed", field: call.arguments()}
        yield {"type": "response.output_item.done", "output_index": at, "item": done}
        output.append(done)
    usage = {"input_tokens": r.input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": r.output_tokens,
             "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": r.input_tokens + r.output_tokens}
    yield {"type": "response.completed",
           "response": {**base, "status": "completed", "output": output, "usage": usage}}


def responses_error(message: str) -> Event:
    return {"error": {"type": "invalid_request_error", "code": "invalid_prompt",
                      "message": message, "param": None}}


# --- OpenAI Chat Completions ---------------------------------------------------------

def chat_turn(body: dict[str, Any]) -> Turn:
    messages = body.get("messages") or []
    prompt, rounds = "", 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            rounds += 1
        elif m.get("role") == "user":
            prompt = _human(_texts(m.get("content")))
            if prompt:
                break
    results: list[Result] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        results.insert(0, Result(str(m.get("tool_call_id")), _result_text(m.get("content"))))
    system = "\n".join("\n".join(_texts(m.get("content"))) for m in messages
                       if m.get("role") == "system")
    tools = [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []]
    return Turn("chat", str(body.get("model", "")), prompt, rounds, results, tools,
                system=system)


def chat_events(r: Reply, n: int, model: str, usage: bool) -> Iterator[Event]:
    base = {"id": f"chatcmpl-scripted-{n}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: Event, finish: str | None = None) -> Event:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if r.thinking:
        yield chunk({"reasoning_content": r.thinking})
    if r.text:
        half = len(r.text) // 2
        yield chunk({"content": r.text[:half]})
        yield chunk({"content": r.text[half:]})
    for i, call in enumerate(r.calls):
        yield chunk({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": i,
                                     "function": {"arguments": call.arguments()}}]})
    yield chunk({}, "tool_calls" if r.calls else "stop")
    if usage:
        yield {**base, "choices": [], "usage": {
            "prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
            "total_tokens": r.input_tokens + r.output_tokens}}


def chat_whole(r: Reply, n: int, model: str) -> Event:
    message: Event = {"role": "assistant", "content": r.text or None}
    if r.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": c.arguments()}} for c in r.calls]
    return {"id": f"chatcmpl-scripted-{n}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if r.calls else "stop"}],
            "usage": {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
                      "total_tokens": r.input_tokens + r.output_tokens}}


def openai_error(message: str) -> Event:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}


# --- Gemini ----------------------------------------------------------------------------

def gemini_turn(body: dict[str, Any], model: str) -> Turn:
    contents = body.get("contents") or []
    prompt, rounds = "", 0
    for c in reversed(contents):
        if c.get("role") == "model":
            rounds += 1
            continue
        texts = [str(p["text"]) for p in c.get("parts") or [] if "text" in p]
        prompt = _human(texts)
        if prompt:
            break
    results: list[Result] = []
    last = contents[-1] if contents else {}
    for p in last.get("parts") or []:
        fr = p.get("functionResponse")
        if fr:
            response = fr.get("response") or {}
            err = "error" in response
            output = response.get("error") if err else response.get("output", response)
            results.append(Result(str(fr.get("id") or fr.get("name")),
                                  output if isinstance(output, str) else json.dumps(output),
                                  err))
    tools = [str(d.get("name")) for t in body.get("tools") or []
             for d in t.get("functionDeclarations") or []]
    config = body.get("generationConfig") or {}
    system = "\n".join(str(p.get("text", "")) for p in
                       (body.get("systemInstruction") or {}).get("parts") or [])
    return Turn("gemini", model, prompt, rounds, results, tools,
                wants_json=config.get("responseMimeType") == "application/json",
                system=system)


def gemini_chunks(r: Reply, n: int, model: str) -> Iterator[Event]:
    usage = {"promptTokenCount": r.input_tokens, "candidatesTokenCount": r.output_tokens,
             "totalTokenCount": r.input_tokens + r.output_tokens}
    base = {"modelVersion": model, "responseId": f"scripted-{n}"}

    def chunk(parts: list[Event], finish: str | None = None) -> Event:
        candidate: Event = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {**base, "candidates": [candidate], "usageMetadata": usage}

    if r.thinking:
        yield chunk([{"text": r.thinking, "thought": True}])
    if r.text:
        half = len(r.text) // 2
        yield chunk([{"text": r.text[:half]}])
        yield chunk([{"text": r.text[half:]}])
    if r.calls:
        yield chunk([{"functionCall": {"id": c.id, "name": c.name, "args": c.input}}
                     for c in r.calls])
    yield chunk([], "STOP") if r.calls or r.text or r.thinking else chunk([{"text": ""}], "STOP")


def gemini_whole(r: Reply, n: int, model: str) -> Event:
    parts: list[Event] = []
    for c in gemini_chunks(r, n, model):
        parts.extend(c["candidates"][0]["content"]["parts"])
    merged = [p for p in parts if p.get("text") or "functionCall" in p]
    last = list(gemini_chunks(r, n, model))[-1]
    last["candidates"][0]["content"]["parts"] = merged or [{"text": ""}]
    return last


def gemini_error(message: str) -> Event:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
