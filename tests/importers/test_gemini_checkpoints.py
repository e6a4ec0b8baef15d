"""Gemini CLI ``/chat save`` checkpoints (``checkpoint-<tag>.json``): the model's own
``Content[]`` history, as ``{history, authType}`` or, in older versions, a bare list.
They were refused as "not a transcript format this tool knows"."""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers.detect import detect
from engine.importers.gemini import plan_gemini
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

CHECKPOINTS = FIXTURES / "gemini-checkpoints"
NEW = CHECKPOINTS / "checkpoint-fix-bug.json"
OLD = CHECKPOINTS / "checkpoint-old.json"


def _history(path: Path) -> list[v.WithParts]:
    plan = plan_gemini(path)
    return at(written(plan), plan.report.sessions[0].id).messages()


def test_both_checkpoint_shapes_are_detected_as_gemini() -> None:
    assert detect(NEW) == "gemini"
    assert detect(OLD) == "gemini"


def test_a_checkpoint_maps_turns_thoughts_and_answered_calls() -> None:
    history = _history(NEW)
    assert [m.info.role for m in history] == ["user", "assistant", "user", "assistant",
                                              "assistant"]
    thinking, tool = history[3].parts
    assert isinstance(thinking, v.ReasoningPart)
    assert thinking.text == "Reading the file."
    assert isinstance(tool, v.ToolPart)
    assert (tool.call_id, tool.tool) == ("read_file-1", "read_file")
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "print('hi')\n"
    assert all(m.info.time.completed is not None for m in history)


def test_an_old_checkpoint_keeps_errors_and_leaves_an_unanswered_call_running() -> None:
    plan = plan_gemini(OLD)
    history = at(written(plan), plan.report.sessions[0].id).messages()
    refused = next(p for p in history[3].parts if isinstance(p, v.ToolPart))
    assert isinstance(refused.state, v.ToolStateError)
    assert "denied by policy" in refused.state.error
    unanswered = next(p for p in history[4].parts if isinstance(p, v.ToolPart))
    assert isinstance(unanswered.state, v.ToolStateRunning)  # saved mid-turn: not invented
    assert history[4].info.time.completed is None
    # The image beside the prompt (was reported only) is a file part of that message.
    assert "a checkpoint part ['inlineData']: not mapped" not in plan.report.unmapped
    files = [p for p in history[2].parts if isinstance(p, v.FilePart)]
    assert len(files) == 1
    assert files[0].url.startswith(f"data:{files[0].mime};base64,")


def test_the_same_tag_in_two_projects_is_two_sessions(tmp_path: Path) -> None:
    other = json.loads(NEW.read_text())
    other["history"][0]["parts"][0]["text"] += "\nI'm currently working in /srv/other"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / NEW.name).write_text(json.dumps(other))
    a, b = plan_gemini(NEW), plan_gemini(tmp_path / "b" / NEW.name)
    assert a.sessions[0].id != b.sessions[0].id
    assert plan_gemini(NEW).sessions[0].id == a.sessions[0].id  # and stable: idempotent

