"""Branches on convlog forks, side by side with the SDK's AdvancedSQLiteSession."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.extensions.memory import AdvancedSQLiteSession

from engine.store import SQLiteStore
from projections.integrations.agents_branches import BranchingConvlogSession
from tests.support.agents_fake import ScriptedModel, text

set_tracing_disabled(True)


async def story(session: Any) -> list[Any]:
    """Three turns, a branch from turn 2 with another question, back to main."""
    seen: list[Any] = []
    model = ScriptedModel([[text(f"Answer {n}")] for n in range(1, 6)])
    agent = Agent(name="helper", model=model)
    for question in ("Where is Paris?", "And Rome?", "And Oslo?"):
        await Runner.run(agent, question, session=session)
    seen.append([(t["turn"], t["content"]) for t in await session.get_conversation_turns()])
    seen.append(await session.create_branch_from_turn(2, "rome-again"))
    seen.append(await session.get_items())
    await Runner.run(agent, "What about Milan?", session=session)
    seen.append(list(model.inputs[-1]))
    seen.append(await session.get_items())
    seen.append(branches(await session.list_branches()))
    await session.switch_to_branch("main")
    seen.append(await session.get_items())
    seen.append(branches(await session.list_branches()))
    seen.append([t["turn"] for t in await session.find_turns_by_content("Oslo")])
    seen.append(await session.create_branch_from_content("Paris", "from-start"))
    seen.append(await session.get_items())
    await session.switch_to_branch("rome-again")
    seen.append([t["content"] for t in await session.get_conversation_turns()])
    with pytest.raises(ValueError, match="exist"):
        await session.switch_to_branch("nowhere")
    with pytest.raises(ValueError, match=r"(?i)turn"):
        await session.create_branch_from_turn(9, "too-far")
    with pytest.raises(ValueError, match=r"(?i)main"):
        await session.create_branch_from_turn(1, "main")
    return seen


def branches(listed: list[dict[str, Any]]) -> list[Any]:
    return sorted((b["branch_id"], b["message_count"], b["user_turns"], b["is_current"])
                  for b in listed)


def test_branches_behave_as_advanced_sqlite_sessions(tmp_path: Path) -> None:
    theirs = asyncio.run(story(AdvancedSQLiteSession(
        session_id="trip", db_path=str(tmp_path / "sdk.db"), create_tables=True)))
    store = SQLiteStore(str(tmp_path / "convlog.db"))
    ours = asyncio.run(story(BranchingConvlogSession(store, "trip")))
    assert ours == theirs
    assert ours[0] == [(1, "Where is Paris?"), (2, "And Rome?"), (3, "And Oslo?")]
    assert [i.get("content") for i in ours[2]][::2] == ["Where is Paris?"]
    assert ours[-1] == ["Where is Paris?", "What about Milan?"]

    # Another object (another process would do the same) lists the same branches.
    again = BranchingConvlogSession(store, "trip")
    assert branches(asyncio.run(again.list_branches())) == [
        ("from-start", 0, 0, False), ("main", 6, 3, True), ("rome-again", 4, 2, False)]
    # A branch is a fork sharing its prefix: nothing was copied.
    info = store.session_info(again.branch_session_id("rome-again"))
    assert (info.parent, info.fork_seq) == (again.main_id, info.fork_seq)
    assert info.fork_seq is not None
    assert info.fork_seq > 0
