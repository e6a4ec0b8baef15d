"""The Agents SDK at the seams: approvals across requests, reused call ids, handled
tool errors and handoffs, in ConvlogSession and record_run alike."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    Runner,
    RunState,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.tool import default_tool_error_function

from engine.integrations.agents_run import record_run
from engine.integrations.openai_agents import SDK_TOOL_ERROR
from engine.session import Session
from engine.store import MemoryStore, SQLiteStore, Store
from projections import views as v
from projections.integrations.openai_agents import ConvlogSession
from projections.render import openai_responses
from projections.withparts import WithPartsProjection
from tests.support.agents_fake import ScriptedModel, StreamingModel, call, text

set_tracing_disabled(True)
ROOT = Path(__file__).resolve().parents[2]


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@function_tool
def explode(path: str) -> str:
    """A tool that raises: the SDK hands the model its failure text instead."""
    raise ValueError(f"cannot read {path}")


def approver(turns: list[list[Any]]) -> Agent[Any]:
    return Agent(name="helper", model=ScriptedModel(turns), tools=[delete_file])


async def ask(session: Any) -> str:
    """The first request: the run stops at the approval; its state goes to the client."""
    result = await Runner.run(approver([[call("delete_file", {"path": "a.py"})]]),
                              "delete a.py", session=session)
    assert [i.tool_name for i in result.interruptions] == ["delete_file"]
    return result.to_state().to_string()


async def resume(session: Any, state_json: str) -> list[Any]:
    """The second request: a new agent and session object, the approval, the rest."""
    agent = approver([[text("Deleted.")]])
    state = await RunState.from_string(agent, state_json)
    state.approve(state.get_interruptions()[0])
    result = await Runner.run(agent, state, session=session)
    assert result.final_output == "Deleted."
    items: list[Any] = await session.get_items()
    return items


def view(store: Store, sid: str) -> list[v.WithParts]:
    return WithPartsProjection(sid).apply_all(store.read(sid)).messages()


def assert_settled_with_the_approved_output(store: Store, sid: str) -> None:
    messages = view(store, sid)
    [tool] = [p for m in messages for p in m.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "deleted a.py"
    assert all(m.info.time.completed is not None for m in messages)
    assert [i["type"] for i in openai_responses.input_items(messages)] == [
        "message", "function_call", "function_call_output", "message"]


def test_an_approved_call_resumes_from_a_fresh_session_object(tmp_path: Path) -> None:
    store = MemoryStore()
    state_json = asyncio.run(ask(ConvlogSession(store, "approvals")))
    ours = asyncio.run(resume(ConvlogSession(store, "approvals"), state_json))

    db = str(tmp_path / "sdk.db")
    theirs_json = asyncio.run(ask(SQLiteSession("approvals", db)))
    assert ours == asyncio.run(resume(SQLiteSession("approvals", db), theirs_json))
    assert_settled_with_the_approved_output(store, ConvlogSession(store, "approvals").session.id)


RESUME = """
import asyncio, sys
from engine.store import SQLiteStore
from projections.integrations.openai_agents import ConvlogSession
from tests.integrations.test_agents_seams import resume
path, state_file = sys.argv[1], sys.argv[2]
items = asyncio.run(resume(ConvlogSession(SQLiteStore(path), "approvals"),
                           open(state_file).read()))
print(len(items))
"""


def test_an_approved_call_resumes_in_a_new_process(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    state_file = tmp_path / "state.json"
    state_file.write_text(asyncio.run(ask(ConvlogSession(SQLiteStore(path), "approvals"))))
    done = subprocess.run([sys.executable, "-c", RESUME, path, str(state_file)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4"
    store = SQLiteStore(path)
    assert_settled_with_the_approved_output(store, ConvlogSession(store, "approvals").session.id)


async def two_runs_restarting_call_ids(session: Any) -> list[Any]:
    for path in ("a.py", "b.py"):  # each run's model numbers its calls from call_1
        agent = Agent(name="helper", tools=[read_file], model=ScriptedModel(
            [[call("read_file", {"path": path})], [text(f"{path} read.")]]))
        await Runner.run(agent, f"Read {path}", session=session)
    await session.clear_session()
    agent = Agent(name="helper", tools=[read_file], model=ScriptedModel(
        [[call("read_file", {"path": "c.py"})], [text("c.py read.")]]))
    await Runner.run(agent, "Read c.py", session=session)
    items: list[Any] = await session.get_items()
    return items


def test_a_reused_call_id_is_a_tool_of_its_own_message(tmp_path: Path) -> None:
    store = MemoryStore()
    memory = ConvlogSession(store, "reused")
    items = asyncio.run(two_runs_restarting_call_ids(memory))
    assert items == asyncio.run(two_runs_restarting_call_ids(
        SQLiteSession("reused", str(tmp_path / "r.db"))))
    messages = view(store, memory.session.id)
    tools = [p for m in messages for p in m.parts if isinstance(p, v.ToolPart)]
    assert [(t.call_id, t.state.TAG) for t in tools] == [("call_1", "completed")] * 3
    assert [t.state.output for t in tools if isinstance(t.state, v.ToolStateCompleted)] == [
        "contents of a.py", "contents of b.py", "contents of c.py"]
    ignored = [p for m in messages for p in m.parts if isinstance(p, v.TextPart) and p.ignored]
    assert ignored == []
    calls = [i for i in openai_responses.input_items(messages) if i["type"] == "function_call"]
    assert len(calls) == 3


def test_the_failure_text_constant_is_the_sdks() -> None:
    assert default_tool_error_function(None, ValueError("x")) == SDK_TOOL_ERROR  # type: ignore[arg-type]


async def handoff_run(memory: ConvlogSession, run: Session) -> None:
    expert = Agent(name="expert", tools=[explode], model=StreamingModel(
        [[call("explode", {"path": "x.py"}, "call_3")], [text("It prints hello.", "msg_9")]]))
    helper = Agent(name="helper", handoffs=[expert], tools=[read_file], model=StreamingModel(
        [[call("read_file", {"path": "hello.py"})], [call("transfer_to_expert", {}, "call_2")]]))
    result = Runner.run_streamed(helper, "What does hello.py do?", session=memory)
    async for _ in record_run(result, run):
        pass


def shape(messages: list[v.WithParts]) -> list[Any]:
    out: list[Any] = []
    for m in messages:
        parts: list[tuple[Any, ...]] = []
        for p in m.parts:
            if isinstance(p, v.AgentPart):
                parts.append(("agent", p.name))
            elif isinstance(p, v.ToolPart):
                state = p.state
                said = state.error if isinstance(state, v.ToolStateError) else getattr(
                    state, "output", None)
                parts.append((p.tool, state.TAG, said))
        out.append((m.info.role, m.info.agent, parts))
    return out


def test_handoffs_and_handled_tool_errors_read_the_same_in_memory_and_recorded_run() -> None:
    store = MemoryStore()
    memory, run = ConvlogSession(store, "handoff", agent="helper"), Session.create(store)
    asyncio.run(handoff_run(memory, run))
    ours = shape(view(store, memory.session.id))
    assert ours == shape(view(store, run.id))
    assert ours == [
        ("user", "helper", []),
        ("assistant", "helper", [("read_file", "completed", "contents of hello.py")]),
        ("assistant", "helper", [("transfer_to_expert", "completed", '{"assistant": "expert"}'),
                                 ("agent", "expert")]),
        ("assistant", "expert", [("explode", "error", SDK_TOOL_ERROR)]),  # what the model saw
        ("assistant", "expert", []),
    ]
    # A fresh object continues as the agent the conversation was handed to.
    fresh = ConvlogSession(store, "handoff", agent="helper")
    asyncio.run(fresh.add_items([{"role": "user", "content": "thanks"}]))
    assert view(store, memory.session.id)[-1].info.agent == "expert"
    # The failed tool still gives the SDK its item back, as it was.
    items: list[Any] = asyncio.run(fresh.get_items())
    assert {"call_id": "call_3", "output": SDK_TOOL_ERROR,
            "type": "function_call_output"} in items
