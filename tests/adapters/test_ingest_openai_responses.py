"""OpenAI Responses ingest: exact against ResponseStreamState, safe when broken, round trips."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from engine.adapters.ingest import (
    MalformedToolInput,
    ProviderStreamError,
    StreamError,
    StreamOrderError,
    StreamTruncated,
    UnexpectedDelta,
    UnknownBlockIndex,
)
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session
from projections import views as v
from projections.render import openai_responses as render
from projections.withparts import WithPartsProjection
from tests.support.ingest_checks import assert_settled, fresh, run_tools
from tests.support.render_sessions import sessions
from tests.support.responses_streams import RESPONSE, Stream, responses_streams

JSON = dict[str, Any]
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_SDK_ONLY = frozenset({"parsed", "parsed_arguments"})


def comparable(value: Any) -> Any:
    """A Response dict as compared: whole, function call arguments that parse as JSON values.

    Not compared: the ``parsed_arguments: None`` and ``parsed: None`` the SDK's
    ``parse_response`` adds to every function call and output text (its own
    fields, never on the wire). Why arguments as values: once a call has run,
    WithParts holds its parsed input, no longer the raw text (which stays in the
    log's tool.input_delta events); arguments cut short do not parse and are
    compared as text.
    """
    if isinstance(value, dict):
        out = {k: comparable(x) for k, x in value.items()
               if not (k in _SDK_ONLY and x is None)}
        if out.get("type") == "function_call" and isinstance(out.get("arguments"), str):
            with contextlib.suppress(ValueError):
                out["arguments"] = json.loads(out["arguments"] or "{}")
        return out
    if isinstance(value, list):
        return [comparable(x) for x in value]
    return value


def sdk_objects(events: list[JSON]) -> list[Any]:
    return [construct_type(type_=ResponseStreamEvent, value=copy.deepcopy(e)) for e in events]


def sdk_response(events: list[JSON]) -> JSON:
    """The final Response the SDK's stream state hands out for this stream."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final: Any = None
    for e in sdk_objects(events):
        for out in state.handle_event(e):
            if out.type in ("response.completed", "response.incomplete"):
                final = out.response
    assert final is not None
    whole: JSON = comparable(final.to_dict())
    return whole



def ingest(events: list[Any], **options: Any) -> tuple[Session, WithPartsProjection, str]:
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session, **options)
    result = ing.ingest(events)
    run_tools(session, ing)
    return session, proj, result.message_id


def rendered(proj: WithPartsProjection, mid: str) -> JSON:
    whole: JSON = comparable(render.response(proj.message(mid)))
    return whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_streams(), st.sampled_from([0, 1, 7, 1000]), st.sampled_from([1, 3, 64]))
def test_matches_the_sdk_stream_state(events: list[JSON], coalesce: int, batch: int) -> None:
    _, proj, mid = ingest(events, coalesce_chars=coalesce, batch=batch)
    assert rendered(proj, mid) == sdk_response(events)


@FAST
@given(responses_streams(max_items=3))
def test_sdk_event_objects_are_accepted(events: list[JSON]) -> None:
    _, proj, mid = ingest(sdk_objects(events))
    assert rendered(proj, mid) == sdk_response(events)


@FAST
@given(responses_streams())
def test_coalescing_never_changes_the_result_only_the_event_count(events: list[JSON]) -> None:
    every, p1, m1 = ingest(events)
    merged, p2, m2 = ingest(events, coalesce_chars=10**6, batch=50)
    assert render.response(p1.message(m1)) == render.response(p2.message(m2))
    assert merged.version <= every.version


# --------------------------------------------------------------------------- a small stream


def _head() -> Stream:
    """created, a message "Let me look 日本" (its part still open), a call to read."""
    s = Stream()
    s.add("response.created", response=RESPONSE)
    s.add("response.output_item.added", output_index=0, item={
        "id": "msg_0", "type": "message", "role": "assistant", "status": "in_progress",
        "content": []})
    text = {"item_id": "msg_0", "output_index": 0, "content_index": 0}
    s.add("response.content_part.added", **text,
          part={"type": "output_text", "text": "", "annotations": []})
    s.add("response.output_text.delta", **text, delta="Let me look ", logprobs=[])
    s.add("response.output_text.delta", **text, delta="日本", logprobs=[])
    s.add("response.output_item.added", output_index=1, item={
        "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read",
        "arguments": ""})
    return s


def _args(s: Stream, *fragments: str) -> None:
    for f in fragments:
        s.add("response.function_call_arguments.delta", item_id="fc_1", output_index=1,
              delta=f)


def _finish(s: Stream, arguments: str, *, kind: str = "response.completed") -> None:
    s.add("response.output_item.done", output_index=1, item={
        "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read",
        "arguments": arguments, "status": "completed"})
    s.add(kind, response={**RESPONSE, "status": "completed", "usage": {
        "input_tokens": 30, "input_tokens_details": {"cached_tokens": 10},
        "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 39}})


def test_a_stream_with_a_call_leaves_the_message_open_for_its_result() -> None:
    s = _head()
    _args(s, '{"path": ', '"a.py"}')
    _finish(s, '{"path": "a.py"}')
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session)
    result = ing.ingest(s.events)
    assert ing.response_id == "resp_1"
    assert not result.completed
    [call] = result.tool_calls
    assert (call.call_id, call.name, call.input) == ("call_1", "read", {"path": "a.py"})
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "print('hi')")
    ing.complete()
    wp = proj.message(result.message_id)
    info = wp.info
    assert isinstance(info, v.AssistantInfo)
    assert (info.model_id, info.finish) == ("gpt-test", "completed")
    assert (info.tokens.input, info.tokens.cache.read, info.tokens.output,
            info.tokens.reasoning) == (20, 10, 5, 4)
    [text] = [p for p in wp.parts if isinstance(p, v.TextPart)]
    assert text.text == "Let me look 日本"
    assert text.metadata == {"openai": {"item_id": "msg_0"}}


def test_reasoning_renders_back_as_its_reasoning_item() -> None:
    s = Stream()
    s.add("response.created", response=RESPONSE)
    refs = {"item_id": "rs_0", "output_index": 0}
    s.add("response.output_item.added", output_index=0,
          item={"id": "rs_0", "type": "reasoning", "summary": []})
    for i, words in enumerate(["First, look.", "Then, act."]):
        s.add("response.reasoning_summary_part.added", **refs, summary_index=i,
              part={"type": "summary_text", "text": ""})
        s.add("response.reasoning_summary_text.delta", **refs, summary_index=i, delta=words)
        s.add("response.reasoning_summary_part.done", **refs, summary_index=i,
              part={"type": "summary_text", "text": words})
    s.add("response.output_item.done", output_index=0, item={
        "id": "rs_0", "type": "reasoning", "encrypted_content": "gAAA==",
        "summary": [{"type": "summary_text", "text": t} for t in ["First, look.", "Then, act."]]})
    s.add("response.completed", response={**RESPONSE, "status": "completed"})
    _, proj, mid = ingest(s.events)
    wp = proj.message(mid)
    [part] = [p for p in wp.parts if isinstance(p, v.ReasoningPart)]
    assert part.text == "First, look.\n\nThen, act."
    assert part.metadata == {"openai": {"item_id": "rs_0", "encrypted_content": "gAAA==",
                                        "summary": ["First, look.", "Then, act."]}}
    assert render.input_items([wp]) == [{
        "type": "reasoning", "id": "rs_0", "encrypted_content": "gAAA==",
        "summary": [{"type": "summary_text", "text": "First, look."},
                    {"type": "summary_text", "text": "Then, act."}]}]


def test_server_tool_items_are_kept_whole_and_their_progress_ignored() -> None:
    s = Stream()
    s.add("response.created", response=RESPONSE)
    head = {"id": "ws_0", "type": "web_search_call", "status": "in_progress",
            "action": {"type": "search", "query": "convlog"}}
    s.add("response.output_item.added", output_index=0, item=head)
    s.add("response.web_search_call.searching", item_id="ws_0", output_index=0)
    s.add("response.output_item.done", output_index=0, item={**head, "status": "completed"})
    final = {k: x for k, x in RESPONSE.items() if k != "output"}  # the SDK keeps what streamed
    s.add("response.completed", response={**final, "status": "completed"})
    _, proj, mid = ingest(s.events)
    wp = proj.message(mid)
    [part] = [p for p in wp.parts if isinstance(p, v.TextPart)]
    assert (part.ignored, part.synthetic) == (True, True)
    assert render.response(wp)["output"] == [{**head, "status": "completed"}]
    assert render.input_items([wp]) == []  # not re-sent alone, without its reasoning item


def test_done_events_complete_what_the_deltas_missed() -> None:
    """A provider may send only the done events: the item's final text is recorded."""
    s = _head()
    text = {"item_id": "msg_0", "output_index": 0, "content_index": 0}
    s.add("response.output_text.done", **text, text="Let me look 日本 now", logprobs=[])
    _finish(s, '{"path": "a.py"}')  # no argument delta at all
    _, proj, mid = ingest(s.events)
    out = render.response(proj.message(mid))["output"]
    assert out[0]["content"][0]["text"] == "Let me look 日本 now"
    assert json.loads(out[1]["arguments"]) == {"path": "a.py"}


def test_a_final_output_alone_is_enough() -> None:
    item = {"id": "msg_0", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    events = [{"type": "response.created", "response": RESPONSE},
              {"type": "response.completed",
               "response": {**RESPONSE, "status": "completed", "output": [item]}}]
    _, proj, mid = ingest(events)
    assert rendered(proj, mid) == sdk_response(events)
    assert rendered(proj, mid)["output"][0]["content"][0]["text"] == "hi"


def test_unfinished_reasoning_and_refusals_are_kept_where_the_sdk_drops_them() -> None:
    """SDK quirk: ResponseStreamState accumulates only output_text and argument deltas.

    An item cut by ``response.incomplete`` (no done event) reaches the SDK's
    response as it was added: reasoning summaries and refusal text streamed into
    it are lost there. convlog keeps what streamed.
    """
    s = Stream()
    s.add("response.created", response=RESPONSE)
    s.add("response.output_item.added", output_index=0,
          item={"id": "rs_0", "type": "reasoning", "summary": []})
    s.add("response.reasoning_summary_part.added", item_id="rs_0", output_index=0,
          summary_index=0, part={"type": "summary_text", "text": ""})
    s.add("response.reasoning_summary_text.delta", item_id="rs_0", output_index=0,
          summary_index=0, delta="Thinking")
    s.add("response.output_item.added", output_index=1, item={
        "id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress",
        "content": []})
    refs = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    s.add("response.content_part.added", **refs, part={"type": "refusal", "refusal": ""})
    s.add("response.refusal.delta", **refs, delta="I can't")
    final = {k: x for k, x in RESPONSE.items() if k != "output"}
    s.add("response.incomplete", response={**final, "status": "incomplete",
                                           "incomplete_details": {"reason": "max_output_tokens"}})
    sdk = sdk_response(s.events)
    assert sdk["output"][0]["summary"] == []
    assert sdk["output"][1]["content"] == [{"type": "refusal", "refusal": ""}]
    _, proj, mid = ingest(s.events)
    mine = rendered(proj, mid)
    assert mine["output"][0]["summary"] == [{"type": "summary_text", "text": "Thinking"}]
    assert mine["output"][1]["content"] == [{"type": "refusal", "refusal": "I can't"}]
    assert (mine["status"], mine["incomplete_details"]) == (
        "incomplete", {"reason": "max_output_tokens"})
    info = proj.message(mid).info
    assert isinstance(info, v.AssistantInfo)
    assert info.finish == "max_output_tokens"


# --------------------------------------------------------------------------- broken streams


def _ev(kind: str, **fields: Any) -> JSON:
    return {"type": kind, "sequence_number": 99, **fields}


BROKEN: list[tuple[str, list[JSON], type[StreamError]]] = [
    ("delta before its item", [_ev("response.output_text.delta", item_id="msg_5",
                                   output_index=5, content_index=0, delta="x")],
     UnknownBlockIndex),
    ("delta before its part", [_ev("response.output_text.delta", item_id="msg_0",
                                   output_index=0, content_index=1, delta="x")],
     UnknownBlockIndex),
    ("unknown output_index at done", [_ev("response.function_call_arguments.done",
                                          item_id="fc_7", output_index=7, arguments="{}")],
     UnknownBlockIndex),
    ("summary before its part", [_ev("response.output_item.added", output_index=2, item={
        "id": "rs_2", "type": "reasoning", "summary": []}),
        _ev("response.reasoning_summary_text.delta", item_id="rs_2", output_index=2,
            summary_index=0, delta="x")], UnknownBlockIndex),
    ("malformed arguments", [
        _ev("response.function_call_arguments.delta", item_id="fc_1", output_index=1,
            delta=', "x": }'),
        _ev("response.output_item.done", output_index=1, item={
            "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read",
            "arguments": '{"path": "a.py", "x": }'})], MalformedToolInput),
    ("arguments that contradict the deltas", [_ev(
        "response.function_call_arguments.done", item_id="fc_1", output_index=1,
        arguments='{"path": "b.py"}')], UnexpectedDelta),
    ("response.failed", [_ev("response.failed", response={
        **RESPONSE, "status": "failed",
        "error": {"code": "server_error", "message": "The server had an error"}})],
     ProviderStreamError),
    ("error event", [_ev("error", code="rate_limit_exceeded", message="Slow down",
                         param=None)], ProviderStreamError),
    ("text delta into a function call", [_ev("response.output_text.delta", item_id="fc_1",
                                             output_index=1, content_index=0, delta="x")],
     UnexpectedDelta),
    ("refusal delta into an output_text part", [_ev(
        "response.refusal.delta", item_id="msg_0", output_index=0, content_index=0,
        delta="x")], UnexpectedDelta),
    ("unknown event on a message", [_ev("response.output_text.shout", item_id="msg_0",
                                        output_index=0)], UnexpectedDelta),
    ("content of an earlier item after a later one", [_ev(
        "response.content_part.added", item_id="msg_0", output_index=0, content_index=1,
        part={"type": "output_text", "text": "", "annotations": []})], StreamOrderError),
    ("item added out of order", [_ev("response.output_item.added", output_index=0, item={
        "id": "msg_9", "type": "message", "role": "assistant", "content": []})],
     StreamOrderError),
    ("second response.created", [_ev("response.created", response=RESPONSE)],
     StreamOrderError),
    ("unknown event type", [_ev("ping")], StreamOrderError),
]


@pytest.mark.parametrize(("name", "tail", "error"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_stream_settles_the_session(name: str, tail: list[JSON],
                                           error: type[StreamError]) -> None:
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session)
    s = _head()
    _args(s, '{"path": "a', '.py"')
    events = [*s.events, *tail]
    for e in events[:-1]:
        ing.feed(e)
    with pytest.raises(error) as info:
        ing.feed(events[-1])
    assert info.value.kind
    wp = assert_settled(session, proj, ing.message_id)
    assert [p.text for p in wp.parts if isinstance(p, v.TextPart)] == ["Let me look 日本"]
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata is not None
    assert tool.state.metadata["raw"].startswith('{"path": "a.py"')
    with pytest.raises(StreamOrderError):  # a failed ingest stays failed
        ing.feed(_ev("response.in_progress", response=RESPONSE))


def test_provider_errors_keep_their_code() -> None:
    session, _ = fresh()
    ing = OpenAIResponsesIngest(session)
    ing.feed(_ev("response.created", response=RESPONSE))
    with pytest.raises(ProviderStreamError) as info:
        ing.feed(_ev("response.failed", response={
            **RESPONSE, "status": "failed",
            "error": {"code": "server_error", "message": "The server had an error"}}))
    assert (info.value.error_type, str(info.value)) == ("server_error",
                                                        "The server had an error")
    for event, code in [(_ev("error", code=None, message="Slow down", param=None), ""),
                        (_ev("error", code="rate_limit_exceeded", message="Slow down"),
                         "rate_limit_exceeded")]:
        with pytest.raises(ProviderStreamError) as info:
            OpenAIResponsesIngest(session).feed(event)
        assert (info.value.error_type, str(info.value)) == (code, "Slow down")


def test_event_after_response_completed_is_an_error_and_changes_nothing() -> None:
    s = _head()
    _args(s, "{}")
    _finish(s, "{}")
    session, _ = fresh()
    ing = OpenAIResponsesIngest(session)
    for e in s.events:
        ing.feed(e)
    before = session.version
    with pytest.raises(StreamOrderError):
        ing.feed(_ev("response.output_text.delta", item_id="msg_0", output_index=0,
                     content_index=0, delta="late"))
    assert session.version == before  # the finished message waits for its tool result


def test_a_stream_that_ends_early_is_truncated_and_settled() -> None:
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session, coalesce_chars=1000)
    s = _head()
    _args(s, '{"a": 1')
    for e in s.events:
        ing.feed(e)
    with pytest.raises(StreamTruncated):
        ing.finish()
    wp = assert_settled(session, proj, ing.message_id)
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata == {"interrupted": True, "raw": '{"a": 1',
                                   "stream_error": "truncated", "kind": "aborted"}


def test_coalesced_text_is_not_lost_when_the_stream_breaks() -> None:
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session, coalesce_chars=1000, batch=1000)
    for e in _head().events[:5]:
        ing.feed(e)
    with pytest.raises(ProviderStreamError):
        ing.feed(_ev("error", code="server_error", message="boom"))
    wp = assert_settled(session, proj, ing.message_id)
    assert [p.text for p in wp.parts if isinstance(p, v.TextPart)] == ["Let me look 日本"]


def test_events_before_response_created_are_typed_and_write_nothing() -> None:
    session, _ = fresh()
    ing = OpenAIResponsesIngest(session)
    with pytest.raises(StreamOrderError):
        ing.feed(_ev("response.output_item.added", output_index=0, item={
            "id": "msg_0", "type": "message", "role": "assistant", "content": []}))
    assert session.version == 0
    with pytest.raises(ProviderStreamError):
        OpenAIResponsesIngest(session).feed(_ev("error", code="x", message="no"))
    assert session.version == 0


# --------------------------------------------------------------------------- round trips


def as_stream(items: list[JSON]) -> list[JSON]:
    """A Responses stream that outputs these (rendered) assistant input items."""
    s = Stream()
    s.add("response.created", response=RESPONSE)
    for n, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            head = {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": []}
            if "phase" in item:
                head["phase"] = item["phase"]
            s.add("response.output_item.added", output_index=n, item=head)
            for ci, part in enumerate(item["content"]):
                refs = {"item_id": head["id"], "output_index": n, "content_index": ci}
                field = "refusal" if part["type"] == "refusal" else "text"
                s.add("response.content_part.added", **refs, part={**part, field: ""})
                kind_delta = ("response.refusal.delta" if field == "refusal"
                              else "response.output_text.delta")
                s.add(kind_delta, **refs, delta=part[field])
                s.add("response.content_part.done", **refs, part=part)
            s.add("response.output_item.done", output_index=n,
                  item={**head, "content": item["content"]})
        elif kind == "function_call":
            head = {"id": f"fc_{n}", **item, "arguments": ""}
            s.add("response.output_item.added", output_index=n, item=head)
            s.add("response.function_call_arguments.delta", item_id=head["id"],
                  output_index=n, delta=item["arguments"])
            s.add("response.output_item.done", output_index=n,
                  item={**head, "arguments": item["arguments"]})
        else:  # reasoning: as it was, summaries streamed
            s.add("response.output_item.added", output_index=n,
                  item={"id": item["id"], "type": "reasoning", "summary": []})
            for si, summary in enumerate(item["summary"]):
                refs = {"item_id": item["id"], "output_index": n, "summary_index": si}
                s.add("response.reasoning_summary_part.added", **refs,
                      part={"type": "summary_text", "text": ""})
                s.add("response.reasoning_summary_text.delta", **refs, delta=summary["text"])
            s.add("response.output_item.done", output_index=n, item=item)
    s.add("response.completed", response={**RESPONSE, "status": "completed"})
    return s.events


def assistant_runs(items: list[JSON]) -> list[list[JSON]]:
    """The rendered assistant turns: runs of assistant messages, calls and reasoning."""
    runs: list[list[JSON]] = [[]]
    for item in items:
        if item["type"] in ("function_call", "reasoning") or item.get("role") == "assistant":
            runs[-1].append(item)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def round_trip(run: list[JSON]) -> list[JSON]:
    _, proj, mid = ingest(as_stream(run))
    return [i for i in render.input_items([proj.message(mid)])
            if i["type"] != "function_call_output"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_round_trip_ingest_of_rendered_assistant_turns(
        built: tuple[Session, list[v.WithParts]]) -> None:
    _, history = built
    for run in assistant_runs(render.input_items(history)):
        assert round_trip(run) == run


@FAST
@given(responses_streams())
def test_round_trip_of_ingested_streams(events: list[JSON]) -> None:
    """Reasoning items, refusals and phases survive: stream -> input items -> stream."""
    _, proj, mid = ingest(events)
    items = render.input_items([proj.message(mid)])
    for run in assistant_runs(items):
        assert round_trip(run) == run


def test_a_message_item_without_content_stays_in_output() -> None:
    s = Stream()
    s.add("response.created", response=RESPONSE)
    head = {"id": "msg_0", "type": "message", "role": "assistant", "status": "in_progress",
            "content": []}
    s.add("response.output_item.added", output_index=0, item=head)
    s.add("response.output_item.done", output_index=0, item={**head, "status": "completed"})
    final = {k: x for k, x in RESPONSE.items() if k != "output"}  # the SDK keeps what streamed
    s.add("response.completed", response={**final, "status": "completed"})
    _, proj, mid = ingest(s.events)
    mine = rendered(proj, mid)
    assert mine == sdk_response(s.events)
    assert mine["output"] == [{**head, "status": "completed"}]


def test_a_call_cut_by_response_incomplete_fails_truncated_keeping_its_text() -> None:
    s = _head()
    _args(s, '{"path": "a')
    final = {k: x for k, x in RESPONSE.items() if k != "output"}
    s.add("response.incomplete", response={
        **final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}})
    session, proj = fresh()
    result = OpenAIResponsesIngest(session).ingest(s.events)
    assert result.completed
    assert result.tool_calls == ()
    wp = proj.message(result.message_id)
    [tool] = [p for p in wp.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata == {"raw": '{"path": "a', "kind": "truncated"}
    assert rendered(proj, result.message_id) == sdk_response(s.events)
