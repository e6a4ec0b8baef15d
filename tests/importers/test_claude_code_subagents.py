"""Subagents in a directory of several Claude Code sessions: each child session belongs to
the session it ran in (its lines' ``sessionId``), whichever layout wrote it
(``agent-<id>.jsonl`` beside the sessions, as 2.0 did, or ``<session>/subagents/``).
Every child was the child of the directory's first session."""

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


def _session(sid: str, day: int, word: str) -> list[dict[str, Any]]:
    def rec(uuid: str, parent: str | None, second: int, **fields: Any) -> dict[str, Any]:
        return {"uuid": f"{sid}-{uuid}", "parentUuid": parent and f"{sid}-{parent}",
                "sessionId": sid, "isSidechain": False,
                "timestamp": f"2025-10-{day:02d}T10:00:{second:02d}Z", **fields}

    return [
        rec("u1", None, 0, type="user", message={"role": "user", "content": f"research {word}"}),
        rec("a1", "u1", 1, type="assistant", message={
            "id": f"msg_{sid}", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use", "content": [{
                "type": "tool_use", "id": f"toolu_{sid}", "name": "Task",
                "input": {"description": "look", "prompt": f"find {word}"}}]}),
        rec("r1", "a1", 9, type="user", toolUseResult={"status": "completed", "agentId": sid[:8]},
            message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{sid}", "content": word}]}),
    ]


def _agent(sid: str, day: int, word: str) -> list[dict[str, Any]]:
    base = {"sessionId": sid, "agentId": sid[:8], "isSidechain": True}
    return [
        {**base, "type": "user", "uuid": f"{sid}-s1", "parentUuid": None,
         "timestamp": f"2025-10-{day:02d}T10:00:02Z",
         "message": {"role": "user", "content": f"find {word}"}},
        {**base, "type": "assistant", "uuid": f"{sid}-s2", "parentUuid": f"{sid}-s1",
         "timestamp": f"2025-10-{day:02d}T10:00:03Z",
         "message": {"id": f"msg_s{sid}", "role": "assistant", "model": "claude-haiku",
                     "stop_reason": "end_turn", "content": [{"type": "text", "text": word}]}},
    ]


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 28), st.booleans()), min_size=1, max_size=4,
                unique_by=lambda t: t[0]))
def test_each_subagent_is_the_child_of_the_session_it_ran_in(
        sessions: list[tuple[int, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n, (day, nested) in enumerate(sessions):
            sid = f"{n:08x}-0000-4000-8000-{day:012d}"
            word = f"topic{n}"
            _write(root / f"{sid}.jsonl", _session(sid, day, word))
            agent = (root / sid / "subagents" if nested else root) / f"agent-{sid[:8]}.jsonl"
            _write(agent, _agent(sid, day, word))
        plan = plan_claude_code(root)
        store = written(plan)
    children = [s for s in plan.report.sessions if s.kind == "child"]
    assert len(children) == len(sessions)
    for child in children:
        assert child.parent is not None
        spawner = next(p for m in at(store, child.parent).messages() for p in m.parts
                       if isinstance(p, v.ToolPart))
        assert isinstance(spawner.state, v.ToolStateCompleted)
        linked = (spawner.state.metadata or {}).get("child_session") or (
            spawner.metadata or {}).get("child_session")
        assert linked == child.id
