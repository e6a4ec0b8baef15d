"""The newest Codex rollouts (mid 2026: ordinal lines, paginated item_completed events,
tool search, image generation, inter-agent messages, context_compaction), read from
~/.codex/sessions/YYYY/MM/DD as Codex lays it out."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main as main_cli
from engine.importers.codex import plan_codex
from engine.importers.detect import detect, plan_path
from engine.importers.write import write_plan
from engine.store import MemoryStore
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

HOME = FIXTURES / "codex-home"
ROLLOUT = sorted((HOME / "sessions").rglob("rollout-*.jsonl"))[0]


def messages() -> list[v.WithParts]:
    plan = plan_codex(ROLLOUT)
    return at(written(plan), plan.sessions[0].id).messages()


def tool_parts(m: v.WithParts) -> list[v.ToolPart]:
    return [p for p in m.parts if isinstance(p, v.ToolPart)]


def test_the_sessions_tree_is_detected_and_imported() -> None:
    assert detect(HOME) == "codex"
    assert detect(HOME / "sessions" / "2026") == "codex"
    plan = plan_path(HOME)
    assert [s.original_id for s in plan.sessions] == ["019dc0a1-4444-7555-8666-777788889999",
                                                      "019dc0a1-5555-7666-8777-88889999aaaa"]
    assert plan.sessions[0].tool_version == "0.130.0"


def test_a_spawned_agents_rollout_is_a_child_of_its_parent_thread() -> None:
    plan = plan_path(HOME)
    store = written(plan)
    parent, child = plan.sessions
    assert (child.kind, child.parent) == ("child", parent.id)
    assert [p.text for m in at(store, child.id).messages() for p in m.parts
            if isinstance(p, v.TextPart)] == ["count the API endpoints", "3 endpoints."]
    alone = plan_codex(sorted((HOME / "sessions").rglob("rollout-*.jsonl"))[1])
    assert alone.sessions[0].kind == "main"  # its parent is not in that import
    assert any("parent thread is not in the import" in k for k in alone.report.unmapped)


def test_tool_search_calls_keep_their_ids_and_results() -> None:
    turn = messages()[1]
    searches = [p for p in tool_parts(turn) if p.tool == "tool_search"]
    assert searches[0].call_id == "ts_1"
    assert searches[0].state.input == {"query": "calendar create", "limit": 1}
    first = searches[0].state
    assert isinstance(first, v.ToolStateCompleted)
    assert json.loads(first.output) == [{"name": "calendar_create"}]
    # A server-side search writes no call_id: its output answers the last search.
    second = searches[1].state
    assert isinstance(second, v.ToolStateCompleted)
    assert json.loads(second.output) == []


def test_image_generation_is_a_tool_with_the_image_attached() -> None:
    turn = messages()[1]
    done, generating = [p for p in tool_parts(turn) if p.tool == "image_generation"]
    assert done.call_id == "ig_1"
    assert isinstance(done.state, v.ToolStateCompleted)
    assert done.state.output == "a round blue logo"
    assert [a.url for a in done.state.attachments or []] == ["data:image/png;base64,iVBORw0KGgo="]
    assert isinstance(generating.state, v.ToolStateRunning)  # no image: not invented


def test_user_images_and_audio_are_files_and_unknown_content_is_reported() -> None:
    plan = plan_codex(ROLLOUT)
    user = at(written(plan), plan.sessions[0].id).messages()[0]
    files = [p for p in user.parts if isinstance(p, v.FilePart)]
    assert [f.mime for f in files] == ["image/jpeg", "audio/wav"]
    assert plan.report.unmapped["user content 'input_video': not mapped"].lines == [5]


def test_item_completed_repeats_are_skipped_and_a_plan_comes_in() -> None:
    all_messages = messages()
    user, turn = all_messages[0], all_messages[1]
    assert [p.text for p in user.parts if isinstance(p, v.TextPart)] == [
        "find a calendar tool and draw a logo"]  # once, not again from item_completed
    texts = [p.text for p in turn.parts if isinstance(p, v.TextPart)]
    assert texts == ["1. search\n2. draw", "Found calendar_create; the logo is drawn."]


def test_messages_between_agents_are_synthetic_user_input() -> None:
    plan = plan_codex(ROLLOUT)
    store = written(plan)
    inbound = at(store, plan.sessions[0].id).messages()[2:4]
    parts = [p for m in inbound for p in m.parts if isinstance(p, v.TextPart)]
    assert all(p.synthetic for p in parts)
    assert [p.text for p in parts] == ["the API has 3 endpoints", "tests pass"]
    meta = [(p.metadata or {})["codex"]["inter_agent"] for p in parts]
    assert [m["author"] for m in meta] == ["/root/researcher", "/root/tester"]
    assert "an agent_message's encrypted_content: not kept" in plan.report.unmapped


def test_future_kinds_are_reported_by_name_and_lose_nothing_else() -> None:
    plan = plan_codex(ROLLOUT)
    report = plan.report.unmapped
    assert report["response_item type 'brand_new_item': not mapped"].lines == [26]
    assert report["unknown line type 'some_future_line': not mapped"].lines == [27]
    assert any(k.startswith("world_state line") for k in report)
    assert any(isinstance(p, v.CompactionPart) for p in messages()[-1].parts)


def test_the_tree_imports_twice_writing_once(tmp_path: Path) -> None:
    store = MemoryStore()
    write_plan(store, plan_path(HOME))
    again = plan_path(HOME / "sessions")
    write_plan(store, again)
    assert (again.report.written, again.report.existing > 0) == (0, True)
    assert main_cli(["import", str(HOME), "--store", f"sqlite:///{tmp_path / 'c.db'}"]) == 0
