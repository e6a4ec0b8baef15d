"""Gemini CLI: the JSON file and the JSONL log (replacement by id, $set, $rewindTo as a fork)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main as main_cli
from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.importers.gemini import plan_gemini
from engine.importers.write import write_plan
from projections import views as v
from projections.render import gemini as render_gemini
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

JSON = next((FIXTURES / "gemini").glob("*.json"))
JSONL = next((FIXTURES / "gemini").glob("*.jsonl"))


def tools(messages: list[v.WithParts]) -> dict[str, v.ToolPart]:
    return {p.call_id: p for m in messages for p in m.parts if isinstance(p, v.ToolPart)}


def test_both_generations_are_detected() -> None:
    assert detect(JSON) == "gemini"
    assert detect(JSONL) == "gemini"


def test_the_seven_tool_statuses() -> None:
    plan = plan_gemini(JSON)
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    t = tools(messages)
    assert isinstance(t["c1"].state, v.ToolStateCompleted)
    assert t["c1"].state.output == "app.py\ntest_app.py"
    assert isinstance(t["c2"].state, v.ToolStateError)
    assert "nope.py" in t["c2"].state.error
    assert isinstance(t["c3"].state, v.ToolStateError)
    assert (t["c3"].state.metadata or {}).get("kind") == "cancelled"
    assert t["c4"].approval is not None  # awaiting_approval
    assert isinstance(t["c5"].state, v.ToolStateRunning)  # executing
    assert isinstance(t["c6"].state, v.ToolStatePending)  # validating
    assert isinstance(t["c7"].state, v.ToolStatePending)  # scheduled
    assert messages[-1].info.time.completed is None


def test_thoughts_tokens_and_notices() -> None:
    plan = plan_gemini(JSON)
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    thought = messages[1].parts[0]
    assert isinstance(thought, v.ReasoningPart)
    assert (thought.metadata or {})["gemini"]["subject"] == "Listing"
    info = messages[1].info
    assert isinstance(info, v.AssistantInfo)
    assert (info.tokens.input, info.tokens.reasoning, info.tokens.cache.read) == (100, 7, 5)
    for kind in ("info record", "warning record", "error record"):
        assert any(k.startswith(kind) for k in plan.report.unmapped), kind
    assert render_gemini.contents(messages)


def test_a_later_line_replaces_a_record_and_a_rewind_forks() -> None:
    plan = plan_gemini(JSONL)
    store = written(plan)
    main, fork = plan.sessions
    assert fork.kind == "fork"
    assert store.session_info(fork.id).parent == main.id
    main_msgs = at(store, main.id).messages()
    fork_msgs = at(store, fork.id).messages()
    c1 = tools(main_msgs)["c1"]
    assert isinstance(c1.state, v.ToolStateCompleted)  # the replacing line won
    assert [m.info.id for m in fork_msgs[:2]] == [m.info.id for m in main_msgs[:2]]
    texts = [p.text for m in fork_msgs for p in m.parts if isinstance(p, v.TextPart)]
    assert "no, just count its lines" in texts
    assert "delete test_app.py" not in texts
    assert plan.sessions[0].title == "Listing python files"  # from $set


def test_reimport_is_idempotent() -> None:
    store = written(plan_gemini(JSONL))
    again = plan_gemini(JSONL)
    write_plan(store, again)
    assert again.report.written == 0


def test_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = JSONL.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "[1,\n", *lines[2:]]))
    with pytest.raises(ImportInputError) as caught:
        plan_gemini(path)
    assert caught.value.line == 3


CHATS = FIXTURES / "gemini-chats"


def test_a_chats_directory_set_messages_unknown_rewind_and_a_subagent(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``$set.messages`` rewrites the history (a fork sharing what did not change), a
    ``$rewindTo`` an unknown id drops every message (a fork at the start), and the
    subagent's ``<parent>/<id>.jsonl`` is a child session of the session it ran in."""
    assert detect(CHATS) == "gemini"
    plan = plan_gemini(CHATS)
    store = written(plan)
    kinds = [s.kind for s in plan.sessions]
    assert kinds == ["main", "fork", "fork", "child"]
    main, masked, cleared, child = plan.sessions
    assert masked.parent == main.id
    assert cleared.parent == main.id  # its one shared event is the main session's
    assert cleared.fork_seq == 1  # only session.imported is shared
    assert child.parent == main.id
    tool = at(store, masked.id).messages()[1].parts[0]
    assert isinstance(tool, v.ToolPart)
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "[masked]"
    original = at(store, main.id).messages()[1].parts[0]
    assert isinstance(original, v.ToolPart)
    assert isinstance(original.state, v.ToolStateCompleted)
    assert original.state.output == "README: a parser"
    assert [m.parts[0].text for m in at(store, cleared.id).messages()  # type: ignore[union-attr]
            ] == ["start over"]
    # An inlineData part (was reported only) is a file part of its message.
    assert not any("inlineData" in k for k in plan.report.unmapped)
    files = [(p.mime, p.url) for m in at(store, main.id).messages() for p in m.parts
             if isinstance(p, v.FilePart)]
    assert files == [("image/png", "data:image/png;base64,AAAA")]
    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert main_cli(["import", str(CHATS), "--store", url]) == 0
    capsys.readouterr()
    assert main_cli(["sessions", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("(child)" in line and line.startswith("  ") for line in lines)


def test_an_object_result_display_is_json_not_a_python_repr(tmp_path: Path) -> None:
    # Gemini CLI's edit tools display a diff object; with no functionResponse output the
    # tool's output read "{'fileDiff': ...}".
    display = {"fileDiff": "@@ -1 +1 @@\n-a\n+b\n", "fileName": "app.py"}
    records = [
        {"sessionId": "g9", "projectHash": "p", "startTime": "2025-10-01T09:00:00Z"},
        {"id": "m1", "timestamp": "2025-10-01T09:00:01Z", "type": "user", "content": "edit"},
        {"id": "m2", "timestamp": "2025-10-01T09:00:02Z", "type": "gemini", "content": "",
         "toolCalls": [{"id": "c1", "name": "replace", "args": {}, "status": "success",
                        "result": [], "resultDisplay": display}]},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    plan = plan_gemini(path)
    tool = tools(at(written(plan), plan.sessions[0].id).messages())["c1"]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert json.loads(tool.state.output) == display
