"""Per-turn usage and tool usage, side by side with the SDK's AdvancedSQLiteSession."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.extensions.memory import AdvancedSQLiteSession
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from engine import events as ev
from engine.store import SQLiteStore
from projections.integrations.agents_branches import BranchingConvlogSession
from tests.support.agents_fake import ScriptedModel, call, text

set_tracing_disabled(True)


class CountingModel(ScriptedModel):
    """A scripted model whose n-th call reports its own usage (n requests' worth)."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(*args, **kwargs)
        n = len(self.inputs)
        response.usage = Usage(requests=1, input_tokens=100 * n, output_tokens=10 * n,
                               total_tokens=110 * n,
                               input_tokens_details=InputTokensDetails(
                                   cached_tokens=n, cache_write_tokens=0),
                               output_tokens_details=OutputTokensDetails(reasoning_tokens=2 * n))
        return response


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


async def story(session: Any) -> list[Any]:
    seen: list[Any] = []
    model = CountingModel([
        [call("weather", {"city": "Paris"})], [text("Sunny in Paris")],
        [text("Rome is in Italy")],
        [call("weather", {"city": "Oslo"}, "call_2"), call("weather", {"city": "Bergen"},
                                                           "call_3")],
        [text("Both sunny")], [text("Milan is in Italy")], [text("Again")]])
    agent = Agent(name="helper", model=model, tools=[weather])
    for question in ("Weather in Paris?", "Where is Rome?", "Oslo and Bergen?"):
        result = await Runner.run(agent, question, session=session)
        await session.store_run_usage(result)
    seen.append(await session.get_session_usage())
    seen.append(await session.get_turn_usage())
    seen.append(await session.get_turn_usage(2))
    seen.append(await session.get_turn_usage(9))
    seen.append(sorted(await session.get_tool_usage(), key=lambda r: (r[2], str(r[0]))))
    await session.create_branch_from_turn(2, "again")  # the branch holds turn 1
    seen.append(await session.get_turn_usage())
    seen.append(sorted(await session.get_tool_usage(), key=lambda r: (r[2], str(r[0]))))
    result = await Runner.run(agent, "Where is Milan?", session=session)
    await session.store_run_usage(result)
    seen.append(await session.get_turn_usage())
    seen.append(await session.get_session_usage("again"))
    seen.append(await session.get_session_usage("main"))
    seen.append(await session.get_session_usage())
    await session.switch_to_branch("main")
    await session.pop_item()  # the last turn's answer only: the turn stays
    seen.append(await session.get_turn_usage(3))
    while (await session.get_items())[-1].get("role") != "user":
        await session.pop_item()
    await session.pop_item()  # turn 3's user message: its usage goes with it
    seen.append(await session.get_turn_usage())
    seen.append(await session.get_session_usage("main"))
    result = await Runner.run(agent, "Again?", session=session)  # a new turn 3
    seen.append(await session.get_turn_usage(3))
    await session.store_run_usage(result)
    seen.append(await session.get_turn_usage(3))
    await session.clear_session()
    seen.append(await session.get_session_usage("main"))
    seen.append(await session.get_tool_usage())
    return seen


def test_usage_and_tool_usage_are_advanced_sqlite_sessions(tmp_path: Path) -> None:
    theirs = asyncio.run(story(AdvancedSQLiteSession(
        session_id="usage", db_path=str(tmp_path / "sdk.db"), create_tables=True)))
    store = SQLiteStore(str(tmp_path / "convlog.db"))
    ours = asyncio.run(story(BranchingConvlogSession(store, "usage")))
    assert ours == theirs
    # Five model calls over three turns (calls 1+2, 3, 4+5), each its own usage.
    assert ours[0] == {"requests": 5, "input_tokens": 1500, "output_tokens": 150,
                       "total_tokens": 1650, "total_turns": 3}
    assert ours[4] == [("weather", 1, 1), ("weather", 2, 3)]
    # The usage is in the log, read by any object: another one sees the same.
    again = BranchingConvlogSession(store, "usage")
    assert asyncio.run(again.get_session_usage("again")) == ours[8]
    recorded = [e for e in store.read(again.session.id) if isinstance(e, ev.RunUsageRecorded)]
    assert [e.tokens.reasoning for e in recorded][:1] == [2 * 1 + 2 * 2]
