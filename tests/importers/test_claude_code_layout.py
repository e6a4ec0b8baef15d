"""Claude Code 2.1.x as it lays out ~/.claude/projects: workflow agents under
subagents/workflows/<run>/, their journal, and the session's title records."""

from __future__ import annotations

from engine.importers.claude_code import files_of, plan_claude_code
from engine.importers.detect import detect, plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

PROJECTS = FIXTURES / "claude-projects"
SESSION = next((PROJECTS / "-home-me-app").glob("*.jsonl"))


def test_every_level_of_the_tree_is_detected() -> None:
    for path in (PROJECTS, PROJECTS / "-home-me-app", SESSION):
        assert detect(path) == "claude-code"


def test_a_workflow_agent_is_a_child_of_the_session_it_ran_in() -> None:
    assert [p.name for p in files_of(SESSION)] == [SESSION.name, "agent-w1.jsonl"]
    for path in (PROJECTS, SESSION):
        plan = plan_path(path)
        store = written(plan)
        main, child = plan.sessions
        assert (child.kind, child.parent) == ("child", main.id)
        replies = [p.text for m in at(store, child.id).messages() for p in m.parts
                   if isinstance(p, v.TextPart)]
        assert replies == ["Sweep batches a and b.", "2 stale pages flagged."]


def test_the_journal_is_reported_not_read_as_a_transcript() -> None:
    plan = plan_path(PROJECTS)
    key = "a workflow journal: not a transcript, not imported (its agents' transcripts are)"
    assert plan.report.unmapped[key].lines == ["journal.jsonl"]
    assert not any("without a uuid" in k for k in plan.report.unmapped)


def test_the_latest_rename_names_the_session_over_the_generated_title() -> None:
    plan = plan_claude_code(SESSION)
    assert plan.sessions[0].title == "docs sweep (renamed)"
    report = plan.report.unmapped
    assert report["custom-title record: kept as the session title"].lines == [
        f"{SESSION.name}:1", f"{SESSION.name}:7"]
    assert "agent-name record (the agent's display name): not mapped" in report


def test_thinking_keeps_its_signature_and_the_call_its_id() -> None:
    plan = plan_claude_code(SESSION)
    turn = at(written(plan), plan.sessions[0].id).messages()[1]
    thinking = next(p for p in turn.parts if isinstance(p, v.ReasoningPart))
    assert (thinking.metadata or {})["anthropic"]["signature"] == "EuYBCkQYAiJA"
    tool = next(p for p in turn.parts if isinstance(p, v.ToolPart))
    assert tool.call_id == "toolu_wf1"
    assert isinstance(tool.state, v.ToolStateCompleted)
    typed = (tool.state.metadata or {})["claude_code"]["toolUseResult"]
    assert typed["runId"] == "wf_1"
