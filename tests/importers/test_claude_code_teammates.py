"""Claude Code Agent Teams: a teammate's transcript is a child session of its lead.

The fixture is a real capture (``python -m tests.realclients.teams``, Claude Code
2.1.197 in tmux): the lead's transcript, whose Agent call spawned ``worker``
(``status: teammate_spawned``, ``agent_id: worker@<team>``), and the teammate's
own session file, each line carrying ``teamName`` and ``agentName``. Before,
the teammate imported as an unlinked main session.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.importers.claude_code import plan_claude_code
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "agent-teams" / "claude-2.1.197"
           / "transcripts")


def _teammate_file() -> Path:
    [mate] = [p for p in CAPTURE.glob("*.jsonl") if '"agentName":"worker"' in p.read_text()]
    return mate


def test_the_teammate_is_a_child_of_the_lead_and_the_spawn_links_it() -> None:
    plan = plan_claude_code(CAPTURE)
    store = written(plan)
    [lead] = [s for s in plan.report.sessions if s.kind == "main"]
    [mate] = [s for s in plan.report.sessions if s.kind == "child"]
    assert mate.parent == lead.id
    spawn = next(p for m in at(store, lead.id).messages() for p in m.parts
                 if isinstance(p, v.ToolPart) and p.tool == "Agent")
    assert isinstance(spawn.state, v.ToolStateCompleted)
    assert (spawn.state.metadata or {})["child_session"] == mate.id
    # The teammate's session holds what it was sent and its SendMessage to the lead.
    tools = [p.tool for m in at(store, mate.id).messages() for p in m.parts
             if isinstance(p, v.ToolPart)]
    assert tools == ["SendMessage"]


def test_a_teammate_without_its_lead_is_a_session_of_its_own_and_says_so(
        tmp_path: Path) -> None:
    shutil.copy(_teammate_file(), tmp_path)
    plan = plan_claude_code(tmp_path)
    written(plan)
    assert [s.kind for s in plan.report.sessions] == ["main"]
    assert any("teammate (worker@" in note for note in plan.report.unmapped), plan.report.unmapped
