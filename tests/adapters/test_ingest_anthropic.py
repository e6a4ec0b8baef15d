"""Anthropic stream ingest: exact against the SDK's own accumulator, and safe when broken."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from anthropic._models import construct_type
from anthropic.lib.streaming._beta_messages import accumulate_event as accumulate_beta
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from anthropic.types.beta import BetaRawMessageStreamEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.ingest import (
    MalformedToolInput,
    ProviderStreamError,
    StreamError,
    StreamOrderError,
    StreamTruncated,
    UnexpectedDelta,
    UnknownBlockIndex,
)
from engine.session import Session
from projections import views as v
from projections.render import anthropic as render
from projections.withparts import WithPartsProjection
from tests.support.anthropic_streams import anthropic_streams
from tests.support.ingest_checks import assert_settled, fresh, run_tools

JSON = dict[str, Any]


def sdk_message(events: list[JSON], *, beta: bool = False) -> JSON:
    """What the anthropic SDK accumulates, whole: the final message's ``to_dict()``.

    Compared strictly with the rendered message: the envelope (id, type, role,
    model, stop reason, stop sequence and details, usage as sent, absent counts
    absent) and every content block as the API sent it (fields the stream set,
    nulls included, no model defaults added), in order.
    """
    snap: Any = None
    bufs: dict[int, bytes] = {}
    for e in copy.deepcopy(events):
        if beta:
            snap = accumulate_beta(event=e, current_snapshot=snap,  # type: ignore[arg-type]
                                   json_bufs=bufs, request_headers=None)  # type: ignore[arg-type]
        else:
            snap = accumulate_event(event=e, current_snapshot=snap,  # type: ignore[arg-type]
                                    json_bufs=bufs)
    whole: JSON = snap.to_dict()
    return whole


def ingest(events: list[Any], **options: Any) -> tuple[Session, WithPartsProjection, str]:
    session, proj = fresh()
    ing = AnthropicIngest(session, **options)
    result = ing.ingest(events)
    run_tools(session, ing)
    return session, proj, result.message_id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_streams(), st.sampled_from([0, 1, 7, 1000]), st.sampled_from([1, 3, 64]))
def test_matches_the_sdk_accumulator(events: list[JSON], coalesce: int, batch: int) -> None:
    _, proj, mid = ingest(events, coalesce_chars=coalesce, batch=batch)
    assert render.response(proj.message(mid)) == sdk_message(events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_streams(beta=True), st.sampled_from([0, 7]))
def test_matches_the_beta_sdk_accumulator_with_mcp_blocks(events: list[JSON],
                                                          coalesce: int) -> None:
    _, proj, mid = ingest(events, coalesce_chars=coalesce)
    assert render.response(proj.message(mid)) == sdk_message(events, beta=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda beta: st.tuples(
    st.just(beta), anthropic_streams(max_blocks=3, beta=beta))))
def test_sdk_event_objects_are_accepted(case: tuple[bool, list[JSON]]) -> None:
    beta, events = case
    kind = BetaRawMessageStreamEvent if beta else RawMessageStreamEvent
    objects = [construct_type(type_=kind, value=copy.deepcopy(e)) for e in events]
    _, proj, mid = ingest(objects)
    assert render.response(proj.message(mid)) == sdk_message(events, beta=beta)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_streams())
def test_coalescing_never_changes_the_result_only_the_event_count(events: list[JSON]) -> None:
    every, p1, m1 = ingest(events)
    merged, p2, m2 = ingest(events, coalesce_chars=10**6)
    assert render.response(p1.message(m1)) == render.response(p2.message(m2))
    assert merged.version <= every.version


def _tool_events(raw_parts: list[str]) -> list[JSON]:
    return [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                               "model": "x", "content": [], "usage": {
                                                   "input_tokens": 3, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Let me look 日本"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}},
        *({"type": "content_block_delta", "index": 1,
           "delta": {"type": "input_json_delta", "partial_json": p}} for p in raw_parts),
    ]


def test_a_finished_stream_with_a_tool_call_leaves_the_message_open_for_its_result() -> None:
    events = [*_tool_events(['{"path": ', '"a.py"}']),
              {"type": "content_block_stop", "index": 1},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 9}},
              {"type": "message_stop"}]
    session, proj = fresh()
    ing = AnthropicIngest(session)
    result = ing.ingest(events)
    assert not result.completed
    [call] = result.tool_calls
    assert (call.name, call.input) == ("read", {"path": "a.py"})
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "print('hi')")
    ing.complete()
    info = proj.message(result.message_id).info
    assert isinstance(info, v.AssistantInfo)
    assert info.finish == "tool_use"
    assert (info.tokens.input, info.tokens.output) == (3, 9)


# --------------------------------------------------------------------------- broken streams


CITATION: JSON = {"type": "web_search_result_location", "cited_text": "Paris is the capital",
                  "url": "https://a.example/paris", "title": "Paris",
                  "encrypted_index": "EpMB"}

BROKEN: list[tuple[str, list[JSON], type[StreamError]]] = [
    ("delta before block start", [
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "text_delta", "text": "x"}}], UnknownBlockIndex),
    ("unknown index at stop", [{"type": "content_block_stop", "index": 7}], UnknownBlockIndex),
    ("malformed tool JSON", [{"type": "content_block_delta", "index": 1, "delta": {
        "type": "input_json_delta", "partial_json": ', "x": }'}},
        {"type": "content_block_stop", "index": 1}], MalformedToolInput),
    ("error event", [{"type": "error", "error": {"type": "overloaded_error",
                                                   "message": "Overloaded"}}],
     ProviderStreamError),
    ("text delta into a tool block", [{"type": "content_block_delta", "index": 1, "delta": {
        "type": "text_delta", "text": "x"}}], UnexpectedDelta),
    ("citations delta into a tool block", [{"type": "content_block_delta", "index": 1,
                                            "delta": {"type": "citations_delta",
                                                      "citation": CITATION}}],
     UnexpectedDelta),
    ("second message_start", [{"type": "message_start", "message": {
        "id": "m2", "model": "x", "usage": {}}}], StreamOrderError),
]


@pytest.mark.parametrize(("name", "tail", "error"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_stream_settles_the_session(name: str, tail: list[JSON],
                                           error: type[StreamError]) -> None:
    session, proj = fresh()
    ing = AnthropicIngest(session)
    events = [*_tool_events(['{"path": "a', '.py"']), *tail]
    for e in events[:-1]:
        ing.feed(e)
    with pytest.raises(error) as info:
        ing.feed(events[-1])
    assert info.value.kind
    wp = assert_settled(session, proj, ing.message_id)
    texts = [p.text for p in wp.parts if isinstance(p, v.TextPart)]
    assert texts == ["Let me look 日本"]
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata is not None
    raw = tool.state.metadata["raw"]
    assert raw.startswith('{"path": "a.py"')
    with pytest.raises(StreamOrderError):  # a failed ingest stays failed
        ing.feed({"type": "ping"})


def test_event_after_message_stop_is_an_error_and_changes_nothing() -> None:
    events = [*_tool_events(['{}']), {"type": "content_block_stop", "index": 1},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 2}}, {"type": "message_stop"}]
    session, _ = fresh()
    ing = AnthropicIngest(session)
    for e in events:
        ing.feed(e)
    before = session.version
    with pytest.raises(StreamOrderError):
        ing.feed({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": "late"}})
    assert session.version == before  # the finished message waits for its tool result


def test_a_stream_that_ends_early_is_truncated_and_settled() -> None:
    session, proj = fresh()
    ing = AnthropicIngest(session, coalesce_chars=1000)
    for e in _tool_events(['{"a": 1']):
        ing.feed(e)
    with pytest.raises(StreamTruncated):
        ing.finish()
    assert_settled(session, proj, ing.message_id)


def test_coalesced_text_is_not_lost_when_the_stream_breaks() -> None:
    session, proj = fresh()
    ing = AnthropicIngest(session, coalesce_chars=1000, batch=1000)
    events = _tool_events([])[:3]
    events.append({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": " more"}})
    for e in events:
        ing.feed(e)
    with pytest.raises(ProviderStreamError):
        ing.feed({"type": "error", "error": {"type": "api_error", "message": "boom"}})
    wp = assert_settled(session, proj, ing.message_id)
    assert [p.text for p in wp.parts if isinstance(p, v.TextPart)] == ["Let me look 日本 more"]


def test_error_before_message_start_is_typed_and_writes_nothing() -> None:
    session, _ = fresh()
    ing = AnthropicIngest(session)
    with pytest.raises(StreamOrderError):
        ing.feed({"type": "content_block_start", "index": 0,
                  "content_block": {"type": "text", "text": ""}})
    assert session.version == 0


# --------------------------------------------------------------------------- server tools


def _start(index: int, block: JSON) -> JSON:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: JSON) -> JSON:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _stop(index: int) -> JSON:
    return {"type": "content_block_stop", "index": index}


def _server_call(index: int, call_id: str, name: str, raw: str) -> list[JSON]:
    return [_start(index, {"type": "server_tool_use", "id": call_id, "name": name,
                           "input": {}}),
            _delta(index, {"type": "input_json_delta", "partial_json": raw}), _stop(index)]


SEARCH_RESULT: JSON = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                       "content": [{"type": "web_search_result", "url": "https://a.example",
                                    "title": "Paris", "encrypted_content": "Eq0K",
                                    "page_age": None}]}
FETCH_ERROR: JSON = {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2",
                     "content": {"type": "web_fetch_tool_result_error",
                                 "error_code": "url_not_accessible"}}
ORPHAN: JSON = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_nope",
                "content": []}


def _server_stream() -> list[JSON]:
    """A search that answers, a fetch that fails, an orphan result, a call left by pause_turn."""
    return [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                               "model": "x", "content": [], "usage": {
                                                   "input_tokens": 3, "output_tokens": 1}}},
        *_server_call(0, "srvtoolu_1", "web_search", '{"query": "capital of France"}'),
        _start(1, SEARCH_RESULT), _stop(1),
        _start(2, {"type": "text", "text": "", "citations": []}),
        _delta(2, {"type": "citations_delta", "citation": CITATION}),
        _delta(2, {"type": "text_delta", "text": "Paris."}), _stop(2),
        *_server_call(3, "srvtoolu_2", "web_fetch", '{"url": "https://a.example"}'),
        _start(4, FETCH_ERROR), _stop(4),
        _start(5, ORPHAN), _stop(5),
        *_server_call(6, "srvtoolu_3", "web_search", '{"query": "more"}'),
        {"type": "message_delta", "delta": {"stop_reason": "pause_turn"},
         "usage": {"output_tokens": 9, "server_tool_use": {"web_search_requests": 2}}},
        {"type": "message_stop"},
    ]


def test_server_tools_settle_from_their_result_blocks() -> None:
    events = _server_stream()
    session, proj = fresh()
    user = session.user_message("What is the capital of France?")
    result = AnthropicIngest(session, parent_id=user).ingest(events)
    assert result.completed  # nothing waits for the client: no tool_result is due
    assert result.tool_calls == ()
    wp = proj.message(result.message_id)
    assert render.response(wp) == sdk_message(events)
    states = {p.call_id: p.state for p in wp.parts if isinstance(p, v.ToolPart)}
    done = states["srvtoolu_1"]
    assert isinstance(done, v.ToolStateCompleted)
    assert done.input == {"query": "capital of France"}
    assert '"Paris"' in done.output
    failed, paused = states["srvtoolu_2"], states["srvtoolu_3"]
    assert isinstance(failed, v.ToolStateError)
    assert failed.error == "web_fetch_tool_result_error: url_not_accessible"
    assert isinstance(paused, v.ToolStateError)
    assert paused.metadata is not None
    assert paused.metadata["kind"] == "cancelled"
    # Sent back: each answered call with its result, the citation; never a tool_result,
    # neither the call left without a result nor the result of no call.
    [_, sent] = render.messages(proj.messages())
    assert sent["content"] == [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "capital of France"}}, SEARCH_RESULT,
        {"type": "text", "text": "Paris.", "citations": [CITATION]},
        {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_fetch",
         "input": {"url": "https://a.example"}}, FETCH_ERROR]


def test_a_citations_delta_for_a_server_result_block_breaks_the_stream() -> None:
    events = _server_stream()[:5]  # the search, then its result block starts
    session, proj = fresh()
    ing = AnthropicIngest(session)
    for e in events:
        ing.feed(e)
    with pytest.raises(UnexpectedDelta, match="citations_delta for a opaque block"):
        ing.feed(_delta(1, {"type": "citations_delta", "citation": CITATION}))
    wp = proj.message(ing.message_id)
    info = wp.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert info.error.kind == "aborted"
    assert not dict(session.lifecycle.unsettled(ing.message_id))
    [search] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(search.state, v.ToolStateCompleted)  # its result had arrived
