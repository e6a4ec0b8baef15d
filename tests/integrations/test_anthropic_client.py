"""The Anthropic SDK client, recorded: the real SDK parses fake SSE, convlog records it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.adapters.ingest import UnknownBlockIndex
from engine.integrations.anthropic import record_anthropic
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import anthropic as render
from projections.withparts import WithPartsProjection
from tests.support.fake_sse import (
    ConnectionCut,
    FakeServer,
    Reply,
    anthropic_text,
    anthropic_text_and_tool,
)


def fresh() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    return session, view


def assistant(view: WithPartsProjection) -> v.WithParts:
    [msg] = [m for m in view.messages() if isinstance(m.info, v.AssistantInfo)]
    return msg


def texts(msg: v.WithParts) -> list[str]:
    return [p.text for p in msg.parts if isinstance(p, v.TextPart)]


def test_create_stream_passes_every_event_unchanged_and_records_it() -> None:
    server = FakeServer([Reply(anthropic_text_and_tool())])
    unrecorded = FakeServer([Reply(anthropic_text_and_tool())]).anthropic()
    plain = [e.to_dict() for e in unrecorded.messages.create(
        model="claude-x", max_tokens=10, messages=[], stream=True)]
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    session.user_message("read hello.py")
    stream = client.messages.create(model="claude-x", max_tokens=10, stream=True,
                                    messages=render.messages(view.messages()))
    seen = [e.to_dict() for e in stream]
    assert seen == plain == anthropic_text_and_tool()
    assert server.requests[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read hello.py"}]}]

    [call] = client.last.result.tool_calls
    assert (call.name, call.input) == ("read", {"path": "hello.py"})
    msg = assistant(view)
    assert texts(msg) == ["Reading the file"]
    assert render.response(msg)["content"][1]["input"] == {"path": "hello.py"}
    assert msg.info.time.completed is None  # waits for the tool's result
    assert client.last.error is None


def test_agent_loop_render_create_record_sends_the_history_back() -> None:
    server = FakeServer([Reply(anthropic_text_and_tool()), Reply(anthropic_text("Done."))])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    session.user_message("read hello.py")
    for _ in range(2):
        with client.messages.stream(model="claude-x", max_tokens=10,
                                    messages=render.messages(view.messages())) as stream:
            final = stream.get_final_message()  # consumed by the SDK helper itself
        rec = client.last
        for call in rec.result.tool_calls:
            session.start_tool(call.ref)
            session.complete_tool(call.ref, "print('hello')")
        if rec.result.tool_calls:
            rec.ingest.complete()
    assert final.content[0].type == "text"
    assert final.content[0].text == "Done."
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read hello.py"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading the file"},
            {"type": "tool_use", "id": "toolu_1", "name": "read",
             "input": {"path": "hello.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('hello')"}]}]
    last = view.messages()[-1]
    assert texts(last) == ["Done."]
    assert isinstance(last.info, v.AssistantInfo)
    assert last.info.finish == "end_turn"


def test_helper_text_stream_is_recorded() -> None:
    server = FakeServer([Reply(anthropic_text("Hello there"))])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    with client.messages.stream(model="claude-x", max_tokens=10, messages=[]) as stream:
        assert "".join(stream.text_stream) == "Hello there"
    msg = assistant(view)
    assert texts(msg) == ["Hello there"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is None


def test_a_cut_stream_keeps_what_arrived_and_the_sdk_error_propagates() -> None:
    server = FakeServer([Reply(anthropic_text_and_tool(), cut_after=7)])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    seen: list[Any] = []
    stream = client.messages.create(model="claude-x", max_tokens=10, messages=[],
                                    stream=True)
    with pytest.raises(ConnectionCut, match="connection reset"):  # the SDK's error, unchanged
        seen.extend(stream)
    assert len(seen) == 7
    msg = assistant(view)
    assert texts(msg) == ["Reading the file"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert msg.info.error.kind == "aborted"
    [tool] = [p for p in msg.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata is not None
    assert tool.state.metadata["raw"] == '{"path": "he'


def test_an_sdk_retry_records_one_message() -> None:
    server = FakeServer([Reply(status=529), Reply(status=500),
                         Reply(anthropic_text("after retries"))])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    with client.messages.stream(model="claude-x", max_tokens=10, messages=[]) as stream:
        stream.until_done()
    assert len(server.requests) == 3
    assert texts(assistant(view)) == ["after retries"]
    assert len(client.recordings) == 1


def test_the_callers_abort_settles_the_message() -> None:
    server = FakeServer([Reply(anthropic_text_and_tool())])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    with client.messages.stream(model="claude-x", max_tokens=10, messages=[]) as stream:
        for event in stream:
            if event.type == "content_block_stop":
                break  # the user pressed stop after the text
    msg = assistant(view)
    assert texts(msg) == ["Reading the file"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert msg.info.error.kind == "aborted"
    assert "closed by the caller" in msg.info.error.message


def test_the_agents_own_exception_propagates_unchanged() -> None:
    class AgentBug(Exception):
        pass

    server = FakeServer([Reply(anthropic_text_and_tool())])
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    bug = AgentBug("the agent's own bug")

    def agent() -> None:
        with client.messages.create(model="claude-x", max_tokens=10, messages=[],
                                    stream=True) as stream:
            for i, _ in enumerate(stream):
                if i == 3:
                    raise bug

    with pytest.raises(AgentBug) as caught:
        agent()
    assert caught.value is bug
    msg = assistant(view)
    assert texts(msg) == ["Reading the file"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert "AgentBug: the agent's own bug" in msg.info.error.message


def test_a_stream_ending_early_is_recorded_truncated_without_raising() -> None:
    server = FakeServer([Reply(anthropic_text_and_tool()[:5])])  # server closed cleanly
    session, view = fresh()
    client = record_anthropic(server.anthropic(), session)
    events = list(client.messages.create(model="claude-x", max_tokens=10, messages=[],
                                         stream=True))
    assert len(events) == 5  # the agent sees what the SDK gives, no more, no less
    assert client.last.error is not None
    assert client.last.error.kind == "truncated"
    msg = assistant(view)
    assert texts(msg) == ["Reading the file"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None


def test_non_streaming_calls_pass_through() -> None:
    server = FakeServer([])
    client = record_anthropic(server.anthropic(), Session.create(MemoryStore()))
    assert client.api_key == "test"
    assert client.messages.count_tokens is not None
    assert client.recordings == []


def test_async_client_records_and_settles_a_cancel() -> None:
    async def run() -> tuple[list[str], v.WithParts, v.WithParts]:
        server = FakeServer([Reply(anthropic_text("async hello")),
                             Reply(anthropic_text_and_tool())])
        session, view = fresh()
        client = record_anthropic(server.async_anthropic(), session)
        stream = await client.messages.create(model="claude-x", max_tokens=10, messages=[],
                                              stream=True)
        seen = [e.type async for e in stream]
        first = view.messages()[-1]
        async with client.messages.stream(model="claude-x", max_tokens=10,
                                          messages=[]) as helper:
            async for event in helper:
                if event.type == "content_block_stop":
                    break
        return seen, first, view.messages()[-1]

    seen, first, second = asyncio.run(run())
    assert seen[0] == "message_start"
    assert seen[-1] == "message_stop"
    assert texts(first) == ["async hello"]
    assert texts(second) == ["Reading the file"]
    assert isinstance(second.info, v.AssistantInfo)
    assert second.info.error is not None


def bad_stream() -> list[dict[str, Any]]:
    """A delta for a block that never started: the ingest refuses it."""
    events = anthropic_text("fine so far")
    events.insert(3, {"type": "content_block_delta", "index": 7,
                      "delta": {"type": "text_delta", "text": "?"}})
    return events


def test_a_recording_failure_never_changes_what_the_agent_sees() -> None:
    session, view = fresh()
    client = record_anthropic(FakeServer([Reply(bad_stream())]).anthropic(), session)
    seen = [e.to_dict() for e in client.messages.create(model="claude-x", max_tokens=10,
                                                        messages=[], stream=True)]
    assert seen == bad_stream()
    assert isinstance(client.last.error, UnknownBlockIndex)
    msg = assistant(view)
    assert texts(msg) == ["fine so far"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None  # settled by the ingest, not left open


def test_strict_recording_raises_the_typed_error() -> None:
    session, _ = fresh()
    client = record_anthropic(FakeServer([Reply(bad_stream())]).anthropic(), session,
                              strict=True)
    stream = client.messages.create(model="claude-x", max_tokens=10, messages=[], stream=True)
    with pytest.raises(UnknownBlockIndex):
        list(stream)


def test_a_cancelled_task_settles_the_message_and_the_cancel_propagates() -> None:
    async def run() -> tuple[list[str], v.WithParts]:
        server = FakeServer([Reply(anthropic_text_and_tool(), stall_after=4)])
        session, view = fresh()
        client = record_anthropic(server.async_anthropic(), session)
        seen: list[str] = []

        async def agent() -> None:
            stream = await client.messages.create(model="claude-x", max_tokens=10,
                                                  messages=[], stream=True)
            async for event in stream:
                seen.append(event.type)

        task = asyncio.create_task(agent())
        while len(seen) < 4:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen, assistant(view)

    seen, msg = asyncio.run(run())
    assert len(seen) == 4
    assert texts(msg) == ["Reading the file"]
    assert isinstance(msg.info, v.AssistantInfo)
    assert msg.info.error is not None
    assert msg.info.error.kind == "aborted"
    assert "CancelledError" in msg.info.error.message
