"""Gemini CLI's newer JSONL records carry the API's parts (issue 23, class 8): a model
record's ``functionCall`` parts answered by a ``user`` record of ``functionResponse``
parts, and ``thought`` parts. They were reported "not mapped" (119 in one real
session): the tool calls were lost, an empty user message came per tool round, and
the thinking was glued onto the answer."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.gemini import plan_gemini
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written


def _lines(calls: int, order: list[int], errors: list[bool]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"sessionId": "g-fp", "projectHash": "p", "startTime": "2026-10-01T09:00:00.000Z",
         "kind": "main"},
        {"id": "u1", "timestamp": "2026-10-01T09:00:01.000Z", "type": "user",
         "content": [{"text": "find the bug"}]},
        {"id": "g1", "timestamp": "2026-10-01T09:00:02.000Z", "type": "gemini",
         "model": "gemini-2.5-pro", "content": [
             {"text": "Let me look.", "thought": True},
             *({"functionCall": {"id": f"fc{i}", "name": "read_file",
                                 "args": {"path": f"f{i}.py"}}} for i in range(calls))]},
        {"id": "u2", "timestamp": "2026-10-01T09:00:03.000Z", "type": "user", "content": [
            {"functionResponse": {"id": f"fc{i}", "name": "read_file", "response": (
                {"error": f"no f{i}"} if errors[i] else {"output": f"text {i}"})}}
            for i in order]},
        {"id": "g2", "timestamp": "2026-10-01T09:00:04.000Z", "type": "gemini",
         "model": "gemini-2.5-pro", "content": [{"text": "Found it."}]},
    ]
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.just(n), st.permutations(range(n)), st.lists(st.booleans(), min_size=n, max_size=n))))
def test_function_parts_are_tool_calls_settled_by_their_answers(
        shape: tuple[int, list[int], list[bool]]) -> None:
    calls, order, errors = shape
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session-x.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in _lines(calls, order, errors)))
        plan = plan_gemini(path)
    store = written(plan)
    history = at(store, plan.sessions[0].id).messages()
    assert [m.info.role for m in history] == ["user", "assistant", "assistant"]
    tools = [p for p in history[1].parts if isinstance(p, v.ToolPart)]
    assert [t.call_id for t in tools] == [f"fc{i}" for i in range(calls)]
    assert [t.state.TAG for t in tools] == ["error" if e else "completed" for e in errors]
    reasoning = [p.text for p in history[1].parts if isinstance(p, v.ReasoningPart)]
    texts = [p.text for m in history for p in m.parts if isinstance(p, v.TextPart)]
    assert reasoning == ["Let me look."]
    assert texts == ["find the bug", "Found it."]
    assert not any("not mapped" in k and "function" in k for k in plan.report.unmapped)


def test_a_resumed_sessions_first_history_is_the_session_not_a_fork(tmp_path: Path) -> None:
    """Gemini CLI 0.61 opens each --resume with a header and a $set of the history so
    far: the first one made an empty main session and a fork holding everything."""
    head = {"sessionId": "g-res", "projectHash": "p", "startTime": "2026-11-28T11:43:12.996Z",
            "kind": "main"}
    history = [{"id": "u1", "timestamp": "2026-11-28T11:43:13.000Z", "type": "user",
                "content": [{"text": "hello"}]},
               {"id": "g1", "timestamp": "2026-11-28T11:43:14.000Z", "type": "gemini",
                "model": "gemini-2.5-pro", "content": "hi"}]
    path = tmp_path / "session-2026-11-28T11-43-g-res.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, {"$set": {
        "messages": history}}]))
    plan = plan_gemini(path)
    store = written(plan)
    assert [s.kind for s in plan.sessions] == ["main"]
    texts = [p.text for m in at(store, plan.sessions[0].id).messages() for p in m.parts
             if isinstance(p, v.TextPart)]
    assert texts == ["hello", "hi"]
