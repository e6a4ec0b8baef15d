"""pydantic-ai runs recorded as they stream: the real Agent, a streaming FunctionModel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    PartEndEvent,
    PartStartEvent,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from engine import events as ev
from engine.integrations.pydantic_ai_live import NOT_RUN, LiveRecorder
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.integrations.pydantic_ai import history
from projections.withparts import WithPartsProjection

Chunk = str | DeltaToolCalls


class Place(BaseModel):
    city: str


def scripted(*turns: list[Chunk], pause: float = 0.0,
             seen: list[list[ModelMessage]] | None = None) -> FunctionModel:
    """A model streaming each turn's chunks (text pieces or tool call deltas) in order."""
    queue = list(turns)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Chunk]:
        if seen is not None:
            seen.append(list(messages))
        for chunk in queue.pop(0):
            if pause:
                await asyncio.sleep(pause)
            yield chunk

    return FunctionModel(stream_function=stream)


def tool_call(name: str, args: str, call_id: str, *, split: int = 0) -> list[Chunk]:
    """A tool call streamed as its name then its arguments (cut at ``split``, if given)."""
    if not split:
        return [{0: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)}]
    return [{0: DeltaToolCall(name=name, json_args=args[:split], tool_call_id=call_id)},
            {0: DeltaToolCall(json_args=args[split:])}]


def weather_agent(model: FunctionModel, *, retry_first: bool = False) -> Agent[None, str]:
    agent = Agent(model, instructions="Be brief.")
    tries: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        tries.append(city)
        if retry_first and len(tries) == 1:
            raise ModelRetry("say the city in full")
        return f"sunny in {city}"

    return agent


def recorded() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    return session, view


def settled(session: Session) -> None:
    life = session.lifecycle
    for mid, msg in life.messages.items():
        assert msg.state != "open", f"message {mid} left open"
        assert list(life.unsettled(mid)) == []


def tools(view: WithPartsProjection) -> list[v.ToolPart]:
    return [p for m in view.messages() for p in m.parts if isinstance(p, v.ToolPart)]


def test_a_run_is_recorded_as_it_streams_and_the_next_run_is_fed_from_the_session() -> None:
    session, view = recorded()
    seen: list[list[ModelMessage]] = []
    model = scripted(tool_call("weather", '{"city": "Paris"}', "c1", split=5),
                     ["It is ", "sunny ", "in Paris."], ["Rome ", "too."], seen=seen)
    agent = weather_agent(model)
    live = LiveRecorder(session)
    first = asyncio.run(live.run(agent, "Weather in Paris?", message_history=history(session)))
    assert first.output == "It is sunny in Paris."

    log = list(session.store.read(session.id))
    assert [e.delta for e in log if isinstance(e, ev.TextDelta)] == ["sunny ", "in Paris."]
    assert [type(e).__name__ for e in log if isinstance(
        e, ev.ToolAdded | ev.ToolInputDelta | ev.ToolInputReady | ev.ToolStarted
        | ev.ToolCompleted)] == ["ToolAdded", "ToolInputDelta", "ToolInputDelta",
                                 "ToolInputReady", "ToolStarted", "ToolCompleted"]
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert (tool.state.input, tool.state.output) == ({"city": "Paris"}, "sunny in Paris")
    assert [m.info.role for m in view.messages()] == ["user", "assistant", "assistant"]
    settled(session)

    # One line: the next run continues from the log.
    second = asyncio.run(live.run(agent, "And Rome?", message_history=history(session)))
    assert second.output == "Rome too."
    given = seen[-1]
    prompts = [p.content for m in given if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, UserPromptPart)]
    assert prompts == ["Weather in Paris?", "And Rome?"]
    returns = [p.content for m in given if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]
    assert returns == ["sunny in Paris"]
    settled(session)


def test_a_retry_is_a_failed_tool_that_goes_back_as_the_same_retry_prompt() -> None:
    session, view = recorded()
    model = scripted(tool_call("weather", '{"city": "P"}', "c1"),
                     tool_call("weather", '{"city": "Paris"}', "c2"), ["Sunny."])
    agent = weather_agent(model, retry_first=True)
    result = asyncio.run(LiveRecorder(session).run(agent, "Weather?"))
    first, second = tools(view)
    assert isinstance(first.state, v.ToolStateError)
    assert first.state.metadata is not None
    assert first.state.metadata["kind"] == "error"
    assert "say the city in full" in first.state.error
    assert isinstance(second.state, v.ToolStateCompleted)

    def retried(messages: list[ModelMessage]) -> list[ToolReturnPart]:
        return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
                if isinstance(p, ToolReturnPart) and p.outcome == "retried"]

    [theirs] = retried(result.all_messages())
    [ours] = retried(history(session))
    assert ours == theirs  # the retry prompt, exactly as pydantic-ai made it
    settled(session)


def test_run_stream_records_with_the_handler() -> None:
    session, view = recorded()
    model = scripted(tool_call("weather", '{"city": "Oslo"}', "c1"), ["Cold ", "in Oslo."])
    agent = weather_agent(model)
    live = LiveRecorder(session)

    async def run() -> list[str]:
        async with agent.run_stream(live.prompt("Oslo?"), event_stream_handler=live) as r:
            texts = [t async for t in r.stream_text(delta=True)]
        live.finish(r)  # the result: what the caller streamed past the handler
        return texts

    texts = asyncio.run(run())
    assert "".join(texts) == "Cold in Oslo."
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert [m.info.role for m in view.messages()] == ["user", "assistant", "assistant"]
    answer = view.messages()[-1]
    assert [p.text for p in answer.parts if isinstance(p, v.TextPart)] == ["Cold in Oslo."]
    assert isinstance(answer.info, v.AssistantInfo)
    assert answer.info.error is None
    settled(session)


def test_agent_iter_records_each_nodes_stream() -> None:
    session, view = recorded()
    model = scripted(tool_call("weather", '{"city": "Lima"}', "c1"), ["Warm."])
    agent = weather_agent(model)
    live = LiveRecorder(session)

    async def run() -> str:
        async with agent.iter(live.prompt("Lima?")) as agent_run:
            async for node in agent_run:
                if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                    async with node.stream(agent_run.ctx) as events:
                        async for _ in live.events(events):
                            pass
        live.finish()
        assert agent_run.result is not None
        return agent_run.result.output

    assert asyncio.run(run()) == "Warm."
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "sunny in Lima"
    settled(session)


def test_a_tool_that_raises_aborts_the_message_and_the_exception_propagates() -> None:
    session, view = recorded()
    model = scripted(tool_call("boom", "{}", "c1"))
    agent = Agent(model)

    @agent.tool_plain
    def boom() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        asyncio.run(LiveRecorder(session).run(agent, "go"))
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata is not None
    assert tool.state.metadata["kind"] == "aborted"
    info = view.messages()[-1].info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert "disk on fire" in info.error.message
    settled(session)


def test_a_cancelled_run_leaves_the_session_settled() -> None:
    session, view = recorded()
    model = scripted(["A long ", "answer ", "that ", "never ", "ends."], pause=0.02)
    agent = Agent(model)

    async def run() -> None:
        task = asyncio.ensure_future(LiveRecorder(session).run(agent, "talk"))
        while not any(isinstance(p, v.TextPart) for m in view.messages()[1:] for p in m.parts):
            await asyncio.sleep(0.005)  # until the answer is streaming
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    answer = view.messages()[-1]
    assert isinstance(answer.info, v.AssistantInfo)
    assert answer.info.error is not None
    assert answer.info.error.kind == "aborted"
    [text] = [p for p in answer.parts if isinstance(p, v.TextPart)]
    assert text.text
    assert "A long answer that never ends.".startswith(text.text)
    settled(session)


def test_a_call_skipped_after_the_final_result_is_answered_as_pydantic_ai_answers_it() -> None:
    session, view = recorded()
    model = scripted([{0: DeltaToolCall(name="final_result", json_args='{"city": "Rome"}',
                                        tool_call_id="out"),
                       1: DeltaToolCall(name="weather", json_args='{"city": "Rome"}',
                                        tool_call_id="c9")}])
    agent = Agent(model, output_type=Place, end_strategy="early")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    result = asyncio.run(LiveRecorder(session).run(agent, "where?"))
    assert result.output == Place(city="Rome")
    by_name = {t.tool: t for t in tools(view)}
    assert isinstance(by_name["final_result"].state, v.ToolStateCompleted)
    skipped = by_name["weather"].state  # answered as pydantic-ai answers it: not executed
    [theirs] = [p for m in result.all_messages() if isinstance(m, ModelRequest)
                for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_call_id == "c9"]
    assert isinstance(skipped, v.ToolStateCompleted)
    assert skipped.output == theirs.content
    assert "not executed" in skipped.output
    settled(session)


def test_the_same_events_recorded_twice_give_the_same_history() -> None:
    def once() -> list[Any]:
        session, _ = recorded()
        model = scripted(tool_call("weather", '{"city": "Bern"}', "c1"), ["Mild."])
        asyncio.run(LiveRecorder(session).run(weather_agent(model), "Bern?"))
        return [(type(m).__name__, [(type(p).__name__, getattr(p, "content", None))
                                    for p in m.parts]) for m in history(session)]

    assert once() == once() == [
        ("ModelRequest", [("UserPromptPart", "Bern?")]),
        ("ModelResponse", [("ToolCallPart", None)]),
        ("ModelRequest", [("ToolReturnPart", "sunny in Bern")]),
        ("ModelResponse", [("TextPart", "Mild.")])]


def test_a_deferred_call_waits_in_the_log_for_its_approval() -> None:
    session, view = recorded()
    model = scripted(tool_call("delete", '{"path": "a.py"}', "c1"))
    agent = Agent(model, output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file (needs the user's approval)."""
        return f"deleted {path}"

    result = asyncio.run(LiveRecorder(session).run(agent, "delete a.py"))
    assert isinstance(result.output, DeferredToolRequests)
    [tool] = tools(view)  # waits in the log for the next request
    assert isinstance(tool.state, v.ToolStatePending)
    assert tool.approval is not None
    assert tool.approval.state == "requested"
    assert view.messages()[-1].info.time.completed is None


def test_a_call_the_run_never_answers_fails_cancelled_at_its_end() -> None:
    session, view = recorded()
    live = LiveRecorder(session)
    live.record(PartStartEvent(index=0, part=ToolCallPart("lookup", "{}", "c1")))
    live.record(PartEndEvent(index=0, part=ToolCallPart("lookup", "{}", "c1")))
    live.finish()
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateError)
    assert (tool.state.error, tool.state.metadata) == (NOT_RUN, {"kind": "cancelled"})
    settled(session)


def test_a_refused_recording_never_changes_the_run_and_settles_the_message() -> None:
    session, view = recorded()
    model = scripted(["Hello ", "there."])
    agent = Agent(model)
    live = LiveRecorder(session)
    refuse = session.text_delta

    def text_delta(ref: Any, delta: str) -> int:
        if delta == "there.":  # convlog refuses this one (a closed part, a full disk, ...)
            session.end_part(ref)
        return refuse(ref, delta)

    session.text_delta = text_delta  # type: ignore[method-assign]
    result = asyncio.run(live.run(agent, "hi"))
    assert result.output == "Hello there."  # the run saw everything, unchanged
    assert live.error is not None
    info = view.messages()[-1].info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    settled(session)

    strict = LiveRecorder(session, strict=True)
    with pytest.raises(type(live.error)):
        asyncio.run(strict.run(Agent(scripted(["Hello ", "there."])), "again"))
    settled(session)
