"""Every way to a recorded call: the SDK's own types, with_options, with_raw_response
(recorded) and with_streaming_response (refused loudly), on the real SDK clients."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import pytest

from engine.errors import NotRecorded
from engine.integrations.anthropic import record_anthropic
from engine.integrations.openai import record_openai
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection
from tests.support.fake_sse import FakeServer, Reply, anthropic_text, chat_chunks

ASK: dict[str, Any] = {"model": "claude-x", "max_tokens": 10,
                       "messages": [{"role": "user", "content": "hi"}]}
WHOLE = {"id": "msg_3", "type": "message", "role": "assistant", "model": "claude-x",
         "content": [{"type": "text", "text": "Whole."}], "stop_reason": "end_turn",
         "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}


def fresh() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    return session, view


def said(view: WithPartsProjection) -> list[str]:
    return ["".join(p.text for p in m.parts if isinstance(p, v.TextPart))
            for m in view.messages() if isinstance(m.info, v.AssistantInfo)]


def test_create_stream_keeps_the_sdks_stream_types() -> None:
    session, view = fresh()
    client = record_anthropic(FakeServer([Reply(anthropic_text("Hi."))]).anthropic(), session)
    stream = client.messages.create(**ASK, stream=True)
    assert isinstance(stream, anthropic.Stream)
    assert [e.type for e in stream][-1] == "message_stop"
    assert said(view) == ["Hi."]

    chat = record_openai(FakeServer([Reply(chat_chunks("Yo."), named=False,
                                           done_marker=True)]).openai(), session)
    chunks = chat.chat.completions.create(model="gpt-x", messages=[], stream=True)
    assert isinstance(chunks, openai.Stream)
    with chunks:
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Yo."
    assert said(view) == ["Hi.", "Yo."]


def test_async_create_stream_keeps_the_sdks_stream_types() -> None:
    session, view = fresh()
    client = record_anthropic(FakeServer([Reply(anthropic_text("Hi."))]).async_anthropic(),
                              session)

    async def run() -> list[str]:
        stream = await client.messages.create(**ASK, stream=True)
        assert isinstance(stream, anthropic.AsyncStream)
        return [e.type async for e in stream]

    assert asyncio.run(run())[-1] == "message_stop"
    assert said(view) == ["Hi."]


def test_a_client_with_other_options_records_into_the_same_session() -> None:
    session, view = fresh()
    server = FakeServer([Reply(anthropic_text("One.")), Reply(anthropic_text("Two.")),
                         Reply(body=WHOLE)])
    client = record_anthropic(server.anthropic(), session)
    faster = client.with_options(timeout=5.0, max_retries=0)
    list(faster.messages.create(**ASK, stream=True))
    list(client.copy(max_retries=1).messages.create(**ASK, stream=True))
    faster.messages.create(**ASK)
    assert said(view) == ["One.", "Two.", "Whole."]
    assert client.last is faster.last  # one list of recordings


def test_with_raw_response_is_recorded_and_keeps_the_sdks_raw_response() -> None:
    session, view = fresh()
    server = FakeServer([Reply(body=WHOLE), Reply(anthropic_text("Streamed."))])
    client = record_anthropic(server.anthropic(), session)
    raw = client.messages.with_raw_response.create(**ASK)
    assert raw.headers is not None
    assert raw.parse().content[0].text == "Whole."
    raw_stream = client.with_raw_response.messages.create(**ASK, stream=True)
    stream = raw_stream.parse()
    assert isinstance(stream, anthropic.Stream)
    assert [e.type for e in stream][-1] == "message_stop"
    assert said(view) == ["Whole.", "Streamed."]


def test_async_with_raw_response_is_recorded() -> None:
    session, view = fresh()
    client = record_openai(FakeServer([Reply(chat_chunks("Yo."), named=False,
                                             done_marker=True)]).async_openai(), session)

    async def run() -> str:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-x", messages=[], stream=True)
        stream = raw.parse()  # the OpenAI SDK's raw response parses synchronously
        assert isinstance(stream, openai.AsyncStream)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(run()) == "Yo."
    assert said(view) == ["Yo."]


def test_with_streaming_response_is_refused_loudly_before_anything_is_sent() -> None:
    session, view = fresh()
    server = FakeServer([Reply(anthropic_text("never"))])
    client = record_anthropic(server.anthropic(), session)
    with pytest.raises(NotRecorded, match="with_streaming_response"):
        client.messages.with_streaming_response.create(**ASK, stream=True)
    with pytest.raises(NotRecorded, match="with_streaming_response"):
        client.with_streaming_response.messages.create(**ASK)
    oa = record_openai(FakeServer([]).openai(), session)
    with pytest.raises(NotRecorded):
        oa.responses.with_streaming_response.create(model="gpt-x", input="hi")
    assert server.requests == []
    assert view.messages() == []
    assert client.models is client._client.models  # what is not routed is the SDK's own
