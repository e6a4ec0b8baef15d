"""Streaming benchmark: convlog's ingest + projection vs the SDKs' own accumulators.

Usage (from the repository root)::

    .venv/bin/python benchmarks/streaming.py            # 100,000 deltas per stream
    .venv/bin/python benchmarks/streaming.py --deltas 20000 --repeat 1

Two streams, each run through both sides in the same process on the same events:

1. Anthropic, long blocks: a message of text blocks and ``tool_use`` blocks whose
   input JSON arrives in many small ``input_json_delta`` fragments (about half
   the deltas), through ``AnthropicIngest`` into a ``Session`` on a
   ``MemoryStore`` with a ``WithPartsProjection`` subscribed (every delta is its
   own checked, stored event), and the final message rendered back; vs
   ``anthropic.lib.streaming._messages.accumulate_event``.
   Anthropic, short blocks: the same number of deltas in many short blocks, text
   and tool calls interleaved (three deltas each), so the per-block work (part
   added, ended, tool input parsed) weighs as much as the deltas.
2. OpenAI Chat Completions: content chunks and ``tool_calls`` argument chunks,
   through ``OpenAIChatIngest`` the same way; vs ``ChatCompletionStreamState``.
3. OpenAI Responses: message items streaming ``output_text`` deltas and
   ``function_call`` items streaming their arguments, through
   ``OpenAIResponsesIngest``; vs ``ResponseStreamState``.

convlog runs three ways: committing each provider event on its own
(``batch=1``), in batches of 64 events (``batch=64``; every event is still
recorded, checked and chained), and with text deltas coalesced to 64+
characters. The headline is ``batch=64``: every provider event recorded, chain
on.

**The ratio** is convlog's time divided by the SDK accumulator's on the same
events: below 1 convlog is faster (0.2x: it takes a fifth of the SDK's time).
Times are CPU seconds of this process (``time.process_time``), best of
``--repeat``, so other work on a shared machine weighs less. The inputs are
built, collected and frozen out of the garbage collector's reach before any
timing (``gc.freeze``), and so is the SDK's result kept for the comparison: a
full collection during a run then walks what that run built, not the
benchmark's own copies of the streams or another run's result, which would
otherwise be charged to whichever side happens to trigger it.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from anthropic.lib.streaming._messages import accumulate_event
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session
from engine.store import MemoryStore
from projections.render import anthropic as render_anthropic
from projections.render import openai_chat as render_openai
from projections.render import openai_responses as render_responses
from projections.withparts import WithPartsProjection

JSON = dict[str, Any]
TOOLS = 20  # tool calls per stream
FRAGMENT = 6  # characters per JSON fragment
TEXT = "Streaming 日本語 text, ok. "


def tool_json(size: int, k: int) -> str:
    """A JSON object of about ``size`` characters (a file edit with non-ASCII text)."""
    head = json.dumps({"path": f"src/module_{k}.py", "content": ""}, ensure_ascii=False)
    filler = ("line é日 {}\n" * (size // 10 + 1))[: max(size - len(head), 0)]
    return json.dumps({"path": f"src/module_{k}.py", "content": filler}, ensure_ascii=False)


def anthropic_stream(deltas: int) -> list[JSON]:
    per_tool = deltas // 2 // TOOLS
    per_text = deltas // 2 // TOOLS
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 1}}}]
    index = 0
    for k in range(TOOLS):
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": TEXT[i % 7:]}}
                   for i in range(per_text)]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
        raw = tool_json(per_tool * FRAGMENT, k)
        pieces = [raw[i:i + FRAGMENT] for i in range(0, len(raw), FRAGMENT)]
        events.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": f"toolu_{k:03d}", "name": "edit", "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p}} for p in pieces]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events += [{"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                   "stop_sequence": None},
                "usage": {"output_tokens": deltas}}, {"type": "message_stop"}]
    return events


SHORT = 3  # deltas per short block


def anthropic_short_stream(deltas: int) -> list[JSON]:
    """Many short blocks: a text block, then a tool call, and again, three deltas each."""
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 1}}}]
    for index in range(deltas // SHORT):
        if index % 2 == 0:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": TEXT[i:i + 9]}}
                       for i in range(SHORT)]
        else:
            raw = json.dumps({"path": f"src/m{index}.py"})
            step = len(raw) // SHORT + 1
            events.append({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": f"toolu_{index:05d}", "name": "read", "input": {}}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": raw[i:i + step]}}
                       for i in range(0, len(raw), step)]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                   "stop_sequence": None},
                "usage": {"output_tokens": deltas}}, {"type": "message_stop"}]
    return events


def openai_chunks(deltas: int) -> list[JSON]:
    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-bench",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    per_text = deltas // 2
    per_tool = deltas // 2 // TOOLS
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": TEXT[i % 7:]}) for i in range(per_text)]
    for k in range(TOOLS):
        raw = tool_json(per_tool * FRAGMENT, k)
        pieces = [raw[i:i + FRAGMENT] for i in range(0, len(raw), FRAGMENT)]
        out.append(chunk({"tool_calls": [{"index": k, "id": f"call_{k}", "type": "function",
                                          "function": {"name": "edit",
                                                       "arguments": pieces[0]}}]}))
        out += [chunk({"tool_calls": [{"index": k, "function": {"arguments": p}}]})
                for p in pieces[1:]]
    out.append(chunk({}, "tool_calls"))
    out.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-bench", "choices": [], "usage": {
                    "prompt_tokens": 1000, "completion_tokens": deltas,
                    "total_tokens": 1000 + deltas}})
    return out


def responses_events(deltas: int) -> list[JSON]:
    """Per tool: a message item of text deltas, then a function call of argument deltas."""
    per_tool = deltas // 2 // TOOLS
    per_text = deltas // 2 // TOOLS
    resp: JSON = {"id": "resp_bench", "object": "response", "created_at": 1,
                  "model": "gpt-bench", "status": "in_progress", "output": [],
                  "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    events: list[JSON] = [{"type": "response.created", "sequence_number": 0,
                           "response": resp}]
    output: list[JSON] = []
    for k in range(TOOLS):
        item_id, index = f"msg_{k}", len(output)
        text = [TEXT[i % 7:] for i in range(per_text)]
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {"id": item_id, "type": "message", "role": "assistant",
                                "status": "in_progress", "content": []}})
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        events.append({"type": "response.content_part.added", **where,
                       "part": {"type": "output_text", "text": "", "annotations": []}})
        events += [{"type": "response.output_text.delta", **where, "delta": t,
                    "logprobs": []} for t in text]
        full = {"type": "output_text", "text": "".join(text), "annotations": []}
        events.append({"type": "response.content_part.done", **where, "part": full})
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                "content": [full]}
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
        output.append(item)
        raw = tool_json(per_tool * FRAGMENT, k)
        call: JSON = {"id": f"fc_{k}", "type": "function_call", "call_id": f"call_{k}",
                      "name": "edit", "arguments": "", "status": "in_progress"}
        index = len(output)
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": call})
        events += [{"type": "response.function_call_arguments.delta", "item_id": call["id"],
                    "output_index": index, "delta": raw[i:i + FRAGMENT]}
                   for i in range(0, len(raw), FRAGMENT)]
        done = {**call, "arguments": raw, "status": "completed"}
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": done})
        output.append(done)
    events.append({"type": "response.completed", "response": {
        **resp, "status": "completed", "output": output,
        "usage": {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": deltas, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 1000 + deltas}}})
    for n, e in enumerate(events):
        e["sequence_number"] = n
    return events


# (batch, coalesce_chars): every delta its own event (committed per provider event, or
# 64 events per commit); and text deltas coalesced to >= 64 characters (tool fragments
# are never coalesced).
CONFIGS = ((1, 0), (64, 0), (64, 64))


def label(batch: int, coalesce: int) -> str:
    return f"batch={batch}" + (f" coalesce={coalesce}" if coalesce else "")


def best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best CPU time of ``repeat`` runs, and the last run's result."""
    times, out = [], None
    for _ in range(repeat):
        out = None  # the previous result is garbage before the next run starts
        gc.collect()
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return min(times), out


Adapter = type[AnthropicIngest] | type[OpenAIChatIngest] | type[OpenAIResponsesIngest]


def run_convlog(adapter: Adapter, events: list[JSON], batch: int, coalesce: int = 0
                ) -> tuple[int, Any]:
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    result = adapter(session, batch=batch, coalesce_chars=coalesce).ingest(events)
    return session.version, proj.message(result.message_id)


def run_anthropic_sdk(events: list[JSON]) -> Any:
    snap: Any = None
    bufs: dict[int, bytes] = {}
    for e in events:
        snap = accumulate_event(event=e, current_snapshot=snap, json_bufs=bufs)  # type: ignore[arg-type]
    return snap


def run_openai_sdk(chunks: list[ChatCompletionChunk]) -> Any:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(c)
    return state.current_completion_snapshot


def run_responses_sdk(events: list[Any]) -> Any:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for e in events:
        for out in state.handle_event(e):
            if out.type == "response.completed":
                final = out.response  # the accumulated, parsed response
    return final


# What each run checks before it prints a ratio: convlog's message equals the SDK's.
def same_anthropic(wp: Any, snap: Any) -> bool:
    mine = render_anthropic.response(wp)["content"]
    return [b.get("input") for b in mine] == [getattr(b, "input", None) for b in snap.content]


def same_openai_chat(wp: Any, snap: Any) -> bool:
    mine = render_openai.response(wp)
    if "choices" in mine:  # the whole ChatCompletion (the flat form before issue 9)
        mine = mine["choices"][0]["message"]
    return bool(mine["content"] == snap.choices[0].message.content)


def same_responses(wp: Any, snap: Any) -> bool:
    mine = render_responses.response(wp)["output"]
    return [i.get("arguments") for i in mine] == [getattr(i, "arguments", None)
                                                  for i in snap.output]


def settle() -> None:
    """Collect, then move what the harness holds (inputs, results kept for the
    comparison) out of the collector's reach: runs pay for what they build."""
    gc.collect()
    gc.freeze()


def compare(title: str, sdk_name: str, repeat: int, *, sdk_run: Callable[[], Any],
            adapter: Adapter, events: list[JSON], same: Callable[[Any, Any], bool]) -> None:
    """Time the SDK and each convlog configuration; ``same(convlog message, SDK result)``."""
    settle()
    sdk_t, snap = best(repeat, sdk_run)
    settle()  # the SDK's result is kept for the comparison: the harness's now
    print(f"\n{title}: {len(events):,} events")
    print(f"  SDK {sdk_name:<26} {sdk_t:8.3f} s CPU")
    for batch, co in CONFIGS:
        t, (n, wp) = best(repeat, partial(run_convlog, adapter, events, batch, co))
        assert same(wp, snap), f"{title}: convlog and the SDK disagree"
        del wp
        print(f"  convlog {label(batch, co):<22} {t:8.3f} s CPU  "
              f"({n:,} events recorded)  ratio {t / sdk_t:.3f}x")
    gc.unfreeze()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["anthropic"], default=None,
                        help="only the Anthropic streams (long and short blocks)")
    args = parser.parse_args(argv)
    print(f"deltas per stream: {args.deltas:,}; best of {args.repeat} (CPU time)")
    print("ratio = convlog time / SDK accumulator time on the same events "
          "(lower is better; 0.2x = a fifth of the SDK's time)")

    # Each SDK is handed what its own stream yields (event objects for the OpenAI
    # SDKs, dicts for Anthropic's accumulator); convlog gets the dicts.
    events = anthropic_stream(args.deltas)
    sdk_events = copy.deepcopy(events)
    compare("Anthropic, long blocks", "accumulate_event", args.repeat,
            sdk_run=lambda: run_anthropic_sdk(sdk_events), adapter=AnthropicIngest,
            events=events, same=same_anthropic)

    short = anthropic_short_stream(args.deltas)
    sdk_short = copy.deepcopy(short)
    compare("Anthropic, short blocks", "accumulate_event", args.repeat,
            sdk_run=lambda: run_anthropic_sdk(sdk_short), adapter=AnthropicIngest,
            events=short, same=same_anthropic)

    if args.only:
        return
    chunks = openai_chunks(args.deltas)
    models = [ChatCompletionChunk.model_validate(c) for c in chunks]
    compare("OpenAI Chat Completions", "ChatCompletionStreamState", args.repeat,
            sdk_run=lambda: run_openai_sdk(models), adapter=OpenAIChatIngest,
            events=chunks, same=same_openai_chat)

    revents = responses_events(args.deltas)
    robjects = [construct_type(type_=ResponseStreamEvent, value=copy.deepcopy(e))
                for e in revents]
    compare("OpenAI Responses", "ResponseStreamState", args.repeat,
            sdk_run=lambda: run_responses_sdk(robjects), adapter=OpenAIResponsesIngest,
            events=revents, same=same_responses)


if __name__ == "__main__":
    main()
