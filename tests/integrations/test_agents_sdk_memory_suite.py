"""The Agents SDK's own session checks (its ``tests/memory``), adapted to ConvlogSession.

Each scenario runs with the SDK's ``SQLiteSession`` and with ``ConvlogSession``,
through each Runner entry point (``run``, ``run_sync``, ``run_streamed``); the
model must be given the same input and the session must hold the same items,
and the SDK's own expectations of each scenario are checked on convlog's side.
Checks that reach into SQLite itself (its tables, connections, file locks,
corrupt rows, rollback of a failed SQL statement) have no convlog counterpart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import SessionSettings

from engine.store import MemoryStore, SQLiteStore
from projections.integrations.openai_agents import ConvlogSession
from tests.support.agents_fake import ScriptedModel, text

set_tracing_disabled(True)
RUNNERS = ["run", "run_sync", "run_streamed"]
Scenario = Callable[[Callable[[str], Any], str], Coroutine[Any, Any, Any]]


def sync_run(agent: Agent[Any], given: Any, kwargs: dict[str, Any]) -> Any:
    loop = asyncio.new_event_loop()  # run_sync wants a thread with a loop of its own
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, given, **kwargs)
    finally:
        loop.close()


async def run_with(how: str, agent: Agent[Any], given: Any, **kwargs: Any) -> Any:
    if how == "run":
        return await Runner.run(agent, given, **kwargs)
    if how == "run_sync":
        return await asyncio.to_thread(sync_run, agent, given, kwargs)
    result = Runner.run_streamed(agent, given, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def both(tmp_path: Path, scenario: Scenario, how: str) -> Any:
    """The scenario with SQLiteSession and with ConvlogSession: the same outcome."""
    db = str(tmp_path / "sdk.db")
    store = SQLiteStore(str(tmp_path / "convlog.db"))
    theirs: Any = asyncio.run(scenario(lambda sid: SQLiteSession(sid, db), how))
    ours: Any = asyncio.run(scenario(lambda sid: ConvlogSession(store, sid), how))
    assert ours == theirs
    return ours


def replying(*replies: str) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel([[text(r)] for r in replies])
    return Agent(name="test", model=model), model


@pytest.mark.parametrize("how", RUNNERS)
def test_a_second_turn_is_given_the_first(tmp_path: Path, how: str) -> None:
    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        session = make("memory")
        agent, model = replying("San Francisco", "California")
        first = await run_with(how, agent, "Where is the Golden Gate Bridge?", session=session)
        second = await run_with(how, agent, "Which state?", session=session)
        return first.final_output, second.final_output, model.inputs[-1]

    first, second, last_input = both(tmp_path, scenario, how)
    assert (first, second) == ("San Francisco", "California")
    assert [i.get("content") for i in last_input][::2] == [
        "Where is the Golden Gate Bridge?", "Which state?"]


@pytest.mark.parametrize("how", RUNNERS)
def test_sessions_keep_separate_histories(tmp_path: Path, how: str) -> None:
    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        agent, model = replying("cats", "dogs", "you said cats")
        one, two = make("one"), make("two")
        await run_with(how, agent, "I like cats", session=one)
        await run_with(how, agent, "I like dogs", session=two)
        await run_with(how, agent, "What do I like?", session=one)
        return model.inputs[-1], await two.get_items()

    last_input, two_items = both(tmp_path, scenario, how)
    assert "I like dogs" not in str(last_input)
    assert len(two_items) == 2


@pytest.mark.parametrize("how", RUNNERS)
def test_a_list_input_is_appended_to_the_history(tmp_path: Path, how: str) -> None:
    earlier = [{"role": "user", "content": "Earlier message"},
               {"role": "assistant", "content": "Saved reply"}]

    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        session = make("list")
        await session.add_items(list(earlier))
        agent, model = replying("ok")
        await run_with(how, agent, [{"role": "user", "content": "Test message"}],
                       session=session)
        return model.inputs[-1]

    assert both(tmp_path, scenario, how) == [
        *earlier, {"role": "user", "content": "Test message"}]


@pytest.mark.parametrize("how", RUNNERS)
def test_an_input_callback_shapes_the_input_and_never_grows_the_session(
        tmp_path: Path, how: str) -> None:
    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        session = make("callback")
        agent, model = replying("a0", "a1", "a2", "a3")

        def users_only(history: list[Any], new: list[Any]) -> list[Any]:
            return [i for i in history if i.get("role") == "user"] + new

        def repeat_first(history: list[Any], new: list[Any]) -> list[Any]:
            return new if not history else [*history, history[0], *new]

        for turn in range(3):
            await run_with(how, agent, f"user {turn}", session=session,
                           run_config=RunConfig(session_input_callback=repeat_first))
        await run_with(how, agent, "last", session=session,
                       run_config=RunConfig(session_input_callback=users_only))
        return model.inputs[-1], await session.get_items()

    last_input, stored = both(tmp_path, scenario, how)
    assert [i.get("content") for i in last_input] == ["user 0", "user 1", "user 2", "last"]
    assert [i.get("content") for i in stored if i.get("role") == "user"] == [
        "user 0", "user 1", "user 2", "last"]
    assert len(stored) == 8


@pytest.mark.parametrize("how", RUNNERS)
@pytest.mark.parametrize("limit", [2, 0, None, 50])
def test_a_run_config_limit_bounds_the_history_given(tmp_path: Path, how: str,
                                                     limit: int | None) -> None:
    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        session = make("limits")
        agent, model = replying("Reply 1", "Reply 2", "Reply 3", "Reply 4")
        for n in (1, 2, 3):
            await run_with(how, agent, f"Message {n}", session=session)
        await run_with(how, agent, "Message 4", session=session,
                       run_config=RunConfig(session_settings=SessionSettings(limit=limit)))
        return model.inputs[-1]

    last_input = both(tmp_path, scenario, how)
    kept = 6 if limit is None or limit > 6 else limit
    assert len(last_input) == kept + 1
    assert last_input[-1]["content"] == "Message 4"
    if limit == 2:
        assert last_input[0]["content"] == "Message 3"


@pytest.mark.parametrize("how", RUNNERS)
def test_a_limit_never_passes_an_output_without_its_call(tmp_path: Path, how: str) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "It is sunny.", "annotations": []}]},
    ]

    async def scenario(make: Callable[[str], Any], how: str) -> Any:
        session = make("pairs")
        await session.add_items([dict(i) for i in history])
        window = await session.get_items(limit=2)
        agent, model = replying("Tomorrow too.")
        await run_with(how, agent, "And tomorrow?", session=session,
                       run_config=RunConfig(session_settings=SessionSettings(limit=2)))
        return window, model.inputs[-1]

    window, last_input = both(tmp_path, scenario, how)
    assert window == history[-2:]
    assert last_input == [history[-1], {"role": "user", "content": "And tomorrow?"}]


def test_direct_use_add_get_pop_clear_and_limits(tmp_path: Path) -> None:
    items = [{"role": "user", "content": "Message 1"},
             {"role": "assistant", "content": "Response 1"},
             {"role": "user", "content": "Message 2"},
             {"role": "assistant", "content": "Response 2"},
             {"role": "user", "content": "O'Reilly; DROP TABLE sessions;--"},
             {"role": "assistant", "content": "こんにちは 😊 ünïcödé"}]

    async def scenario(make: Callable[[str], Any], _: str) -> Any:
        session, other = make("direct"), make("other")
        seen: list[Any] = [await session.pop_item()]
        await session.add_items([dict(i) for i in items])
        await other.add_items([{"role": "user", "content": "other"}])
        for limit in (None, 2, 4, 10, 0):
            seen.append(await session.get_items(limit))
        seen += [await session.pop_item(), await session.pop_item()]
        seen.append(await session.get_items())
        seen.append(await other.get_items())
        await session.clear_session()
        seen += [await session.get_items(), await session.pop_item(), await other.get_items()]
        return seen

    seen = both(tmp_path, scenario, "direct")
    assert seen[0] is None
    assert seen[1] == items
    assert seen[2] == items[-2:]
    assert seen[5] == []
    assert seen[6:8] == [items[-1], items[-2]]
    assert seen[-3:] == [[], None, [{"role": "user", "content": "other"}]]


def test_a_memory_store_behaves_as_the_sqlite_store() -> None:
    async def scenario(session: ConvlogSession) -> list[Any]:
        agent, _ = replying("one", "two")
        await Runner.run(agent, "first", session=session)
        await Runner.run(agent, "second", session=session)
        return list(await session.get_items())

    on_disk = asyncio.run(scenario(ConvlogSession(MemoryStore(), "m")))
    assert [i.get("content") for i in on_disk][::2] == ["first", "second"]
