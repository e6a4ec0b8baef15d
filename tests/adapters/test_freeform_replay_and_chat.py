"""A freeform call (Responses ``custom_tool_call``) replayed as the API streams it, and
rendered for Chat Completions as a ``custom`` tool call.

Replay: the item added with an empty input, each recorded fragment a
``response.custom_tool_call_input.delta``, the whole text in
``response.custom_tool_call_input.done``, then the item done; recording the replay
again gives the same events, and the SDK's typed events read it. Chat: the call goes
out as ``{"type": "custom", "custom": {"name", "input"}}`` with the model's text
byte for byte (the SDK's ``ChatCompletionMessageCustomToolCallParam``), never as a
``function`` call whose arguments would be taken for JSON."""

from __future__ import annotations

from typing import Any, cast

import pydantic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam
from openai.types.responses import ResponseStreamEvent

from engine import events as ev
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session
from projections.render import openai_chat
from projections.replay.catalog import Answer
from projections.replay.streams import responses_events
from projections.withparts import WithPartsProjection
from tests.adapters.test_custom_tool_call import ODD, _client, _Server, custom_stream
from tests.support.ingest_checks import fresh
from tests.support.responses_streams import FREEFORM

JSON = dict[str, Any]


def _record(events: list[JSON]) -> tuple[Session, WithPartsProjection, str]:
    session, proj = fresh()
    result = OpenAIResponsesIngest(session).ingest(events)
    return session, proj, result.message_id


def _answer(session: Session, proj: WithPartsProjection, mid: str) -> Answer:
    events = tuple(e for e in session.store.read(session.id)
                   if isinstance(e, ev.MessageEvent) and e.message_id == mid)
    return Answer(events, proj.message(mid))


def _shape(session: Session) -> list[tuple[str, JSON]]:
    """The recorded events without what each recording makes anew (ids, times)."""
    out = []
    for e in session.store.read(session.id):
        fields = {k: getattr(e, k) for k in e.__struct_fields__
                  if k not in ("id", "session_id", "seq", "time", "message_id", "part_id")}
        out.append((type(e).__name__, fields))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FREEFORM, st.integers(1, 9))
def test_a_replayed_freeform_call_streams_its_input_as_recorded(text: str, pieces: int
                                                                ) -> None:
    session, proj, mid = _record(custom_stream(text, pieces=pieces, namespace="functions"))
    replay = list(responses_events(_answer(session, proj, mid)))
    fragments = [e.fragment for e in session.store.read(session.id)
                 if isinstance(e, ev.ToolInputDelta)]
    kinds = [e["type"] for e in replay]
    assert kinds == ["response.created", "response.output_item.added",
                     *["response.custom_tool_call_input.delta"] * len(fragments),
                     "response.custom_tool_call_input.done", "response.output_item.done",
                     "response.completed"]
    assert replay[1]["item"]["input"] == ""
    assert [e["delta"] for e in replay if e["type"].endswith("input.delta")] == fragments
    [done] = [e for e in replay if e["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == text
    assert done["item_id"] == "ctc_1"
    # The SDK's typed events read every one of them (no event falls back to a dict).
    typed: list[Any] = [construct_type(type_=ResponseStreamEvent, value=e) for e in replay]
    assert all(not isinstance(t, dict) and t.type == e["type"]
               for t, e in zip(typed, replay, strict=True))
    # Recording the replay again gives the same events.
    again, _, _ = _record(replay)
    assert _shape(again) == _shape(session)


def _history_with_a_freeform_call() -> list[Any]:
    session, proj, mid = _record(custom_stream(ODD, pieces=5))
    [call] = [p for p in proj.message(mid).parts if p.__class__.__name__ == "ToolPart"]
    ref = (mid, call.id)
    session.start_tool(ref)  # type: ignore[arg-type]
    session.complete_tool(ref, "Done!")  # type: ignore[arg-type]
    return proj.messages()


def test_chat_sends_a_freeform_call_as_a_custom_tool_call_byte_for_byte() -> None:
    history = _history_with_a_freeform_call()
    messages = openai_chat.messages(history)
    assert messages == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_P", "type": "custom",
             "custom": {"name": "apply_patch", "input": ODD}}]},
        {"role": "tool", "tool_call_id": "call_P", "content": "Done!"}]
    pydantic.TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)
    server = _Server([[]])
    client = _client(server)
    user: list[JSON] = [{"role": "user", "content": "patch a.py"}]
    client.chat.completions.create(
        model="gpt-test", messages=cast(list[ChatCompletionMessageParam], user + messages))
    assert server.bodies[0]["messages"][1:] == messages  # through the SDK unchanged


def test_the_chat_response_holds_the_freeform_call_as_the_sdk_types_it() -> None:
    history = _history_with_a_freeform_call()
    body = openai_chat.response(history[-1])
    [call] = body["choices"][0]["message"]["tool_calls"]
    assert call == {"index": 0, "id": "call_P", "type": "custom",
                    "custom": {"name": "apply_patch", "input": ODD}}
    message = ChatCompletionMessage.model_validate(body["choices"][0]["message"])
    [typed] = message.tool_calls or []
    assert typed.type == "custom"
    assert typed.custom.input == ODD
