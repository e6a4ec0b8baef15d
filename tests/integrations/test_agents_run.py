"""Streamed Agents SDK runs recorded as they stream: the real Runner, a fake streaming Model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    Runner,
    function_tool,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.integrations.agents_run import RunRecorder, record_run
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection
from tests.support.agents_fake import StreamingModel, call, text

set_tracing_disabled(True)


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@function_tool(failure_error_function=None)
def explode(path: str) -> str:
    """A tool that raises (its error is not turned into an output)."""
    raise RuntimeError(f"cannot read {path}")


def recorded() -> tuple[Session, WithPartsProjection]:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    return session, view


async def consume(agent: Agent[Any], prompt: str, session: Session) -> list[Any]:
    # run_streamed starts its task at once: it needs the running loop
    return [e async for e in record_run(Runner.run_streamed(agent, prompt), session)]


def settled(session: Session) -> None:
    """No message is left open and no tool unsettled: the session is consistent."""
    life = session.lifecycle
    for mid, msg in life.messages.items():
        assert msg.state != "open", f"message {mid} left open"
        assert list(life.unsettled(mid)) == []


def tools(view: WithPartsProjection) -> list[v.ToolPart]:
    return [p for m in view.messages() for p in m.parts if isinstance(p, v.ToolPart)]


def test_a_streamed_run_is_recorded_as_deltas_and_tool_lifecycles() -> None:
    session, view = recorded()
    model = StreamingModel([[text("Let me look.", "msg_0"), call("read_file", {"path": "a.py"})],
                            [text("It prints hello.", "msg_1")]])
    agent = Agent(name="helper", model=model, tools=[read_file])
    plain = asyncio.run(consume(agent, "What does a.py do?", session))
    assert [type(e).__name__ for e in plain][:2] == ["AgentUpdatedStreamEvent",
                                                     "RawResponsesStreamEvent"]
    log = list(session.store.read(session.id))
    deltas = [e.delta for e in log if isinstance(e, ev.TextDelta)]
    assert "".join(deltas) == "Let me look.It prints hello."
    assert len(deltas) > 2
    lifecycle = [type(e).__name__ for e in log if isinstance(
        e, ev.ToolAdded | ev.ToolInputDelta | ev.ToolInputReady | ev.ToolStarted
        | ev.ToolCompleted)]
    assert lifecycle == ["ToolAdded", "ToolInputDelta", "ToolInputReady", "ToolStarted",
                         "ToolCompleted"]
    messages = view.messages()
    assert [m.info.role for m in messages] == ["user", "assistant", "assistant"]
    assert all(m.info.agent == "helper" for m in messages)
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert (tool.tool, tool.state.input, tool.state.output) == (
        "read_file", {"path": "a.py"}, "contents of a.py")
    assert [p.text for p in messages[2].parts if isinstance(p, v.TextPart)] == [
        "It prints hello."]
    settled(session)


def test_a_handoff_is_an_agent_part_and_the_next_message_is_the_new_agents() -> None:
    session, view = recorded()
    expert = Agent(name="expert", model=StreamingModel([[text("Expert here.", "msg_9")]]))
    model = StreamingModel([[call("transfer_to_expert", {}, "call_h")]])
    agent = Agent(name="helper", model=model, handoffs=[expert])
    asyncio.run(consume(agent, "I need an expert", session))
    _user, handing, answer = view.messages()
    assert handing.info.agent == "helper"
    assert answer.info.agent == "expert"
    [handoff] = [p for p in handing.parts if isinstance(p, v.ToolPart)]
    assert handoff.tool == "transfer_to_expert"
    assert isinstance(handoff.state, v.ToolStateCompleted)
    assert [p.name for p in handing.parts if isinstance(p, v.AgentPart)] == ["expert"]
    assert [p.text for p in answer.parts if isinstance(p, v.TextPart)] == ["Expert here."]
    settled(session)


@input_guardrail
async def no_math(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"reason": "math homework"},
                                   tripwire_triggered="math" in str(given))


@input_guardrail(run_in_parallel=False)
async def no_math_first(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)


@output_guardrail
async def no_secrets(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"found": "secret"},
                                   tripwire_triggered="secret" in str(output))


def test_an_input_guardrail_trip_mid_stream_is_recorded_and_the_session_settles() -> None:
    session, view = recorded()
    model = StreamingModel([[text("Let me look at that math for a long while.", "msg_0"),
                             call("read_file", {"path": "a.py"})]], pause=0.01)
    agent = Agent(name="helper", model=model, tools=[read_file], input_guardrails=[no_math])
    recorder = RunRecorder(session)

    async def run() -> None:
        async for _ in recorder.stream(Runner.run_streamed(agent, "do my math")):
            pass

    with pytest.raises(InputGuardrailTripwireTriggered):  # the SDK's own exception
        asyncio.run(run())
    trip = recorder.tripped
    assert trip is not None
    assert (trip.guardrail, trip.stage, trip.agent, trip.info) == (
        "no_math", "input", "helper", {"reason": "math homework"})
    assert trip in list(session.store.read(session.id))
    settled(session)
    for p in tools(view):  # a call streamed before the trip never ran
        assert isinstance(p.state, v.ToolStateError)
        assert p.state.metadata is not None
        assert p.state.metadata["kind"] == "aborted"


def test_a_blocking_input_guardrail_trips_before_the_model_streams() -> None:
    session, view = recorded()
    model = StreamingModel([[text("never", "msg_0")]])
    agent = Agent(name="helper", model=model, input_guardrails=[no_math_first])
    recorder = RunRecorder(session)

    async def run() -> None:
        async for _ in recorder.stream(Runner.run_streamed(agent, "hello")):
            pass

    with pytest.raises(InputGuardrailTripwireTriggered):
        asyncio.run(run())
    assert recorder.tripped is not None
    assert recorder.tripped.stopped_message == ""
    assert [m.info.role for m in view.messages()] == ["user"]
    settled(session)


def test_an_output_guardrail_trip_is_recorded_after_the_answer() -> None:
    session, view = recorded()
    model = StreamingModel([[text("the secret is 42", "msg_0")]])
    agent = Agent(name="helper", model=model, output_guardrails=[no_secrets])
    recorder = RunRecorder(session)

    async def run() -> None:
        async for _ in recorder.stream(Runner.run_streamed(agent, "tell me")):
            pass

    with pytest.raises(OutputGuardrailTripwireTriggered):
        asyncio.run(run())
    trip = recorder.tripped
    assert trip is not None
    assert (trip.guardrail, trip.stage) == ("no_secrets", "output")
    answer = view.messages()[-1]
    assert trip.stopped_message == answer.info.id  # the message it judged, complete as streamed
    assert [p.text for p in answer.parts if isinstance(p, v.TextPart)] == ["the secret is 42"]
    settled(session)


def test_a_tool_that_raises_fails_with_kind_error_and_the_exception_propagates() -> None:
    session, view = recorded()
    model = StreamingModel([[call("explode", {"path": "a.py"})]])
    agent = Agent(name="helper", model=model, tools=[explode])
    with pytest.raises(Exception, match=r"cannot read a\.py"):
        asyncio.run(consume(agent, "go", session))
    [tool] = tools(view)
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata is not None
    assert tool.state.metadata["kind"] == "error"
    assert "cannot read a.py" in tool.state.error
    aborted = view.messages()[-1].info
    assert isinstance(aborted, v.AssistantInfo)
    assert aborted.error is not None  # the message is aborted
    settled(session)


def test_a_cut_model_stream_settles_the_message_with_what_arrived() -> None:
    session, view = recorded()
    model = StreamingModel([[text("Hello there, friend.", "msg_0")]], cut_after=5, pause=0.01)
    agent = Agent(name="helper", model=model)
    seen: list[str] = []

    async def run() -> None:
        async for e in record_run(Runner.run_streamed(agent, "hi"), session):
            if e.type == "raw_response_event" and e.data.type == "response.output_text.delta":
                seen.append(e.data.delta)

    with pytest.raises(ConnectionError):  # the model's own exception, unchanged
        asyncio.run(run())
    answer = view.messages()[-1]
    assert isinstance(answer.info, v.AssistantInfo)
    assert answer.info.error is not None
    assert answer.info.error.kind == "aborted"
    assert seen
    assert [p.text for p in answer.parts if isinstance(p, v.TextPart)] == [
        "".join(seen)]
    settled(session)


@pytest.mark.parametrize("how", ["cancel", "break", "task"])
def test_a_cancelled_run_leaves_the_session_settled(how: str) -> None:
    session, view = recorded()
    model = StreamingModel([[text("A long answer that streams slowly.", "msg_0"),
                             call("read_file", {"path": "a.py"})]], pause=0.01)
    agent = Agent(name="helper", model=model, tools=[read_file])

    streaming = asyncio.Event()

    async def run() -> None:
        result = Runner.run_streamed(agent, "hi")
        stream = record_run(result, session)
        async for e in stream:
            if e.type == "raw_response_event" and e.data.type == "response.output_text.delta":
                streaming.set()
                if how == "cancel":
                    result.cancel()
                elif how == "break":
                    break
        if how == "break":
            await stream.aclose()  # type: ignore[attr-defined]
            result.cancel()

    async def as_task() -> None:
        task = asyncio.ensure_future(run())
        await streaming.wait()  # the text is streaming: cancel the task now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(as_task() if how == "task" else run())
    answer = view.messages()[-1]
    assert isinstance(answer.info, v.AssistantInfo)
    assert answer.info.error is not None
    assert answer.info.error.kind == "aborted"
    for p in tools(view):
        assert isinstance(p.state, v.ToolStateError)
        assert p.state.metadata is not None
        assert p.state.metadata["kind"] == "aborted"
    settled(session)


WORDS = st.text(alphabet=st.sampled_from(list("ab é日🙂")), min_size=1, max_size=10)


@st.composite
def scripts(draw: st.DrawFn) -> list[list[Any]]:
    """A run's model outputs: turns of text and read_file calls, the last turn text only."""
    turns: list[list[Any]] = []
    n_call = 0
    for t in range(draw(st.integers(0, 2))):
        items: list[Any] = []
        if draw(st.booleans()):
            items.append(text(draw(WORDS), f"msg_{t}"))
        for _ in range(draw(st.integers(1, 2))):
            n_call += 1
            items.append(call("read_file", {"path": draw(WORDS)}, f"call_{n_call}"))
        turns.append(items)
    turns.append([text(draw(WORDS), "msg_last")])
    return turns


@settings(max_examples=25, deadline=None)
@given(scripts(), st.one_of(st.none(), st.integers(0, 40)),
       st.sampled_from(["cut", "cancel", "break"]))
def test_however_a_streamed_run_ends_the_log_holds_what_passed_and_is_settled(
        turns: list[list[Any]], at: int | None, how: str) -> None:
    session, view = recorded()
    cut = at if how == "cut" else None
    model = StreamingModel(turns, cut_after=cut)
    agent = Agent(name="helper", model=model, tools=[read_file])
    seen: list[str] = []

    async def run() -> None:
        result = Runner.run_streamed(agent, "go")
        stream = record_run(result, session)
        n = 0
        async for e in stream:
            n += 1
            if e.type == "raw_response_event" and e.data.type == "response.output_text.delta":
                seen.append(e.data.delta)
            if at is not None and n > at and how != "cut":
                if how == "cancel":
                    result.cancel()
                else:
                    await stream.aclose()  # type: ignore[attr-defined]
                    result.cancel()
                    break

    try:
        asyncio.run(run())
    except ConnectionError:
        assert cut is not None
    log = list(session.store.read(session.id))
    assert "".join(e.delta for e in log if isinstance(e, ev.TextDelta)) == "".join(seen)
    settled(session)
    for tool in tools(view):  # answered, or never run
        state = tool.state
        assert isinstance(state, v.ToolStateCompleted | v.ToolStateError)
        if isinstance(state, v.ToolStateError):
            assert state.metadata is not None
            assert state.metadata["kind"] == "aborted"


def test_a_response_the_ingest_refuses_is_settled_once_and_the_run_goes_on() -> None:
    session, view = recorded()
    model = StreamingModel([[text("fine", "msg_0")]])
    agent = Agent(name="helper", model=model, tools=[read_file])
    recorder = RunRecorder(session)
    original = recorder._raw
    count = 0

    def refuse_one(data: Any) -> None:  # the first response's second event names no item
        nonlocal count
        count += 1
        if count == 2:
            data = {"type": "response.output_text.delta", "output_index": 7, "item_id": "x",
                    "content_index": 0, "delta": "?"}
        original(data)

    recorder._raw = refuse_one  # type: ignore[method-assign]

    async def run() -> str:
        result = Runner.run_streamed(agent, "hi")
        async for _ in recorder.stream(result):
            pass
        return str(result.final_output)

    assert asyncio.run(run()) == "fine"  # the agent saw every event unchanged
    [broken] = [m for m in view.messages() if isinstance(m.info, v.AssistantInfo)]
    assert isinstance(broken.info, v.AssistantInfo)
    assert broken.info.error is not None  # settled once, not one message per later event
    assert len(recorder.recordings) == 1  # the rest of that response passed unrecorded
    assert recorder.recordings[0].error is not None
    settled(session)
