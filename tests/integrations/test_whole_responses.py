"""create() without stream=True: the SDK's object passes unchanged and is recorded whole."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from engine.integrations.anthropic import record_anthropic
from engine.integrations.openai import record_openai
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import anthropic as render_anthropic
from projections.render import openai_chat, openai_responses
from projections.withparts import WithPartsProjection
from tests.support.fake_sse import FakeServer, Reply

JSON = dict[str, Any]

MESSAGE: JSON = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "look first", "signature": "sig=="},
        {"type": "text", "text": "Reading the file."},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7}}

COMPLETION: JSON = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Reading the file.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a.py"}'}}]}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}

RESPONSE: JSON = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-x",
    "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Reading the file.", "annotations": []}]},
        {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read",
         "arguments": '{"path": "a.py"}', "status": "completed"}],
    "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19,
              "input_tokens_details": {"cached_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 0}}}


def fresh() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    session.user_message("read a.py")
    return session, view


def answer(view: WithPartsProjection) -> v.WithParts:
    msg = view.messages()[-1]
    assert isinstance(msg.info, v.AssistantInfo)
    return msg


def call_of(msg: v.WithParts) -> tuple[str, str, Any]:
    [tool] = [p for p in msg.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStatePending)  # waits for the agent to run it
    return tool.call_id, tool.tool, tool.state.input


async def awaited(value: Any) -> Any:
    return await value


@pytest.mark.parametrize("is_async", [False, True])
def test_anthropic_messages_create_is_recorded_whole(is_async: bool) -> None:
    server = FakeServer([Reply(body=MESSAGE)])
    session, view = fresh()
    sdk = server.async_anthropic() if is_async else server.anthropic()
    client = record_anthropic(sdk, session)
    made = client.messages.create(model="claude-x", max_tokens=10, messages=[])
    message = asyncio.run(awaited(made)) if is_async else made
    plain = FakeServer([Reply(body=MESSAGE)]).anthropic().messages.create(
        model="claude-x", max_tokens=10, messages=[])
    assert message == plain  # the SDK's object, unchanged

    msg = answer(view)
    assert [p.text for p in msg.parts if isinstance(p, v.ReasoningPart)] == ["look first"]
    assert [p.text for p in msg.parts if isinstance(p, v.TextPart)] == ["Reading the file."]
    assert call_of(msg) == ("toolu_1", "read", {"path": "a.py"})
    assert client.last.result.stop_reason == "tool_use"
    assert client.last.result.tokens.output == 7
    assert render_anthropic.response(msg)["content"] == MESSAGE["content"]  # exact way back
    [call] = client.last.result.tool_calls
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "print('hi')")
    client.last.ingest.complete()
    assert answer(view).info.time.completed is not None


@pytest.mark.parametrize("is_async", [False, True])
def test_openai_chat_completions_create_is_recorded_whole(is_async: bool) -> None:
    server = FakeServer([Reply(body=COMPLETION)])
    session, view = fresh()
    client = record_openai(server.async_openai() if is_async else server.openai(), session)
    made = client.chat.completions.create(model="gpt-x", messages=[])
    completion = asyncio.run(awaited(made)) if is_async else made
    assert completion.choices[0].message.content == "Reading the file."

    msg = answer(view)
    assert [p.text for p in msg.parts if isinstance(p, v.TextPart)] == ["Reading the file."]
    assert call_of(msg) == ("call_1", "read", {"path": "a.py"})
    assert client.last.result.stop_reason == "tool_calls"
    [sent] = [m for m in openai_chat.messages(view.messages()) if m["role"] == "assistant"]
    assert sent["tool_calls"] == COMPLETION["choices"][0]["message"]["tool_calls"]


@pytest.mark.parametrize("is_async", [False, True])
def test_openai_responses_create_is_recorded_whole(is_async: bool) -> None:
    server = FakeServer([Reply(body=RESPONSE)])
    session, view = fresh()
    client = record_openai(server.async_openai() if is_async else server.openai(), session)
    made = client.responses.create(model="gpt-x", input="read a.py")
    response = asyncio.run(awaited(made)) if is_async else made
    assert response.output_text == "Reading the file."

    msg = answer(view)
    assert [p.text for p in msg.parts if isinstance(p, v.TextPart)] == ["Reading the file."]
    assert call_of(msg) == ("call_1", "read", {"path": "a.py"})
    items = openai_responses.input_items(view.messages())
    assert [i["type"] for i in items][:3] == ["message", "message", "function_call"]
    assert items[2]["arguments"] == '{"path": "a.py"}'


def test_a_failed_call_records_nothing_and_raises_the_sdks_error() -> None:
    server = FakeServer([Reply(status=400)])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-x", max_tokens=10, messages=[])
    assert [m.info.role for m in view.messages()] == ["user"]
    assert client.last is None


def test_a_background_response_is_not_recorded_until_it_has_ended() -> None:
    server = FakeServer([Reply(body={**RESPONSE, "status": "queued", "output": []})])
    session, view = fresh()
    client = record_openai(server.openai(), session)
    response = client.responses.create(model="gpt-x", input="later", background=True)
    assert response.status == "queued"
    assert client.last is None
    assert [m.info.role for m in view.messages()] == ["user"]


def test_a_failed_whole_response_is_an_aborted_message_and_the_object_is_returned() -> None:
    failed = {**RESPONSE, "status": "failed", "output": [],
              "error": {"code": "server_error", "message": "the model broke"}}
    server = FakeServer([Reply(body=failed)])
    session, view = fresh()
    client = record_openai(server.openai(), session)
    response = client.responses.create(model="gpt-x", input="go")
    assert response.status == "failed"  # the SDK's object, unchanged
    info = answer(view).info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert "the model broke" in info.error.message
    assert client.last.error is not None
