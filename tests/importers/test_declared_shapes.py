"""Foreign shapes are declared as msgspec Structs: a field of the wrong type is refused
with its JSON path (strict), or its line skipped and listed (``--lenient``), never
imported with a value made up from it; what the tool may write in any shape (a block
or record type convlog does not map) still imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import import_same_bytes
from engine.importers.base import ImportInputError
from engine.importers.claude_code import plan_claude_code
from engine.importers.qcli import plan_qcli

ENV = {"sessionId": "s", "isSidechain": False, "cwd": "/w", "version": "2.1.100",
       "timestamp": "2026-09-01T10:00:00.000Z"}


def _write(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({**ENV, **x}) + "\n" for x in lines))
    return path


def _call(input_value: Any) -> dict[str, Any]:
    return {"type": "assistant", "uuid": "a", "parentUuid": "u", "message": {
        "id": "msg_1", "role": "assistant", "model": "m", "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "reading"},
                    {"type": "thinking", "thinking": "t", "signature": "x"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read",
                     "input": input_value}]}}


PROMPT = {"type": "user", "uuid": "u", "parentUuid": None,
          "message": {"role": "user", "content": "go"}}


@pytest.mark.parametrize(("line", "path"), [
    (_call("not an object"), "`$.message.content[2].input`"),
    ({**PROMPT, "uuid": "u2", "parentUuid": "u",
      "message": {"role": "user", "content": [{"type": "text", "text": 5}]}},
     "`$.message.content[0].text`"),
    ({**PROMPT, "uuid": "u2", "parentUuid": "u", "message": {"content": 1.5}},
     "`$.message.content`"),
    ({**PROMPT, "uuid": "u2", "parentUuid": ["u"]}, "`$.parentUuid`"),
    ({**_call({}), "message": {"id": 7, "content": []}}, "`$.message.id`"),
])
def test_a_field_of_the_wrong_type_names_its_path(tmp_path: Path, line: dict[str, Any],
                                                  path: str) -> None:
    source = _write(tmp_path, PROMPT, line)
    with pytest.raises(ImportInputError) as refused:
        plan_claude_code(source)
    assert refused.value.line == 2
    assert path in refused.value.reason
    plan = plan_claude_code(source, lenient=True)  # the line is skipped and listed
    assert [n for n, _ in plan.report.skipped] == [2]
    assert path in plan.report.skipped[0][1]


def test_what_claude_code_writes_in_any_shape_still_imports(tmp_path: Path) -> None:
    """Unknown fields, a missing optional field, a content string, a block type
    convlog does not map with fields of any type, a tool_result's content of any
    tool's making, a metadata record of any shape: imported, reported."""
    source = _write(
        tmp_path,
        {**PROMPT, "newField": {"any": [1, None]}},
        {"type": "assistant", "uuid": "a", "parentUuid": "u", "message": {
            "id": "msg_1", "content": [
                {"type": "future_block", "id": [1], "input": "text", "content": 3},
                {"type": "tool_use", "id": "toolu_1", "name": "mcp__x__y", "input": {}}]}},
        {"type": "user", "uuid": "r", "parentUuid": "a", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": 5}, {"type": "resource", "uri": 1}, 7]}]}},
        {"type": "atis-latch", "sessionId": 0, "uuid": ["x"], "data": None},
        {"type": "progress", "uuid": "p", "parentUuid": "r", "data": {"type": 1}})
    plan = plan_claude_code(source)
    assert plan.report.skipped == []
    assert "assistant block type 'future_block': kept whole, not shown" in plan.report.unmapped
    assert "non-text blocks in a tool_result: kept in metadata only" in plan.report.unmapped


def test_the_same_bytes_dump_runs_on_a_sample(tmp_path: Path) -> None:
    """benchmarks/import_same_bytes.py (run before and after a change to an importer)
    dumps each input's events and report, or its error, strict and lenient."""
    inputs: list[tuple[Path, import_same_bytes.Planner]] = [
        (p, import_same_bytes._claude) for p in import_same_bytes.claude_inputs()[:3]]
    inputs += [(p, import_same_bytes._qcli) for p in import_same_bytes.qcli_inputs()[:1]]
    dumped = import_same_bytes.dump_all(inputs)
    assert len(dumped) == 4
    for entry in dumped.values():
        for mode in ("strict", "lenient"):
            assert "error" in entry[mode] or (entry[mode]["sessions"] and all(
                s["events"] > 0 for s in entry[mode]["sessions"].values()))
    again = import_same_bytes.dump_all(inputs)
    assert again == dumped  # deterministic: two runs of one tree compare equal


QCLI_SAVE = Path(__file__).resolve().parents[1] / "fixtures/transcripts/qcli-v1.14-objects.json"


def _qcli_save(tmp_path: Path, change: Any) -> Path:
    data = json.loads(QCLI_SAVE.read_text())
    change(data)
    path = tmp_path / "q.json"
    path.write_text(json.dumps(data))
    return path


def _set(path: str, value: Any) -> Any:
    def change(data: Any) -> None:
        *keys, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in keys:
            data = data[key]
        data[last] = value
    return change


@pytest.mark.parametrize(("field", "value", "path"), [
    ("transcript", ["> hello", 5], "`$.transcript[1]`"),
    # msgspec writes an object key of a dict as [...]
    ("tools.native___.0.ToolSpecification.name", 7, "`$.tools[...][0][...].name`"),
    ("history.1.user.content.ToolUseResults.tool_use_results.0.content", "text",
     "`$.history[1].user.content.ToolUseResults.tool_use_results[0].content`"),
    ("history.2.request_metadata", {"request_start_timestamp_ms": "soon"},
     "`$.history[2].request_metadata.request_start_timestamp_ms`"),
    ("file_line_tracker", {"a.py": {"after_fswrite_lines": "3"}},
     "`$.file_line_tracker[...].after_fswrite_lines`"),
    ("context_manager", {"paths": [1]}, "`$.context_manager.paths[0]`"),
])
def test_a_qcli_field_of_the_wrong_type_names_its_path(tmp_path: Path, field: str,
                                                       value: Any, path: str) -> None:
    """A Q CLI save is one JSON document: the refusal names the field by its JSON path
    (before, a TypeError's text, or a wrong value caught only in the event it made)."""
    source = _qcli_save(tmp_path, _set(field, value))
    with pytest.raises(ImportInputError) as refused:
        plan_qcli(source)
    assert path in refused.value.reason


def test_what_qcli_writes_beside_the_declared_fields_still_imports(tmp_path: Path) -> None:
    """Unknown fields anywhere are ignored by the shapes (and reported where they were)."""
    def change(data: Any) -> None:
        data["history"][0]["user"]["future"] = {"any": [1]}
        data["history"][0]["assistant"]["ToolUse"]["tool_uses"][0]["extra"] = 3
        data["file_line_tracker"] = {"a.py": {"after_fswrite_lines": 2, "new": None}}
    plan = plan_qcli(_qcli_save(tmp_path, change))
    assert plan.sessions
