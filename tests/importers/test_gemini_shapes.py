"""Gemini CLI: every record is read as a declared ``_Record`` where it is read (a line,
a rewritten history, a session document's messages), so ``thoughts`` and ``toolCalls``
that are no list, or ``tokens`` that is no object, are refused naming the file, the
line and the JSON path. Before, they were read as none where the record was mapped,
and a ``toolCalls`` of 5 in a rewritten history (``$set`` of messages) crashed the
import with an internal ``TypeError``. What Gemini CLI writes still imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.importers.base import ImportInputError
from engine.importers.gemini import plan_gemini
from tests.importers.support import FIXTURES

SESSION = FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.jsonl"
LINES = [json.loads(line) for line in SESSION.read_text().splitlines()]


def _write(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "session-x.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(("field", "value", "path"), [
    ("thoughts", {"subject": "s"}, "got `object` - at `$.thoughts`"),
    ("toolCalls", "run", "got `str` - at `$.toolCalls`"),
    ("tokens", [1, 2], "got `array` - at `$.tokens`"),
])
def test_a_record_of_the_wrong_shape_names_line_and_path(tmp_path: Path, field: str,
                                                         value: Any, path: str) -> None:
    lines = [dict(x) for x in LINES]
    lines[2][field] = value  # the third line: record m2 (replaced by the fourth: checked
    # where it is read all the same)
    with pytest.raises(ImportInputError) as refused:
        plan_gemini(_write(tmp_path, lines))
    assert refused.value.line == 3
    assert path in str(refused.value)


def test_a_rewritten_history_of_the_wrong_shape_is_refused_not_a_crash(
        tmp_path: Path) -> None:
    """A ``$set`` of messages is compared with the records read so far; one whose
    ``toolCalls`` is a number failed there with ``TypeError: 'int' object is not
    iterable``."""
    records = [dict(x) for x in LINES[1:4]]
    records[1]["toolCalls"] = 5
    lines = [*LINES[:4], {"$set": {"messages": records}}]
    with pytest.raises(ImportInputError) as refused:
        plan_gemini(_write(tmp_path, lines))
    assert refused.value.line == 5
    assert "got `int` - at `$.toolCalls`" in str(refused.value)


def test_a_session_document_of_the_wrong_shape_names_the_path(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.json"
                       ).read_text())
    data["messages"][1]["thoughts"] = "thinking"
    path = tmp_path / "session-x.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ImportInputError, match=r"got `str` - at `\$\.thoughts`"):
        plan_gemini(path)


def test_what_gemini_writes_beside_the_declared_fields_still_imports(tmp_path: Path) -> None:
    """Unknown fields, missing optional ones, a call that is not an object (reported),
    a thought that is not an object (skipped): imported."""
    lines = [dict(x) for x in LINES]
    lines[3] = {**lines[3], "newField": {"any": [1]}, "thoughts": [7, *lines[3]["thoughts"]],
                "toolCalls": ["not a call"]}  # the fourth line: record m2 as it ends
    lines[3].pop("tokens", None)
    plan = plan_gemini(_write(tmp_path, lines))
    assert plan.sessions
    assert "a tool call without a name: not mapped" in plan.report.unmapped
