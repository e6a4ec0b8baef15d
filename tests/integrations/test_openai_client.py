"""The OpenAI SDK client, recorded: Chat Completions and Responses streams through the real SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from engine.integrations.openai import record_openai
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import openai_chat, openai_responses
from projections.withparts import WithPartsProjection
from tests.support.fake_sse import ConnectionCut, FakeServer, Reply, chat_chunks

JSON = dict[str, Any]


def fresh() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    return session, view


def texts(msg: v.WithParts) -> list[str]:
    return [p.text for p in msg.parts if isinstance(p, v.TextPart)]


def chat(events: list[JSON], **kw: Any) -> Reply:
    return Reply(events, named=False, done_marker=True, **kw)


RESPONSE: JSON = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-x",
                  "output": [], "status": "in_progress", "parallel_tool_calls": True,
                  "tool_choice": "auto", "tools": []}
TEXT_REF: JSON = {"item_id": "msg_1", "output_index": 0, "content_index": 0}


def responses_events(text: str) -> list[JSON]:
    part: JSON = {"type": "output_text", "text": "", "annotations": []}
    item: JSON = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                  "content": [{**part, "text": text}]}
    return [
        {"type": "response.created", "sequence_number": 0, "response": RESPONSE},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "sequence_number": 2, **TEXT_REF,
         "part": part},
        {"type": "response.output_text.delta", "sequence_number": 3, **TEXT_REF,
         "delta": text[:3], "logprobs": []},
        {"type": "response.output_text.delta", "sequence_number": 4, **TEXT_REF,
         "delta": text[3:], "logprobs": []},
        {"type": "response.output_text.done", "sequence_number": 5, **TEXT_REF,
         "text": text, "logprobs": []},
        {"type": "response.content_part.done", "sequence_number": 6, **TEXT_REF,
         "part": {**part, "text": text}},
        {"type": "response.output_item.done", "sequence_number": 7, "output_index": 0,
         "item": item},
        {"type": "response.completed", "sequence_number": 8, "response": {
            **RESPONSE, "status": "completed", "output": [item],
            "usage": {"input_tokens": 9, "output_tokens": 3, "total_tokens": 12,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}},
    ]


def test_chat_create_stream_records_and_sends_the_history_back() -> None:
    server = FakeServer([chat(chat_chunks("Reading it.", call=(
        "call_1", "read", '{"path": "hello.py"}'))), chat(chat_chunks("Done."))])
    session, view = fresh()
    client = record_openai(server.openai(), session)
    session.user_message("read hello.py")
    stream = client.chat.completions.create(model="gpt-x", stream=True,
                                            messages=openai_chat.messages(view.messages()))
    seen = [c.to_dict() for c in stream]
    assert seen == chat_chunks("Reading it.", call=("call_1", "read", '{"path": "hello.py"}'))
    [call] = client.last.result.tool_calls
    assert (call.call_id, call.input) == ("call_1", {"path": "hello.py"})
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "print('hello')")
    client.last.ingest.complete()

    with client.chat.completions.stream(model="gpt-x",
                                        messages=openai_chat.messages(view.messages())) as s:
        final = s.get_final_completion()
    assert final.choices[0].message.content == "Done."
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "read hello.py"},
        {"role": "assistant", "content": "Reading it.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "hello.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hello')"}]
    last = view.messages()[-1]
    assert texts(last) == ["Done."]
    assert isinstance(last.info, v.AssistantInfo)
    assert last.info.error is None
    assert last.info.tokens.output == 4


def test_chat_stream_cut_mid_flight_is_settled() -> None:
    server = FakeServer([chat(chat_chunks("Hello world"), cut_after=2)])
    session, view = fresh()
    client = record_openai(server.openai(), session)
    stream = client.chat.completions.create(model="gpt-x", stream=True, messages=[])
    seen: list[Any] = []
    with pytest.raises(openai.APIConnectionError) as caught:  # the SDK's own error, unchanged
        seen.extend(stream)
    assert isinstance(caught.value.__cause__, ConnectionCut)
    assert len(seen) == 2
    msg = view.messages()[-1]
    assert texts(msg) == ["Hello"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert msg.info.error.kind == "aborted"


def test_responses_stream_helper_and_create_are_recorded() -> None:
    server = FakeServer([Reply(status=500), Reply(responses_events("Hello there")),
                         Reply(responses_events("Second"))])
    session, view = fresh()
    client = record_openai(server.openai(), session)
    session.user_message("hi")
    with client.responses.stream(model="gpt-x",
                                 input=openai_responses.input_items(view.messages())) as s:
        final = s.get_final_response()
    assert final.output_text == "Hello there"
    assert len(server.requests) == 2  # one SDK retry
    assert texts(view.messages()[-1]) == ["Hello there"]

    session.user_message("again")
    events = [e.type for e in client.responses.create(
        model="gpt-x", stream=True, input=openai_responses.input_items(view.messages()))]
    assert events[-1] == "response.completed"
    assert server.requests[2]["input"][1] == {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello there", "annotations": []}]}
    last = view.messages()[-1]
    assert texts(last) == ["Second"]
    assert isinstance(last.info, v.AssistantInfo)
    assert last.info.finish == "completed"


def test_async_responses_abort_by_the_caller() -> None:
    async def run() -> v.WithParts:
        server = FakeServer([Reply(responses_events("Hello there"))])
        session, view = fresh()
        client = record_openai(server.async_openai(), session)
        async with client.responses.stream(model="gpt-x", input="hi") as s:
            async for event in s:
                if event.type == "response.output_text.delta":
                    break
        return view.messages()[-1]

    msg = asyncio.run(run())
    assert texts(msg) == ["Hel"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert "closed by the caller" in msg.info.error.message


def test_async_chat_create_stream() -> None:
    async def run() -> tuple[list[str], v.WithParts]:
        server = FakeServer([chat(chat_chunks("async text"))])
        session, view = fresh()
        client = record_openai(server.async_openai(), session)
        stream = await client.chat.completions.create(model="gpt-x", stream=True, messages=[])
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return pieces, view.messages()[-1]

    pieces, msg = asyncio.run(run())
    assert "".join(pieces) == "async text"
    assert texts(msg) == ["async text"]
