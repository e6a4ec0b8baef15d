"""OpenAI Chat Completions ingest: exact against ChatCompletionStreamState, safe when broken."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from engine.adapters.ingest import (
    MalformedEvent,
    MalformedToolInput,
    StreamOrderError,
    StreamTruncated,
)
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import openai_chat as render
from projections.withparts import WithPartsProjection
from tests.support.anthropic_streams import INPUTS, TEXT, splits
from tests.support.ingest_checks import assert_settled, fresh, run_tools
from tests.support.render_sessions import sessions

JSON = dict[str, Any]


def chunk(delta: JSON, finish: str | None = None, usage: JSON | None = None,
          choices: bool = True, **envelope: Any) -> JSON:
    out: JSON = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": "gpt-test",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                 if choices else [], **envelope}
    if usage is not None:
        out["usage"] = usage
    return out


FIRST_DELTAS: list[JSON] = [{"role": "assistant", "content": ""},
                            {"role": "assistant", "content": None, "refusal": None},
                            {"role": "assistant"}]


@st.composite
def chat_streams(draw: st.DrawFn) -> list[JSON]:
    """A valid stream with the envelope varying as the API's does: ids, creation times,
    system fingerprints (absent, null, per chunk), usage absent, null per chunk or in a
    last chunk; a first delta of content "" alone; rarely arguments cut by ``length``."""
    text = draw(TEXT)
    pieces = draw(splits(text, allow_empty=False))
    calls = draw(st.lists(INPUTS, max_size=5))
    cut = bool(calls) and draw(st.integers(0, 3)) == 0
    per_call: list[list[JSON]] = []
    for j, args in enumerate(calls):
        raw = json.dumps(args, ensure_ascii=draw(st.booleans()))
        if cut and j == len(calls) - 1 and len(raw) > 2:  # the token limit hits here
            raw = raw[: draw(st.integers(1, len(raw) - 1))]
        frags = draw(splits(raw))
        first = {"index": j, "id": f"call_{j}", "type": "function",
                 "function": {"name": f"fn{j}", "arguments": frags[0]}}
        per_call.append([first, *({"index": j, "function": {"arguments": f}}
                                  for f in frags[1:])])
    envelope: JSON = {"id": f"chatcmpl-{draw(st.text('abcXYZ019', min_size=1, max_size=8))}",
                      "created": draw(st.integers(0, 2**31))}
    if draw(st.booleans()):
        envelope["service_tier"] = draw(st.sampled_from(["default", "flex"]))
    fingerprint = draw(st.sampled_from(["absent", "fixed", "null", "varies"]))
    include_usage = draw(st.booleans())

    def make(delta: JSON, finish: str | None = None) -> JSON:
        extra = dict(envelope)
        if fingerprint == "fixed":
            extra["system_fingerprint"] = "fp_1"
        elif fingerprint == "null":
            extra["system_fingerprint"] = None
        elif fingerprint == "varies":
            extra["system_fingerprint"] = draw(st.sampled_from(["fp_1", "fp_2", None]))
        if include_usage:
            extra["usage"] = None
        return chunk(delta, finish, **extra)

    out = [make(draw(st.sampled_from(FIRST_DELTAS)))]
    out += [make({"content": p}) for p in pieces]
    # Calls start in index order; their later fragments interleave (many parallel calls).
    queue = [c[0] for c in per_call]
    rest = [f for c in per_call for f in c[1:]]
    order = draw(st.permutations(rest)) if len(rest) < 30 else rest
    pending: list[JSON] = []
    for f in queue:
        out.append(make({"tool_calls": [f]}))
    for f in order:
        if draw(st.booleans()) and pending:
            out.append(make({"tool_calls": [*pending, f]}))
            pending = []
        else:
            pending.append(f)
    if pending:
        out.append(make({"tool_calls": pending}))
    # Arguments of one call must stay in order: re-sort each call's fragments.
    seen: dict[int, list[str]] = {j: [c["function"]["arguments"] for c in per_call[j][1:]]
                                  for j in range(len(calls))}
    for ch in out:
        for tc in ch["choices"][0]["delta"].get("tool_calls", []):
            if "id" not in tc:
                tc["function"]["arguments"] = seen[tc["index"]].pop(0)
    finish = ("length" if cut else "tool_calls" if calls
              else draw(st.sampled_from(["stop", "length"])))
    out.append(make({}, finish=finish))
    if include_usage:
        cached = draw(st.integers(0, 50))
        reasoning = draw(st.integers(0, 50))
        prompt = cached + draw(st.integers(0, 1000))
        completion = reasoning + draw(st.integers(0, 1000))
        last = make({})
        last["choices"] = []
        last["usage"] = {
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}
        out.append(last)
    return out


def comparable(value: Any) -> Any:
    """A ChatCompletion dict as compared: null fields dropped, arguments that parse as JSON.

    Why nulls: the SDK re-dumps its message model at every chunk, which adds every
    optional field (refusal, annotations, audio, function_call, tool_calls,
    parsed_arguments) as null whether the stream sent it or not. Why arguments as
    values: once a call has run, WithParts holds its parsed input, no longer the
    raw text (which stays in the log's tool.input_delta events); arguments cut
    short do not parse, and are compared as text.
    """
    if isinstance(value, dict):
        out = {k: comparable(x) for k, x in value.items() if x is not None}
        args = out.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):
                out["arguments"] = json.loads(args)
        return out
    if isinstance(value, list):
        return [comparable(x) for x in value]
    return value


def sdk(chunks: list[JSON]) -> JSON:
    """The final completion of the SDK's stream state, whole (``to_dict()``)."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in copy.deepcopy(chunks):
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    whole: JSON = state.current_completion_snapshot.to_dict()
    return whole


def ingest(chunks: list[Any], **options: Any) -> tuple[Session, WithPartsProjection, str]:
    session, proj = fresh()
    ing = OpenAIChatIngest(session, **options)
    result = ing.ingest(chunks)
    run_tools(session, ing)
    return session, proj, result.message_id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_streams(), st.sampled_from([0, 5]), st.sampled_from([1, 16]))
def test_matches_chat_completion_stream_state(chunks: list[JSON], coalesce: int,
                                              batch: int) -> None:
    _, proj, mid = ingest(chunks, coalesce_chars=coalesce, batch=batch)
    assert comparable(render.response(proj.message(mid))) == comparable(sdk(chunks))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_streams())
def test_sdk_chunk_objects_are_accepted(chunks: list[JSON]) -> None:
    objects = [ChatCompletionChunk.model_validate(copy.deepcopy(c)) for c in chunks]
    _, proj, mid = ingest(objects)
    assert comparable(render.response(proj.message(mid))) == comparable(sdk(chunks))


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


@pytest.mark.parametrize("usage", [10**30, "12", [1], {"prompt_tokens": "3"},
                                   {"prompt_tokens_details": 7},
                                   {"completion_tokens_details": {"reasoning_tokens": 1.5}}])
def test_usage_of_the_wrong_shape_is_a_typed_error_and_settles(usage: Any) -> None:
    """A final chunk whose usage was a number raised a bare AttributeError at the end."""
    session, proj = fresh()
    ing = OpenAIChatIngest(session)
    ing.feed(chunk({"content": "partial"}))
    with pytest.raises(MalformedEvent):
        ing.feed(chunk({}, finish="stop", usage=usage))
    with contextlib.suppress(Exception):
        ing.finish()
    assert_settled(session, proj, ing.message_id)


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


def test_a_lone_empty_content_renders_as_the_sdks_empty_string() -> None:
    chunks = [chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")]
    _, proj, mid = ingest(chunks)
    mine = render.response(proj.message(mid))
    assert mine["choices"][0]["message"]["content"] == ""
    assert sdk(chunks)["choices"][0]["message"]["content"] == ""
    assert "usage" in mine
    assert mine["usage"] is None


def test_arguments_cut_by_length_complete_the_message_and_fail_the_call_truncated() -> None:
    chunks = [chunk({"role": "assistant", "content": None}),
              chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "write", "arguments": '{"pa'}}]}),
              chunk({}, finish="length")]
    session, proj = fresh()
    ing = OpenAIChatIngest(session)
    result = ing.ingest(chunks)
    assert result.completed
    assert result.tool_calls == ()
    wp = proj.message(result.message_id)
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata == {"raw": '{"pa', "kind": "truncated"}
    assert comparable(render.response(wp)) == comparable(sdk(chunks))
    assert isinstance(wp.info, v.AssistantInfo)
    assert (wp.info.finish, wp.info.error) == ("length", None)


def test_arguments_cut_short_under_another_finish_reason_are_malformed() -> None:
    session, proj = fresh()
    ing = OpenAIChatIngest(session)
    with pytest.raises(MalformedToolInput):
        ing.ingest([chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                           "function": {"name": "w", "arguments": '{"a'}}]}),
                    chunk({}, finish="tool_calls")])
    assert_settled(session, proj, ing.message_id)
