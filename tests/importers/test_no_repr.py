"""A tool output is never Python's repr of the transcript's JSON (``{'fileDiff': ...}``):
whatever value a tool's output field holds, what convlog shows is its text or JSON.
Single quotes betray a repr: JSON never adds one that the source did not hold."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

KEYS = st.sampled_from(["output", "content", "text", "type", "fileDiff", "a"])
VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab ", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6)


def _codex(output: Any) -> list[dict[str, Any]]:
    def line(kind: str, **payload: Any) -> dict[str, Any]:
        return {"timestamp": "2025-09-03T14:00:00Z", "type": kind, "payload": payload}

    return [line("session_meta", id="0199a0b1-0000-7000-8000-00000000000a"),
            line("response_item", type="message", role="user",
                 content=[{"type": "input_text", "text": "go"}]),
            line("response_item", type="function_call", name="shell", call_id="c1",
                 arguments="{}"),
            line("response_item", type="function_call_output", call_id="c1", output=output)]


def _gemini(display: Any, response: Any) -> list[dict[str, Any]]:
    return [{"sessionId": "g1", "projectHash": "p", "startTime": "2025-10-01T09:00:00Z"},
            {"id": "m1", "timestamp": "2025-10-01T09:00:01Z", "type": "user", "content": "go"},
            {"id": "m2", "timestamp": "2025-10-01T09:00:02Z", "type": "gemini", "content": "",
             "toolCalls": [{"id": "c1", "name": "edit", "args": {}, "status": "success",
                            "resultDisplay": display,
                            "result": [{"functionResponse": {"id": "c1", "name": "edit",
                                                             "response": response}}]}]}]


def _outputs(name: str, records: list[dict[str, Any]]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        plan = plan_path(path)
        store = written(plan)
    return [p.state.output for s in plan.sessions for m in at(store, s.id).messages()
            for p in m.parts if isinstance(p, v.ToolPart)
            and isinstance(p.state, v.ToolStateCompleted)]


@settings(max_examples=80, deadline=None)
@given(VALUE)
def test_a_codex_output_of_any_shape_is_text_or_json(output: Any) -> None:
    for text in _outputs("rollout-2025-09-03T14-00-00-x.jsonl", _codex(output)):
        assert "'" not in text or "'" in json.dumps(output), text


@settings(max_examples=80, deadline=None)
@given(VALUE, VALUE)
def test_a_gemini_result_of_any_shape_is_text_or_json(display: Any, response: Any) -> None:
    for text in _outputs("session-x.jsonl", _gemini(display, response)):
        assert "'" not in text or "'" in json.dumps([display, response]), text
