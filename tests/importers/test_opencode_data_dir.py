"""OpenCode's data directory as upgrades leave it: opencode.db (1.2+), storage/ (1.1.x), and
the 0.x trees under project/*/storage (both older message formats)."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.importers.detect import detect, plan_path
from engine.importers.opencode import plan_opencode
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written
from tests.importers.test_opencode_v2 import build

DATA = FIXTURES / "opencode-data"


def texts(store: object, sid: str) -> list[tuple[str, list[str]]]:
    return [(m.info.role, [p.text for p in m.parts if isinstance(p, v.TextPart)])
            for m in at(store, sid).messages()]  # type: ignore[arg-type]


def test_every_generation_of_the_tree_imports_once() -> None:
    assert detect(DATA) == "opencode"
    plan = plan_path(DATA)
    store = written(plan)
    by_id = {s.original_id: s.id for s in plan.sessions}
    assert sorted(by_id) == ["ses_mid0001", "ses_moved001", "ses_new0001", "ses_old0001"]
    assert texts(store, by_id["ses_new0001"]) == [("user", ["fix the parser"])]
    assert texts(store, by_id["ses_mid0001"]) == [("user", ["bump the version"])]
    report = plan.report.unmapped
    assert report["a session kept in more than one place: its newest copy is imported"].lines == [
        "project/home-me-app/storage: ses_moved001"]


def test_the_first_message_format_keeps_tools_reasoning_and_usage() -> None:
    plan = plan_path(DATA)
    store = written(plan)
    old = next(s for s in plan.sessions if s.original_id == "ses_old0001")
    user, turn = at(store, old.id).messages()
    assert [p.text for p in user.parts if isinstance(p, v.TextPart)] == ["list the files"]
    info = turn.info
    assert isinstance(info, v.AssistantInfo)
    assert (info.model_id, info.provider_id, info.tokens.input, info.cost) == (
        "claude-sonnet-4", "anthropic", 100, 0.002)
    assert info.time.completed == 1749000004000
    tool = next(p for p in turn.parts if isinstance(p, v.ToolPart))
    assert (tool.call_id, tool.tool) == ("toolu_o1", "bash")
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert (tool.state.output, tool.state.title) == ("app.py\nREADME.md", "ls")
    assert [p.text for p in turn.parts if isinstance(p, v.ReasoningPart)] == ["Use ls."]
    assert [p.text for p in turn.parts if isinstance(p, v.TextPart)] == ["Two files."]
    assert "a first-format part 'source-url': not imported" in plan.report.unmapped


def test_the_database_wins_over_the_trees_it_was_migrated_from(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    shutil.copytree(DATA, root)
    build(root / "opencode.db")
    plan = plan_opencode(root)
    written(plan)
    originals = sorted(s.original_id for s in plan.sessions)
    assert originals == ["ses_legacy0002", "ses_mid0001", "ses_moved001", "ses_new0001",
                         "ses_old0001", "ses_v2only0001"]


def test_a_lone_0x_tree_imports(tmp_path: Path) -> None:
    tree = DATA / "project" / "global" / "storage"
    assert detect(tree) == "opencode"
    plan = plan_opencode(tree)
    assert [s.original_id for s in plan.sessions] == ["ses_old0001"]
