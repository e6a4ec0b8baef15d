"""Gemini CLI's large tool outputs moved to ``tool-outputs/``: masked (``<tool_output_masked>``,
the whole response as JSON in the file) or truncated (the raw output in the file). The
import reads the output back from the file when it is there, and says so when it is not."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

PROJECT = FIXTURES / "gemini-masked"
SESSION = next((PROJECT / "chats").glob("session-*.json"))
SID = json.loads(SESSION.read_text())["sessionId"]
RECIPE = "\n".join(f"step {i}: stir the soup for {i} minutes" for i in range(1, 41))
BOILING = "\n".join(f"boiling… {i}%" for i in range(0, 101))
MISSING = "a masked tool output whose tool-outputs/ file is not here: the preview is the output"


def _tools(path: Path) -> tuple[dict[str, v.ToolStateCompleted], dict[str, Any]]:
    plan = plan_path(path)
    store = written(plan)
    tools = {p.tool: p.state for m in at(store, plan.sessions[0].id).messages()
             for p in m.parts if isinstance(p, v.ToolPart)}
    assert all(isinstance(s, v.ToolStateCompleted) for s in tools.values())
    return tools, plan.report.unmapped  # type: ignore[return-value]


def test_the_project_directory_gives_each_output_whole() -> None:
    for path in (PROJECT, SESSION):  # the directory, or the session file where it lies
        tools, unmapped = _tools(path)
        assert tools["read_file"].output == RECIPE
        assert tools["run_shell_command"].output == BOILING
        saved = tools["read_file"].metadata["gemini"]["saved_output"]
        assert saved["file"] == "read_file_read_file_1780000000000_0_k3x9q.txt"
        assert saved["preview"].startswith("<tool_output_masked>")
        # The third output's file was deleted: its preview stands, and the report says so.
        assert tools["list_directory"].output.startswith("<tool_output_masked>")
        assert unmapped[MISSING].count == 1


def test_a_session_file_copied_alone_keeps_the_previews_and_says_so(tmp_path: Path) -> None:
    shutil.copy(SESSION, tmp_path / SESSION.name)
    tools, unmapped = _tools(tmp_path / SESSION.name)
    assert "Full output available at" in tools["read_file"].output
    assert tools["run_shell_command"].output.startswith("Output too large. Showing first")
    assert unmapped[MISSING].count == 2
    truncated = "a truncated tool output whose tool-outputs/ file is not here: the preview is " \
                "the output"
    assert unmapped[truncated].count == 1


def _project(tmp_path: Path, output: str, saved: str | None, name: str) -> Path:
    """A session of one masked read_file call whose file (when ``saved`` is given) is
    ``tool-outputs/session-<id>/<name>``."""
    sid = "0a0b0c0d-0000-4000-8000-000000000001"
    (tmp_path / "chats").mkdir()
    folder = tmp_path / "tool-outputs" / f"session-{sid}"
    folder.mkdir(parents=True)
    if saved is not None:
        (folder / "read_file_1.txt").write_text(saved)
    masked = (f"<tool_output_masked>\n{output[:20]}\n\nOutput too large. Full output available "
              f"at: {name}\n</tool_output_masked>")
    call = {"id": "c1", "name": "read_file", "args": {}, "status": "success",
            "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                             "response": {"output": masked}}}]}
    doc = {"sessionId": sid, "projectHash": "p", "startTime": "2026-03-01T18:00:00Z",
           "messages": [{"id": "m1", "timestamp": "2026-03-01T18:00:00Z", "type": "user",
                         "content": "go"},
                        {"id": "m2", "timestamp": "2026-03-01T18:00:01Z", "type": "gemini",
                         "content": "", "toolCalls": [call]}]}
    session = tmp_path / "chats" / "session-2026-03-01T18-00-0a0b0c0d.json"
    session.write_text(json.dumps(doc))
    return session


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=200).filter(lambda t: t.strip()),
       st.sampled_from(["/h/.gemini/tmp/p/tool-outputs/session-0a0b0c0d-0000-4000-8000-"
                        "000000000001/read_file_1.txt",
                        "C:\\h\\.gemini\\tmp\\p\\tool-outputs\\session-0a0b0c0d-0000-4000-"
                        "8000-000000000001\\read_file_1.txt"]))
def test_any_masked_output_reads_back_exactly(tmp_path: Path, output: str, name: str) -> None:
    """The file is ``JSON.stringify(response, null, 2)``: its output, whatever its
    characters, is the tool's output, on POSIX and Windows paths alike."""
    output = output.replace("\r", "")  # the tool's own text; the file is written verbatim
    for form in (json.dumps({"output": output}, indent=2), output):
        root = Path(tempfile.mkdtemp(dir=tmp_path))  # tmp_path is shared by the examples
        tools, _ = _tools(_project(root, output, form, name))
        assert tools["read_file"].output == output


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60), st.none() | st.text(max_size=60))
def test_a_masked_output_naming_any_path_never_breaks_the_import(
        tmp_path: Path, name: str, saved: str | None) -> None:
    """A path that names nothing here (``..``, a directory, empty, another drive), a file
    that is no JSON: the preview or the file's text is the output, never a crash."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # tmp_path is shared by the examples
    tools, _ = _tools(_project(root, "preview text", saved, name))
    assert tools["read_file"].output


def _jsonl_session(tmp_path: Path, masked_result: Any, extra: bool) -> Path:
    """A JSONL session whose tool output Gemini CLI's masking sync later replaced: the
    ``$set`` of every message (updateMessagesFromHistory), content re-spelled as parts."""
    call = {"id": "c1", "name": "read_file", "args": {"file_path": "recipe.txt"},
            "status": "success", "timestamp": "2026-03-01T18:00:02Z",
            "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                             "response": {"output": RECIPE}}}]}
    user = {"id": "m1", "timestamp": "2026-03-01T18:00:00Z", "type": "user",
            "content": "read the recipe"}
    model = {"id": "m2", "timestamp": "2026-03-01T18:00:01Z", "type": "gemini",
             "content": "Reading it.", "toolCalls": [call], "model": "gemini-3-flash"}
    later = {"id": "m3", "timestamp": "2026-03-01T18:00:09Z", "type": "user",
             "content": "thanks"}
    masked = {**model, "content": [{"text": "Reading it."}],
              "toolCalls": [{**call, "result": masked_result}]}
    lines: list[Any] = [
        {"sessionId": SID, "projectHash": "p", "startTime": "2026-03-01T18:00:00Z",
         "kind": "main"}, user, model,
        {"$set": {"messages": [user, masked, *([later] if extra else [])],
                  "lastUpdated": "2026-03-01T18:00:08Z"}}]
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "session-2026-03-01T18-00-x.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_masking_pass_in_a_jsonl_session_is_no_fork(tmp_path: Path) -> None:
    preview = (f"<tool_output_masked>\n{RECIPE[:30]}\n... [TRUNCATED] ...\n\nOutput too large. "
               f"Full output available at: /h/.gemini/tmp/p/tool-outputs/session-{SID}/r.txt"
               "\n</tool_output_masked>")
    masked = [{"functionResponse": {"id": "c1", "name": "read_file",
                                    "response": {"output": preview}}}]
    for extra in (False, True):
        plan = plan_path(_jsonl_session(tmp_path, masked, extra))
        store = written(plan)
        assert [s.kind for s in plan.sessions] == ["main"]
        messages = at(store, plan.sessions[0].id).messages()
        tool = next(p for m in messages for p in m.parts if isinstance(p, v.ToolPart))
        assert isinstance(tool.state, v.ToolStateCompleted)
        assert tool.state.output == RECIPE  # as first recorded: no file needed
        assert [m.info.role for m in messages] == ["user", "assistant", *(
            ["user"] if extra else [])]
        assert any("masking sync" in k for k in plan.report.unmapped)


def test_a_rewrite_that_changes_more_than_masking_still_forks(tmp_path: Path) -> None:
    """A compression or a rolled-back turn changes a result into something that is no
    masked preview: the rewritten history is a fork, as before."""
    other = [{"functionResponse": {"id": "c1", "name": "read_file",
                                   "response": {"output": "a different recipe"}}}]
    plan = plan_path(_jsonl_session(tmp_path, other, False))
    written(plan)
    assert [s.kind for s in plan.sessions] == ["main", "fork"]
