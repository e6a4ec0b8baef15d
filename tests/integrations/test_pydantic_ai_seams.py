"""pydantic-ai at the seams: every way of consuming run_stream, deferred tools resumed
across requests and processes, idempotent recording, call ids reused across runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from engine.integrations.pydantic_ai import record_messages
from engine.integrations.pydantic_ai_live import INCOMPLETE, UNFINISHED, LiveRecorder
from engine.session import Session
from engine.store import MemoryStore, SQLiteStore, Store
from projections import views as v
from projections.integrations.pydantic_ai import history, to_model_messages
from projections.withparts import WithPartsProjection

ROOT = Path(__file__).resolve().parents[2]
ANSWER = ["The ", "whole ", "answer, ", "streamed."]


def talker() -> Agent[None, str]:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for piece in ANSWER:
            yield piece

    return Agent(FunctionModel(stream_function=stream))


def messages(store: Store, sid: str) -> list[v.WithParts]:
    return WithPartsProjection(sid).apply_all(store.read(sid)).messages()


def answer_of(session: Session) -> tuple[str, v.MessageError | None]:
    last = messages(session.store, session.id)[-1]
    assert isinstance(last.info, v.AssistantInfo)
    assert last.info.time.completed is not None
    return "".join(p.text for p in last.parts if isinstance(p, v.TextPart)), last.info.error


async def consume(result: Any, how: str) -> str:
    if how == "get_output":
        return str(await result.get_output())
    if how == "stream_text_delta":
        return "".join([t async for t in result.stream_text(delta=True)])
    if how == "stream_text":
        return str([t async for t in result.stream_text()][-1])
    if how == "stream_output":
        return str([t async for t in result.stream_output()][-1])
    raise AssertionError(how)


WAYS = ["get_output", "stream_text_delta", "stream_text", "stream_output"]


@pytest.mark.parametrize("how", WAYS)
def test_run_stream_records_the_whole_answer_however_it_is_consumed(how: str) -> None:
    session = Session.create(MemoryStore())
    live = LiveRecorder(session)

    async def run() -> str:
        async with live.run_stream(talker(), "talk") as result:
            return await consume(result, how)

    assert asyncio.run(run()) == "".join(ANSWER)
    assert answer_of(session) == ("".join(ANSWER), None)


@pytest.mark.parametrize("how", WAYS)
def test_the_documented_handler_records_the_whole_answer_given_the_result(how: str) -> None:
    session = Session.create(MemoryStore())
    live = LiveRecorder(session)

    async def run() -> str:
        async with talker().run_stream(live.prompt("talk"), event_stream_handler=live) as r:
            out = await consume(r, how)
        live.finish(r)
        return out

    assert asyncio.run(run()) == "".join(ANSWER)
    assert answer_of(session) == ("".join(ANSWER), None)


def test_the_handler_alone_never_records_a_short_answer_as_complete() -> None:
    session = Session.create(MemoryStore())
    live = LiveRecorder(session)

    async def run() -> str:
        async with talker().run_stream(live.prompt("talk"), event_stream_handler=live) as r:
            out = await r.get_output()
        live.finish()  # no result: the rest of the answer is unknown
        return out

    assert asyncio.run(run()) == "".join(ANSWER)
    text, error = answer_of(session)
    assert "".join(ANSWER).startswith(text)
    assert error is not None
    assert (error.kind, error.message) == ("aborted", INCOMPLETE)


def test_a_stream_the_caller_leaves_early_is_marked_incomplete() -> None:
    session = Session.create(MemoryStore())
    live = LiveRecorder(session)

    async def run() -> str:
        async with live.run_stream(talker(), "talk") as result:
            async for piece in result.stream_text(delta=True, debounce_by=None):
                return str(piece)
        raise AssertionError("no text")

    assert asyncio.run(run()) == ANSWER[0]
    text, error = answer_of(session)
    assert "".join(ANSWER).startswith(text)
    assert error is not None
    assert (error.kind, error.message) == ("aborted", UNFINISHED)


def test_agent_iter_records_the_whole_answer() -> None:
    session = Session.create(MemoryStore())
    live = LiveRecorder(session)

    async def run() -> str:
        async with talker().iter(live.prompt("talk")) as agent_run:
            async for node in agent_run:
                if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                    async with node.stream(agent_run.ctx) as events:
                        async for _ in live.events(events):
                            pass
        live.finish()
        assert agent_run.result is not None
        return agent_run.result.output

    assert asyncio.run(run()) == "".join(ANSWER)
    assert answer_of(session) == ("".join(ANSWER), None)


# ---------------------------------------------------------------------- deferred tools


def answered(messages: list[ModelMessage]) -> bool:
    return any(getattr(p, "part_kind", "") == "tool-return" for p in messages[-1].parts)


def approver() -> Agent[None, str | DeferredToolRequests]:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if answered(messages):
            yield "Done."
        else:
            yield {0: DeltaToolCall(name="delete_file", json_args='{"path": "a.py"}',
                                    tool_call_id="c1")}

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Done.")] if answered(messages) else [
            ToolCallPart("delete_file", {"path": "a.py"}, "c1")])

    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(whole, stream_function=stream), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (the user approves it first)."""
        return f"deleted {path}"

    return agent


def ask(session: Session) -> None:
    """The first request: the run stops at the approval."""
    result = asyncio.run(LiveRecorder(session).run(approver(), "delete a.py"))
    assert isinstance(result.output, DeferredToolRequests)
    [call] = result.output.approvals
    assert call.tool_call_id == "c1"


def resume(session: Session, approved: bool) -> Any:
    """The next request: a fresh recorder, the history from the log, the decision."""
    sent = history(session)
    last = sent[-1]
    assert isinstance(last, ModelResponse)  # the call goes back unanswered, as pydantic-ai has it
    assert [type(p) for p in last.parts] == [ToolCallPart]
    return asyncio.run(LiveRecorder(session).run(
        approver(), None, message_history=sent,
        deferred_tool_results=DeferredToolResults(approvals={"c1": approved})))


def the_tool(store: Store, sid: str) -> v.ToolPart:
    [tool] = [p for m in messages(store, sid) for p in m.parts if isinstance(p, v.ToolPart)]
    return tool


def test_a_deferred_call_waits_in_the_log_and_resumes_from_a_fresh_recorder() -> None:
    session = Session.create(MemoryStore())
    ask(session)
    waiting = the_tool(session.store, session.id)
    assert isinstance(waiting.state, v.ToolStatePending)
    assert waiting.approval is not None
    assert waiting.approval.state == "requested"
    result = resume(Session.open(session.store, session.id), approved=True)
    assert result.output == "Done."
    tool = the_tool(session.store, session.id)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "deleted a.py"
    assert all(m.info.time.completed is not None for m in messages(session.store, session.id))
    assert [[(type(p).__name__, getattr(p, "content", None)) for p in m.parts]
            for m in history(Session.open(session.store, session.id))] == [
        [(type(p).__name__, getattr(p, "content", None)) for p in m.parts]
        for m in result.all_messages()]


def test_a_denied_call_is_recorded_denied() -> None:
    session = Session.create(MemoryStore())
    ask(session)
    result = resume(Session.open(session.store, session.id), approved=False)
    assert result.output == "Done."
    tool = the_tool(session.store, session.id)
    assert isinstance(tool.state, v.ToolStateError)
    assert tool.state.metadata == {"kind": "denied"}


RESUME = """
import sys
from engine.session import Session
from engine.store import SQLiteStore
from tests.integrations.test_pydantic_ai_seams import resume
print(resume(Session.open(SQLiteStore(sys.argv[1]), sys.argv[2]), approved=True).output)
"""


def test_a_deferred_call_resumes_in_a_new_process(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    session = Session.create(SQLiteStore(path))
    ask(session)
    done = subprocess.run([sys.executable, "-c", RESUME, path, session.id], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Done."
    store = SQLiteStore(path)
    tool = the_tool(store, session.id)
    assert isinstance(tool.state, v.ToolStateCompleted)


def test_record_messages_resumes_deferred_calls_from_a_fresh_writer() -> None:
    session = Session.create(MemoryStore())
    agent = approver()
    first = agent.run_sync("delete a.py")
    record_messages(session, first.all_messages())
    sent = history(session)
    assert sent == first.all_messages()  # the call goes back unanswered
    second = agent.run_sync(message_history=sent, deferred_tool_results=DeferredToolResults(
        approvals={"c1": True}))
    record_messages(session, second.new_messages())  # another request, a fresh writer
    tool = the_tool(session.store, session.id)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert history(session) == second.all_messages()


# ---------------------------------------------------------------------- idempotent, reused ids


def weather_agent() -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if answered(messages):
            return ModelResponse(parts=[TextPart("Sunny.")])
        return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"}, "c1")])

    agent = Agent(FunctionModel(model))  # its calls are c1 in every run, as some models do

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


RECORDINGS: dict[str, Callable[[Any, Any], list[list[ModelMessage]]]] = {
    "all twice": lambda a, b: [a.all_messages(), a.all_messages()],
    "new then all": lambda a, b: [a.new_messages(), a.all_messages()],
    "all of each run": lambda a, b: [a.all_messages(), b.all_messages()],
    "new of each run twice": lambda a, b: [a.new_messages(), a.new_messages(),
                                           b.new_messages(), b.new_messages()],
}


@pytest.mark.parametrize("how", sorted(RECORDINGS))
def test_recording_the_same_messages_again_adds_nothing(how: str) -> None:
    agent = weather_agent()
    first = agent.run_sync("Weather in Paris?")
    second = agent.run_sync("And Rome?", message_history=first.all_messages())
    session = Session.create(MemoryStore())
    for batch in RECORDINGS[how](first, second):
        record_messages(session, batch)
    want = first.all_messages() if how in {"all twice", "new then all"} \
        else second.all_messages()
    view = messages(session.store, session.id)
    assert to_model_messages(view) == want  # once: nothing recorded twice


def test_call_ids_restarting_each_run_are_tools_of_their_own() -> None:
    agent = weather_agent()
    first = agent.run_sync("Weather in Paris?")
    second = agent.run_sync("And Rome?", message_history=first.all_messages())
    ids = [p.tool_call_id for m in second.all_messages() for p in m.parts
           if isinstance(p, ToolCallPart)]
    assert len(ids) == 2
    assert len(set(ids)) == 1
    session = Session.create(MemoryStore())
    record_messages(session, first.new_messages())
    record_messages(session, second.new_messages())
    tools = [p for m in messages(session.store, session.id) for p in m.parts
             if isinstance(p, v.ToolPart)]
    assert [t.state.TAG for t in tools] == ["completed", "completed"]
    assert to_model_messages(messages(session.store, session.id)) == second.all_messages()
