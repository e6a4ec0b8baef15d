"""Parallel tool calls in Claude Code make a tree, not a rewind (anthropics/claude-code
#37779): each ``tool_use`` line is the parent of the next call's line *and* of its own
result's line. The importer took the result as a rewind: a fork holding the result,
and in the session the tool ``running`` forever with its message open."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.claude_code import plan_claude_code
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

SID = "5e55a000-0000-4000-8000-000000000001"


def _rec(uuid: str, parent: str | None, second: int, **fields: Any) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": SID, "isSidechain": False,
            "timestamp": f"2025-10-05T10:{second // 60:02d}:{second % 60:02d}.000Z", **fields}


def _parallel(calls: int, results_in_order: bool) -> list[dict[str, Any]]:
    """A prompt, ``calls`` tool_use lines of one message (each the parent of the next),
    each result a child of its own call's line, then the answer after the last result."""
    lines = [_rec("u0", None, 0, type="user", message={"role": "user", "content": "go"})]
    parent = "u0"
    for i in range(calls):
        lines.append(_rec(f"c{i}", parent, 1 + i, type="assistant", message={
            "id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use" if i == calls - 1 else None,
            "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Read",
                         "input": {"file_path": f"f{i}"}}]}))
        parent = f"c{i}"
    order = range(calls) if results_in_order else reversed(range(calls))
    for n, i in enumerate(order):
        lines.append(_rec(f"r{i}", f"c{i}", 20 + n, type="user", message={
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                         "content": f"text {i}"}]}))
    lines.append(_rec("a1", f"r{calls - 1}", 40, type="assistant", message={
        "id": "msg_2", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]}))
    return lines


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.booleans(), st.booleans())
def test_parallel_calls_settle_in_one_session(calls: int, in_order: bool,
                                              shuffled: bool) -> None:
    lines = _parallel(calls, in_order)
    if shuffled:  # the DAG, not the line order, decides
        lines = lines[:1] + list(reversed(lines[1:]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{SID}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
        plan = plan_claude_code(path)
    assert [s.kind for s in plan.sessions] == ["main"]
    history = at(written(plan), plan.sessions[0].id).messages()
    tools = [p for m in history for p in m.parts if isinstance(p, v.ToolPart)]
    assert [t.call_id for t in tools] == [f"toolu_{i}" for i in range(calls)]
    for i, tool in enumerate(tools):
        assert isinstance(tool.state, v.ToolStateCompleted)
        assert tool.state.output == f"text {i}"
    assert all(m.info.time.completed is not None for m in history)
    assert not any("no result" in k for k in plan.report.unmapped)
