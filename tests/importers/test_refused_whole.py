"""Files that were refused or skipped whole (issue 23, classes 5-7): an OpenCode export
with a restarted step, a Gemini session JSON saved as ``*.jsonl``, a folder of several
aider histories. Each imports what the tool wrote; a folder is never refused (or cut
short) for one file."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.cli import main
from engine.importers.aider import plan_aider
from engine.importers.detect import plan_path
from engine.importers.opencode import plan_opencode
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

# --------------------------------------------------------------------------- class 5


def _export(kinds: list[str]) -> dict[str, Any]:
    """An OpenCode export of one prompt and one finished answer whose parts are
    ``kinds`` in order (OpenCode 1.15.x can write step-start twice)."""
    parts: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        pid = f"prt_{i:04d}"
        base = {"id": pid, "sessionID": "ses_1", "messageID": "msg_2", "type": kind}
        if kind in ("text", "reasoning"):
            parts.append({**base, "text": f"{kind} {i}",
                          "time": {"start": 1750000000100 + i, "end": 1750000000100 + i}})
        elif kind == "tool":
            parts.append({**base, "callID": f"call_{i}", "tool": "bash", "state": {
                "status": "completed", "input": {"command": "ls"}, "output": "a.py",
                "title": "ls", "metadata": {},
                "time": {"start": 1750000000100 + i, "end": 1750000000101 + i}}})
        elif kind == "step-start":
            parts.append(base)
        else:
            parts.append({**base, "reason": "stop", "cost": 0.01, "tokens": {
                "input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}})
    return {
        "info": {"id": "ses_1", "title": "Restarted steps", "version": "1.15.2",
                 "time": {"created": 1749999999990, "updated": 1750000000900}},
        "messages": [
            {"info": {"id": "msg_1", "sessionID": "ses_1", "role": "user",
                      "time": {"created": 1750000000000}},
             "parts": [{"id": "prt_u", "sessionID": "ses_1", "messageID": "msg_1",
                        "type": "text", "text": "list files"}]},
            {"info": {"id": "msg_2", "sessionID": "ses_1", "role": "assistant",
                      "parentID": "msg_1", "modelID": "m", "providerID": "p", "cost": 0.01,
                      "tokens": {"input": 10, "output": 5, "reasoning": 0,
                                 "cache": {"read": 0, "write": 0}},
                      "time": {"created": 1750000000050, "completed": 1750000000900}},
             "parts": parts}]}


def test_a_restarted_step_imports_and_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_export(["step-start", "reasoning", "step-start", "reasoning",
                                        "text", "tool", "step-finish"])))
    plan = plan_opencode(path)
    store = written(plan)
    [_, answer] = at(store, plan.sessions[0].id).messages()
    assert [p.TAG for p in answer.parts] == [
        "step-start", "reasoning", "step-finish", "step-start", "reasoning", "text", "tool",
        "step-finish"]
    assert answer.info.time.completed is not None
    assert any("closed as 'unfinished'" in k for k in plan.report.unmapped)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["step-start", "step-finish", "text", "reasoning", "tool"]),
                max_size=10))
def test_any_order_of_step_parts_imports_every_part(kinds: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.json"
        path.write_text(json.dumps(_export(kinds)))
        plan = plan_opencode(path)
    store = written(plan)
    [_, answer] = at(store, plan.sessions[0].id).messages()
    mine = [p for p in answer.parts if ":" not in p.id]  # the parts OpenCode wrote
    assert [p.TAG for p in mine] == kinds
    assert answer.info.time.completed is not None


def test_a_folder_of_exports_with_a_restarted_step_imports_every_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_export(["step-start", "step-start", "text",
                                                         "step-finish"])))
    shutil.copy(FIXTURES / "opencode" / "export-live.json", tmp_path / "b.json")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(tmp_path), "--store", url]) == 0


# --------------------------------------------------------------------------- class 6

GEMINI = FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.json"


def _events(path: Path, *args: str) -> list[list[Any]]:
    plan = plan_path(path, *args)
    store = written(plan)
    return [[(type(e), e.id) for e in store.read(s.id)][1:] for s in plan.sessions]


def test_a_gemini_session_json_saved_as_jsonl_imports_as_the_json(tmp_path: Path) -> None:
    renamed = tmp_path / "session-2025-10-01T09-00-8f2c1a00.jsonl"
    shutil.copy(GEMINI, renamed)
    assert _events(renamed) == _events(GEMINI)


def test_lenient_never_writes_an_empty_session(tmp_path: Path) -> None:
    """A file whose every line is skipped wrote a session of nothing (id 00000000-0001-…)."""
    path = tmp_path / "session-x.jsonl"
    path.write_text('{"sessionId": "g1", "projectHash": "p"\n{not json either\n')
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(path), "--store", url, "--lenient"]) == 2
    assert not (tmp_path / "c.db").exists()


# --------------------------------------------------------------------------- class 7

AIDER = FIXTURES / "aider" / ".aider.chat.history.md"


def test_a_folder_of_aider_histories_imports_each(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        text = AIDER.read_text().replace("add a --verbose flag", f"add a --{name} flag")
        (tmp_path / name / ".aider.chat.history.md").write_text(text)
    (tmp_path / "notes.aider.chat.history.md").write_text("no history here\n")
    plan = plan_aider(tmp_path)
    store = written(plan)
    alone = plan_aider(AIDER)
    assert len(plan.sessions) == 2 * len(alone.sessions)
    prompts = {p.text for s in plan.sessions for m in at(store, s.id).messages()
               for p in m.parts if isinstance(p, v.TextPart) and m.info.role == "user"}
    assert any("--one flag" in t for t in prompts)
    assert any("--two flag" in t for t in prompts)
    assert any(k.startswith("not imported: no '# aider chat started'")
               for k in plan.report.unmapped)
    assert all(isinstance(s.events[0], ev.SessionImported) for s in plan.sessions)


def test_a_folder_of_exports_nests_a_child_under_its_parent(tmp_path: Path) -> None:
    """Each export read alone named its parent by OpenCode's id: the child stood at the
    top level of `convlog sessions`."""
    parent = _export(["step-start", "text", "step-finish"])
    child = json.loads(json.dumps(parent).replace("ses_1", "ses_2").replace("msg_", "msgc_")
                       .replace("prt_", "prtc_"))
    child["info"]["parentID"] = "ses_1"
    (tmp_path / "child.json").write_text(json.dumps(child))
    (tmp_path / "parent.json").write_text(json.dumps(parent))
    (tmp_path / "broken.json").write_text(json.dumps({"info": {}, "messages": 3}))
    plan = plan_path(tmp_path)
    written(plan)
    by_original = {s.original_id: s for s in plan.sessions}
    assert by_original["ses_2"].kind == "child"
    assert by_original["ses_2"].parent == by_original["ses_1"].id
    head = by_original["ses_2"].events[0]
    assert isinstance(head, ev.SessionImported)
    assert head.metadata is not None
    assert head.metadata["parent_session"] == by_original["ses_1"].id
    assert any(k.startswith("a file its importer refused") for k in plan.report.unmapped)


# --------------------------------------------------------------------------- class 8: aider


def test_aider_model_tokens_cost_and_api_errors_are_read(tmp_path: Path) -> None:
    plan = plan_aider(AIDER)
    store = written(plan)
    first = at(store, plan.sessions[0].id).messages()
    reply = next(m.info for m in first if isinstance(m.info, v.AssistantInfo))
    assert (reply.provider_id, reply.model_id) == ("anthropic", "claude-3-7-sonnet-20250219")
    assert (reply.tokens.input, reply.tokens.output, reply.cost) == (4100, 120, 0.01)
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("# aider chat started at 2025-05-01 10:00:00\n\n> Model: gpt-4o with diff "
                    "edit format  \n\n#### hello  \n\n> litellm.RateLimitError: RateLimitError: "
                    "OpenAIException - rate limit reached  \n> Retrying in 0.2 seconds...  \n")
    plan = plan_aider(path)
    store = written(plan)
    failed = at(store, plan.sessions[0].id).messages()[-1].info
    assert isinstance(failed, v.AssistantInfo)
    assert failed.error is not None
    assert failed.error.kind == "api"
    assert failed.error.message.startswith("litellm.RateLimitError")
    assert (failed.provider_id, failed.model_id) == ("", "gpt-4o")
