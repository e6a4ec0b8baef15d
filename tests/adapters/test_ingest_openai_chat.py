"""OpenAI Chat Completions ingest: exact against ChatCompletionStreamState, safe when broken."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from engine.adapters.ingest import StreamOrderError, StreamTruncated
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import openai_chat as render
from projections.withparts import WithPartsProjection
from tests.support.anthropic_streams import INPUTS, TEXT, splits
from tests.support.ingest_checks import fresh
from tests.support.render_sessions import sessions

JSON = dict[str, Any]


def chunk(delta: JSON, finish: str | None = None, usage: JSON | None = None,
          choices: bool = True) -> JSON:
    out: JSON = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": "gpt-test",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                 if choices else []}
    if usage is not None:
        out["usage"] = usage
    return out


@st.composite
def chat_streams(draw: st.DrawFn) -> list[JSON]:
    text = draw(TEXT)
    pieces = draw(splits(text))
    calls = draw(st.lists(INPUTS, max_size=5))
    per_call: list[list[JSON]] = []
    for j, args in enumerate(calls):
        raw = json.dumps(args, ensure_ascii=draw(st.booleans()))
        frags = draw(splits(raw))
        first = {"index": j, "id": f"call_{j}", "type": "function",
                 "function": {"name": f"fn{j}", "arguments": frags[0]}}
        per_call.append([first, *({"index": j, "function": {"arguments": f}}
                                  for f in frags[1:])])
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in pieces]
    # Calls start in index order; their later fragments interleave (many parallel calls).
    queue = [c[0] for c in per_call]
    rest = [f for c in per_call for f in c[1:]]
    order = draw(st.permutations(rest)) if len(rest) < 30 else rest
    pending: list[JSON] = []
    started: set[int] = set()
    for f in queue:
        out.append(chunk({"tool_calls": [f]}))
        started.add(f["index"])
    for f in order:
        if draw(st.booleans()) and pending:
            out.append(chunk({"tool_calls": [*pending, f]}))
            pending = []
        else:
            pending.append(f)
    if pending:
        out.append(chunk({"tool_calls": pending}))
    # Arguments of one call must stay in order: re-sort each call's fragments.
    seen: dict[int, list[str]] = {j: [c["function"]["arguments"] for c in per_call[j][1:]]
                                  for j in range(len(calls))}
    for ch in out:
        for tc in ch["choices"][0]["delta"].get("tool_calls", []):
            if "id" not in tc:
                tc["function"]["arguments"] = seen[tc["index"]].pop(0)
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    out.append(chunk({}, finish=finish))
    if draw(st.booleans()):
        cached = draw(st.integers(0, 50))
        reasoning = draw(st.integers(0, 50))
        prompt = cached + draw(st.integers(0, 1000))
        completion = reasoning + draw(st.integers(0, 1000))
        out.append(chunk({}, usage={
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}, choices=False))
    return out


def sdk(chunks: list[JSON]) -> JSON:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in copy.deepcopy(chunks):
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    snap = state.current_completion_snapshot
    choice = snap.choices[0]
    msg = choice.message
    usage: dict[str, int | None] = {  # convlog reads absent usage as 0
        "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cached_tokens": 0,
        "reasoning_tokens": 0}
    if snap.usage is not None:
        u = snap.usage
        usage = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                 "total_tokens": u.total_tokens,
                 "cached_tokens": u.prompt_tokens_details.cached_tokens
                 if u.prompt_tokens_details else 0,
                 "reasoning_tokens": u.completion_tokens_details.reasoning_tokens
                 if u.completion_tokens_details else 0}
    return {"role": "assistant", "content": msg.content or None, "refusal": msg.refusal,
            "tool_calls": [{"id": t.id, "type": "function", "function": {
                "name": t.function.name, "arguments": t.function.arguments}}
                for t in msg.tool_calls] if msg.tool_calls else None,
            "finish_reason": choice.finish_reason, "usage": usage}


def ingest(chunks: list[Any], **options: Any) -> tuple[Session, WithPartsProjection, str]:
    session, proj = fresh()
    result = OpenAIChatIngest(session, **options).ingest(chunks)
    return session, proj, result.message_id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_streams(), st.sampled_from([0, 5]), st.sampled_from([1, 16]))
def test_matches_chat_completion_stream_state(chunks: list[JSON], coalesce: int,
                                              batch: int) -> None:
    _, proj, mid = ingest(chunks, coalesce_chars=coalesce, batch=batch)
    assert render.response(proj.message(mid)) == sdk(chunks)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_streams())
def test_sdk_chunk_objects_are_accepted(chunks: list[JSON]) -> None:
    objects = [ChatCompletionChunk.model_validate(copy.deepcopy(c)) for c in chunks]
    _, proj, mid = ingest(objects)
    assert render.response(proj.message(mid)) == sdk(chunks)


def test_truncated_stream_keeps_text_and_fails_the_call_with_its_raw_json() -> None:
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    ing = OpenAIChatIngest(session)
    for c in [chunk({"content": "Reading é"}), chunk({"tool_calls": [{
            "index": 0, "id": "call_1", "type": "function",
            "function": {"name": "read", "arguments": '{"pa'}}]})]:
        ing.feed(c)
    with pytest.raises(StreamTruncated):
        ing.finish()
    wp = proj.message(ing.message_id)
    assert isinstance(wp.info, v.AssistantInfo)
    assert wp.info.error is not None
    assert wp.info.error.kind == "aborted"
    assert [p.text for p in wp.parts if isinstance(p, v.TextPart)] == ["Reading é"]
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata == {"interrupted": True, "raw": '{"pa',
                                   "stream_error": "truncated", "kind": "aborted"}


def test_content_after_finish_reason_is_refused() -> None:
    session = Session.create(MemoryStore())
    ing = OpenAIChatIngest(session)
    ing.feed(chunk({"content": "a"}, finish="stop"))
    with pytest.raises(StreamOrderError):
        ing.feed(chunk({"content": "b"}))
    assert not dict(session.lifecycle.unsettled(ing.message_id))


def _as_chunks(message: JSON) -> list[JSON]:
    """A rendered assistant message streamed back: its content and each call's arguments
    cut in two, calls in order."""
    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    out += [chunk({"content": piece}) for piece in (text[:3], text[3:]) if piece]
    for j, call in enumerate(message.get("tool_calls") or ()):
        args = call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": j, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": args[:5]}}]}))
        if args[5:]:
            out.append(chunk({"tool_calls": [{"index": j,
                                              "function": {"arguments": args[5:]}}]}))
    out.append(chunk({}, finish="tool_calls" if message.get("tool_calls") else "stop"))
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_round_trip_ingest_of_rendered_assistant_messages(
        built: tuple[Session, list[v.WithParts]]) -> None:
    _, history = built
    for m in render.messages(history):
        if m["role"] != "assistant":
            continue
        _, proj, mid = ingest(_as_chunks(m))
        again = [x for x in render.messages([proj.message(mid)]) if x["role"] == "assistant"]
        assert again == [m]
