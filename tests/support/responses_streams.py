"""Hypothesis strategies for OpenAI Responses stream events (plain dicts, as over SSE)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from tests.support.anthropic_streams import INPUTS, TEXT, splits

JSON = dict[str, Any]

RESPONSE: JSON = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-test",
                  "status": "in_progress", "output": [], "parallel_tool_calls": True,
                  "tool_choice": "auto", "tools": []}
ENCRYPTED = st.text("abcXYZ0123=+/", min_size=1, max_size=16)


class Stream:
    """Events under construction, numbered as the server numbers them."""

    def __init__(self) -> None:
        self.events: list[JSON] = []
        self._seq: Iterator[int] = itertools.count()

    def add(self, kind: str, **fields: Any) -> JSON:
        event = {"type": kind, "sequence_number": next(self._seq), **fields}
        self.events.append(event)
        return event


@st.composite
def _pieces(draw: st.DrawFn, text: str, *, lossy: bool) -> list[str]:
    """``text`` as deltas; when ``lossy``, maybe only a prefix (the done event has the rest)."""
    pieces = draw(splits(text))
    if lossy and len(pieces) > 1 and draw(st.integers(0, 5)) == 0:
        pieces = pieces[: draw(st.integers(0, len(pieces) - 1))]
    return pieces


@st.composite
def message_item(draw: st.DrawFn, s: Stream, index: int, *, cut: bool = False) -> JSON:
    """One assistant message: output_text parts (with annotations) and refusals.

    ``cut``: the response ends inside this item (no done events, output_text only).
    """
    item_id = f"msg_{index}"
    phase = draw(st.sampled_from([None, None, "commentary", "final_answer"]))
    head: JSON = {"id": item_id, "type": "message", "role": "assistant",
                  "status": "in_progress", "content": []}
    if phase is not None:
        head["phase"] = phase
    s.add("response.output_item.added", output_index=index, item=head)
    refs: JSON = {"item_id": item_id, "output_index": index}
    parts: list[JSON] = []
    for ci in range(draw(st.integers(1, 3))):
        text = draw(TEXT)
        pieces = draw(_pieces(text, lossy=not cut))
        refs_ci = {**refs, "content_index": ci}
        if not cut and draw(st.integers(0, 4)) == 0:
            s.add("response.content_part.added", **refs_ci,
                  part={"type": "refusal", "refusal": ""})
            for p in pieces:
                s.add("response.refusal.delta", **refs_ci, delta=p)
            s.add("response.refusal.done", **refs_ci, refusal=text)
            part: JSON = {"type": "refusal", "refusal": text}
        else:
            s.add("response.content_part.added", **refs_ci,
                  part={"type": "output_text", "text": "", "annotations": []})
            annotations: list[JSON] = []
            for p in pieces:
                s.add("response.output_text.delta", **refs_ci, delta=p, logprobs=[])
                if not cut and draw(st.integers(0, 6)) == 0:  # the SDK drops unfinished ones
                    annotation = {"type": "url_citation", "url": f"https://x.test/{ci}",
                                  "title": draw(TEXT), "start_index": 0,
                                  "end_index": len(text)}
                    s.add("response.output_text.annotation.added", **refs_ci,
                          annotation_index=len(annotations), annotation=annotation)
                    annotations.append(annotation)
            if cut:
                return head
            s.add("response.output_text.done", **refs_ci, text=text, logprobs=[])
            part = {"type": "output_text", "text": text, "annotations": annotations}
        s.add("response.content_part.done", **refs_ci, part=part)
        parts.append(part)
    done = {**head, "status": "completed", "content": parts}
    s.add("response.output_item.done", output_index=index, item=done)
    return done


@st.composite
def reasoning_item(draw: st.DrawFn, s: Stream, index: int) -> JSON:
    """A reasoning item: summary parts, rarely raw reasoning text, encrypted content."""
    item_id = f"rs_{index}"
    refs: JSON = {"item_id": item_id, "output_index": index}
    s.add("response.output_item.added", output_index=index,
          item={"id": item_id, "type": "reasoning", "summary": []})
    summary: list[JSON] = []
    for si in range(draw(st.integers(0, 3))):
        text = draw(TEXT)
        s.add("response.reasoning_summary_part.added", **refs, summary_index=si,
              part={"type": "summary_text", "text": ""})
        for p in draw(_pieces(text, lossy=True)):
            s.add("response.reasoning_summary_text.delta", **refs, summary_index=si, delta=p)
        s.add("response.reasoning_summary_text.done", **refs, summary_index=si, text=text)
        s.add("response.reasoning_summary_part.done", **refs, summary_index=si,
              part={"type": "summary_text", "text": text})
        summary.append({"type": "summary_text", "text": text})
    done: JSON = {"id": item_id, "type": "reasoning", "summary": summary}
    if draw(st.integers(0, 4)) == 0:  # raw reasoning text (open-weight models)
        text = draw(TEXT)
        refs0 = {**refs, "content_index": 0}
        s.add("response.content_part.added", **refs0, part={"type": "reasoning_text", "text": ""})
        for p in draw(splits(text)):
            s.add("response.reasoning_text.delta", **refs0, delta=p)
        s.add("response.reasoning_text.done", **refs0, text=text)
        s.add("response.content_part.done", **refs0, part={"type": "reasoning_text", "text": text})
        done["content"] = [{"type": "reasoning_text", "text": text}]
    if draw(st.booleans()):
        done["encrypted_content"] = draw(ENCRYPTED)
    s.add("response.output_item.done", output_index=index, item=done)
    return done


@st.composite
def function_calls(draw: st.DrawFn, s: Stream, first: int, n: int) -> list[JSON]:
    """``n`` parallel calls: all added, then their argument fragments interleaved."""
    heads: list[JSON] = []
    frags: list[list[str]] = []
    for j in range(n):
        index = first + j
        raw = json.dumps(draw(INPUTS), ensure_ascii=draw(st.booleans()))
        head = {"id": f"fc_{index}", "type": "function_call", "call_id": f"call_{index}",
                "name": draw(st.sampled_from(["read", "write", "bash", "grep_é"])),
                "arguments": "", "status": "in_progress"}
        s.add("response.output_item.added", output_index=index, item=head)
        heads.append({**head, "arguments": raw, "status": "completed"})
        frags.append(draw(_pieces(raw, lossy=True)))
    slots = [j for j in range(n) for _ in frags[j]]
    order = draw(st.permutations(slots)) if len(slots) < 40 else slots
    queues = [list(f) for f in frags]
    for j in order:  # each call's own fragments stay in order
        s.add("response.function_call_arguments.delta", item_id=heads[j]["id"],
              output_index=first + j, delta=queues[j].pop(0))
    for j, head in enumerate(heads):
        refs = {"item_id": head["id"], "output_index": first + j}
        s.add("response.function_call_arguments.done", **refs, arguments=head["arguments"])
        s.add("response.output_item.done", output_index=first + j, item=head)
    return heads


@st.composite
def cut_call(draw: st.DrawFn, s: Stream, index: int) -> JSON:
    """A function call a token limit cut: its arguments stop short, maybe no done event."""
    raw = json.dumps(draw(INPUTS.filter(bool)), ensure_ascii=draw(st.booleans()))
    cut = raw[: draw(st.integers(1, len(raw) - 1))]
    head = {"id": f"fc_{index}", "type": "function_call", "call_id": f"call_{index}",
            "name": "write", "arguments": "", "status": "in_progress"}
    s.add("response.output_item.added", output_index=index, item=head)
    for piece in draw(splits(cut)):
        s.add("response.function_call_arguments.delta", item_id=head["id"],
              output_index=index, delta=piece)
    done = {**head, "arguments": cut, "status": "incomplete"}
    if draw(st.booleans()):
        s.add("response.output_item.done", output_index=index, item=done)
        return done
    return {**head, "arguments": cut}


# A freeform tool's input: any text (a patch, JavaScript, half a JSON object, blank).
PATCH = ("*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = \"日本\"\n"
         "*** End Patch\n")
FREEFORM = st.one_of(st.just(PATCH), st.just(""), st.just('{"cmd": ['), TEXT,
                     st.text(max_size=40))


@st.composite
def custom_call(draw: st.DrawFn, s: Stream, index: int) -> JSON:
    """A freeform tool call (``custom_tool_call``): its input text streamed as
    ``custom_tool_call_input`` deltas (maybe only a prefix: the done events hold it
    whole), maybe namespaced (Codex's code mode), maybe with its input at the start."""
    text = draw(FREEFORM)
    head: JSON = {"id": f"ctc_{index}", "type": "custom_tool_call",
                  "call_id": f"call_{index}", "status": "in_progress",
                  "name": draw(st.sampled_from(["apply_patch", "exec", "grep_é"])), "input": ""}
    if draw(st.booleans()):
        head["namespace"] = "functions"
    s.add("response.output_item.added", output_index=index, item=head)
    refs = {"item_id": head["id"], "output_index": index}
    for piece in draw(_pieces(text, lossy=True)):
        s.add("response.custom_tool_call_input.delta", **refs, delta=piece)
    if draw(st.booleans()):
        s.add("response.custom_tool_call_input.done", **refs, input=text)
    done = {**head, "input": text, "status": "completed"}
    s.add("response.output_item.done", output_index=index, item=done)
    return done


def empty_message(s: Stream, index: int) -> JSON:
    """A message item that ends without any content part."""
    head = {"id": f"msg_{index}", "type": "message", "role": "assistant",
            "status": "in_progress", "content": []}
    s.add("response.output_item.added", output_index=index, item=head)
    done = {**head, "status": "completed"}
    s.add("response.output_item.done", output_index=index, item=done)
    return done


def web_search_item(s: Stream, index: int, query: str) -> JSON:
    """A server tool item: progress events, then the item with its action and sources."""
    item_id = f"ws_{index}"
    head = {"id": item_id, "type": "web_search_call", "status": "in_progress",
            "action": {"type": "search", "query": query}}
    s.add("response.output_item.added", output_index=index, item=head)
    for phase in ("in_progress", "searching", "completed"):
        s.add(f"response.web_search_call.{phase}", item_id=item_id, output_index=index)
    done = {**head, "status": "completed",
            "action": {"type": "search", "query": query,
                       "sources": [{"type": "url", "url": "https://x.test/"}]}}
    s.add("response.output_item.done", output_index=index, item=done)
    return done


@st.composite
def usage(draw: st.DrawFn) -> JSON:
    cached, written = draw(st.integers(0, 50)), draw(st.integers(0, 50))
    reasoning = draw(st.integers(0, 50))
    inp = cached + written + draw(st.integers(0, 10**6))
    out = reasoning + draw(st.integers(0, 10**5))
    details: JSON = {"cached_tokens": cached}
    if draw(st.booleans()):  # older responses have no cache_write_tokens
        details["cache_write_tokens"] = written
    else:
        inp -= written
    return {"input_tokens": inp, "input_tokens_details": details, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inp + out}


@st.composite
def responses_streams(draw: st.DrawFn, max_items: int = 6) -> list[JSON]:
    """A valid stream: created, items one after another (parallel calls), then the end.

    It ends with ``response.completed`` or ``response.incomplete`` (which may cut
    the last message short); the final response carries its ``output`` or not
    (the SDK then keeps the items it saw done).
    """
    s = Stream()
    start = {**RESPONSE, "id": f"resp_{draw(ENCRYPTED)}", "created_at": draw(
        st.integers(0, 2**31))}
    s.add("response.created", response=start)
    if draw(st.booleans()):
        s.add("response.in_progress", response=start)
    kinds = draw(st.lists(st.sampled_from(["message", "message", "call", "call", "reasoning",
                                           "web_search", "empty", "custom"]),
                          max_size=max_items))
    incomplete = draw(st.booleans())
    cut = incomplete and bool(kinds) and kinds[-1] == "message" and draw(st.booleans())
    if incomplete and not cut and draw(st.booleans()):
        kinds.append("cut_call")
    output: list[JSON] = []
    n = 0
    while n < len(kinds):
        kind = kinds[n]
        if kind == "call":
            group = next((k for k, x in enumerate(kinds[n:]) if x != "call"), len(kinds) - n)
            output += draw(function_calls(s, n, group))
            n += group
            continue
        if kind == "message":
            output.append(draw(message_item(s, n, cut=cut and n == len(kinds) - 1)))
        elif kind == "reasoning":
            output.append(draw(reasoning_item(s, n)))
        elif kind == "empty":
            output.append(empty_message(s, n))
        elif kind == "cut_call":
            output.append(draw(cut_call(s, n)))
        elif kind == "custom":
            output.append(draw(custom_call(s, n)))
        else:
            output.append(web_search_item(s, n, draw(TEXT)))
        n += 1
    final: JSON = {**start, "status": "incomplete" if incomplete else "completed"}
    if incomplete:
        final["incomplete_details"] = {"reason": draw(st.sampled_from(
            ["max_output_tokens", "content_filter"]))}
    if cut or draw(st.booleans()):
        del final["output"]  # the SDK recovers the items from what streamed
    else:
        final["output"] = output
    if draw(st.integers(0, 4)):
        final["usage"] = draw(usage())
    s.add("response.incomplete" if incomplete else "response.completed", response=final)
    return s.events
