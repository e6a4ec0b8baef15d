"""ConvlogSession: the Agents SDK's memory in a convlog log, compared with its SQLiteSession."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session as SessionProtocol
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.session import Session
from engine.store import MemoryStore, Store
from projections import views as v
from projections.integrations.openai_agents import ConvlogSession, ItemsFold
from projections.render import openai_responses
from projections.withparts import WithPartsProjection
from tests.support.agents_fake import ScriptedModel, StreamingModel, call, text

SID = "agent-session-1"
set_tracing_disabled(True)  # no trace export: nothing leaves the machine


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def script() -> list[list[Any]]:
    return [[call("read_file", {"path": "hello.py"})], [text("It prints hello.")],
            [text("You're welcome.", "msg_2")]]


async def two_runs(session: Any) -> tuple[list[str], ScriptedModel]:
    model = ScriptedModel(script())
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[read_file])
    first = await Runner.run(agent, "What does hello.py do?", session=session)
    second = await Runner.run(agent, "Thanks", session=session)
    return [str(first.final_output), str(second.final_output)], model


def test_runner_keeps_its_memory_in_convlog_and_matches_sqlite_session() -> None:
    store = MemoryStore()
    ours = ConvlogSession(store, SID)
    theirs = SQLiteSession(SID)
    assert isinstance(ours, SessionProtocol)

    (out_ours, model_ours) = asyncio.run(two_runs(ours))
    (out_theirs, model_theirs) = asyncio.run(two_runs(theirs))
    assert out_ours == out_theirs == ["It prints hello.", "You're welcome."]
    items = asyncio.run(ours.get_items())
    assert items == asyncio.run(theirs.get_items())
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message", "message", "message"]
    assert model_ours.inputs == model_theirs.inputs  # the model was given the same memory
    assert asyncio.run(ours.get_items(2)) == items[-2:]

    # The log reads as a conversation: the call and its output are one tool part.
    view = WithPartsProjection(ours.session.id)
    for e in store.read(ours.session.id):
        view(e)
    messages = view.messages()
    [tool] = [p for m in messages for p in m.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert (tool.tool, tool.state.output) == ("read_file", "contents of hello.py")
    assert [i["type"] for i in openai_responses.input_items(messages)] == [
        "message", "function_call", "function_call_output", "message", "message", "message"]


def test_a_reopened_session_remembers() -> None:
    store = MemoryStore()
    asyncio.run(two_runs(ConvlogSession(store, SID)))
    before = asyncio.run(ConvlogSession(store, SID).get_items())
    assert len(before) == 6
    reopened = ConvlogSession(store, SID)
    assert asyncio.run(reopened.pop_item()) == before[-1]
    assert asyncio.run(ConvlogSession(store, SID).get_items()) == before[:-1]


def test_pop_and_clear_are_events_nothing_is_deleted() -> None:
    store = MemoryStore()
    ours = ConvlogSession(store, SID)
    asyncio.run(two_runs(ours))
    items = asyncio.run(ours.get_items())
    n_events = sum(1 for _ in store.read(ours.session.id))

    assert asyncio.run(ours.pop_item()) == items[-1]
    assert asyncio.run(ours.get_items()) == items[:-1]
    asyncio.run(ours.clear_session())
    assert asyncio.run(ours.get_items()) == []
    assert asyncio.run(ours.pop_item()) is None

    log = list(store.read(ours.session.id))
    # Appended: the conversation the pop needs, the pop and the clear; nothing else.
    assert [type(e) for e in log[n_events:]] == [
        ev.ConversationCreated, ev.ItemPopped, ev.ItemsCleared]
    popped = log[-2]
    assert isinstance(popped, ev.ItemPopped)
    [holder] = [e for e in log if e.id == popped.event_id]  # the pop names the item's event
    assert getattr(holder, "metadata", {})["openai_agents"] == items[-1]
    metas = [getattr(e, "metadata", None) for e in log]
    recorded = [m["openai_agents"] for m in metas  # every item is still in the log
                if isinstance(m, dict) and "openai_agents" in m]
    assert all(i in recorded for i in items)


ITEMS = st.sampled_from([
    {"role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
     "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
    {"type": "function_call_output", "call_id": "c1", "output": "1"},
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "not json"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
    {"role": "developer", "content": "be brief"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
])
OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(ITEMS, min_size=1, max_size=4)),
    st.tuples(st.just("pop"), st.none()), st.tuples(st.just("clear"), st.none()),
    st.tuples(st.just("get"), st.integers(0, 5))), max_size=14)


async def apply(session: Any, ops: list[tuple[str, Any]]) -> list[Any]:
    seen: list[Any] = []
    for op, arg in ops:
        if op == "add":
            await session.add_items([dict(i) for i in arg])
        elif op == "pop":
            seen.append(await session.pop_item())
        elif op == "clear":
            await session.clear_session()
        else:
            seen.append(await session.get_items(arg or None))
    seen.append(await session.get_items())
    return seen


@settings(max_examples=80, deadline=None)
@given(OPS)
def test_any_sequence_of_operations_matches_sqlite_session(ops: list[tuple[str, Any]]) -> None:
    store: Store = MemoryStore()
    ours = asyncio.run(apply(ConvlogSession(store, SID), ops))
    theirs = asyncio.run(apply(SQLiteSession(SID), ops))
    assert ours == theirs
    # Time travel: a reopened session folds the same memory from the log alone.
    assert asyncio.run(ConvlogSession(store, SID).get_items()) == ours[-1]


async def streamed_run(session: Any) -> list[Any]:
    model = ScriptedModel(script()[:2])
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[read_file])
    result = Runner.run_streamed(agent, "What does hello.py do?", session=session)
    async for _ in result.stream_events():
        pass
    assert result.final_output == "It prints hello."
    items: list[Any] = await session.get_items()
    return items


def test_a_streamed_run_keeps_the_same_memory_as_sqlite_session() -> None:
    ours = asyncio.run(streamed_run(ConvlogSession(MemoryStore(), SID)))
    assert ours == asyncio.run(streamed_run(SQLiteSession(SID)))
    assert [i.get("type", "message") for i in ours] == [
        "message", "function_call", "function_call_output", "message"]


def test_a_log_written_with_batch_checkpoints_still_folds() -> None:
    """Before session.item_popped, a pop restored the batch's checkpoint and wrote the rest."""
    store = MemoryStore()
    session = Session.create(store)
    session.create_conversation()
    first, second = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}

    def user(item: dict[str, Any]) -> None:
        mid = session.start_message("user")
        session.add_text(mid, str(item["content"]), streaming=False,
                         metadata={"openai_agents": item})
        session.complete_message(mid)

    session.create_checkpoint("openai-agents:1", is_turn=False)
    user(first)
    session.create_checkpoint("openai-agents:2", is_turn=False)
    user(second)
    fold = ItemsFold()
    for e in store.read(session.id):
        fold(e)
    assert fold.items == [first, second]
    session.restore_checkpoint("openai-agents:2")
    session.clear_history()
    seen: list[list[Any]] = []
    fold = ItemsFold()
    for e in store.read(session.id):
        fold(e)
        seen.append(list(fold.items))
    assert seen[-2:] == [[first], []]


@function_tool
async def slow_read(path: str) -> str:
    """Read a file slowly."""
    await asyncio.sleep(5)
    return f"contents of {path}"


async def cancelled_run(session: Any) -> list[Any]:
    model = StreamingModel([[call("slow_read", {"path": "a.py"})], [text("never")]])
    agent = Agent(name="helper", model=model, tools=[slow_read])
    result = Runner.run_streamed(agent, "What does a.py do?", session=session)
    async for e in result.stream_events():
        if e.type == "run_item_stream_event" and e.name == "tool_called":
            result.cancel()  # the caller aborts while the tool runs
    items: list[Any] = await session.get_items()
    return items


def test_a_run_cancelled_mid_tool_leaves_the_memory_settled_and_as_sqlite_keeps_it() -> None:
    ours = ConvlogSession(MemoryStore(), SID)
    items = asyncio.run(cancelled_run(ours))
    assert items == asyncio.run(cancelled_run(SQLiteSession(SID)))
    life = ours.session.lifecycle
    assert life.messages  # the input was kept
    for mid, msg in life.messages.items():
        assert msg.state == "completed"
        assert list(life.unsettled(mid)) == []
