"""A JSON number past 64 bits in a free-form value (a tool call's arguments, a typed tool
result kept in metadata) is kept as the same int (issue 24); before, it was kept as its
decimal text (and before that the store's door refused the whole import for it)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.detect import plan_path
from engine.importers.write import write_plan
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

ENV = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s",
       "version": "2.1.100", "timestamp": "2026-09-01T10:00:00.000Z"}


def _session(tmp_path: Path, arg: object, typed: object) -> Path:
    lines = [
        {**ENV, "parentUuid": None, "uuid": "u1", "type": "user",
         "message": {"role": "user", "content": "multiply"}},
        {**ENV, "parentUuid": "u1", "uuid": "u2", "type": "assistant",
         "message": {"id": "msg_1", "role": "assistant", "model": "m", "stop_reason": "tool_use",
                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__calc__mul",
                                  "input": {"a": arg, "b": [arg]}}]}},
        {**ENV, "parentUuid": "u2", "uuid": "u3", "type": "user",
         "toolUseResult": {"structuredContent": {"product": typed}},
         "message": {"role": "user", "content": [{"type": "tool_result",
                                                  "tool_use_id": "toolu_1",
                                                  "content": str(typed)}]}},
    ]
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_big_product_is_kept_as_the_same_int(tmp_path: Path) -> None:
    big = 2**70
    plan = plan_path(_session(tmp_path, -(2**64), big))
    store = written(plan)
    tool = next(p for m in at(store, plan.sessions[0].id).messages() for p in m.parts
                if isinstance(p, v.ToolPart))
    assert tool.state.input == {"a": -(2**64), "b": [-(2**64)]}
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == str(big)
    kept = tool.state.metadata["claude_code"]["toolUseResult"]
    assert kept == {"structuredContent": {"product": big}}
    assert not plan.report.unmapped


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(-(2**80), 2**80), st.integers(-(2**80), 2**80))
def test_any_integer_in_a_free_form_value_imports(tmp_path: Path, arg: int,
                                                  typed: int) -> None:
    plan = plan_path(_session(tmp_path, arg, typed))
    store = written(plan)
    tool = next(p for m in at(store, plan.sessions[0].id).messages() for p in m.parts
                if isinstance(p, v.ToolPart))
    assert tool.state.input == {"a": arg, "b": [arg]}
    assert isinstance(tool.state, v.ToolStateCompleted)
    kept = tool.state.metadata["claude_code"]["toolUseResult"]
    assert kept == {"structuredContent": {"product": typed}}


def test_a_reimport_of_a_file_with_a_big_number_writes_nothing(tmp_path: Path) -> None:
    path = _session(tmp_path, 2**64, 2**65)
    store = written(plan_path(path))
    again = plan_path(path)
    write_plan(store, again)
    assert again.report.written == 0
