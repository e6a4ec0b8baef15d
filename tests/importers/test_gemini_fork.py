"""A Gemini CLI fork's session (IBM Bob shell): the model's records are ``type:
"bob-shell"``, and ``thoughts`` holds every streamed snapshot of a thought. The replies,
tool calls and reasoning are imported; the snapshots collapse to the text they grew to."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.detect import detect, plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

SESSION = next((FIXTURES / "gemini-fork" / "chats").glob("session-*.json"))


def _messages(path: Path) -> list[v.WithParts]:
    plan = plan_path(path)
    return at(written(plan), plan.sessions[0].id).messages()


def test_the_forks_records_are_the_models_turns() -> None:
    assert detect(SESSION) == "gemini"
    history = _messages(SESSION)
    assert [m.info.role for m in history] == ["user", "assistant", "assistant"]
    first, second = history[1], history[2]
    assert isinstance(first.info, v.AssistantInfo)
    assert (first.info.provider_id, first.info.model_id) == ("bob-shell", "premium")
    tool = next(p for p in first.parts if isinstance(p, v.ToolPart))
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "07:40 Main St\n08:10 Main St\n"
    assert [p.text for p in second.parts if isinstance(p, v.TextPart)] == [
        "The first bus leaves at 7:40 from Main St."]


def test_streamed_thought_snapshots_collapse_to_the_text_they_grew_to() -> None:
    history = _messages(SESSION)
    first = [p.text for p in history[1].parts if isinstance(p, v.ReasoningPart)]
    assert first == ["The user asks for the bus times. I should read timetable.txt first."]
    # The subject streamed as "**Checking times" before it had its own field: kept.
    second = [p.text for p in history[2].parts if isinstance(p, v.ReasoningPart)]
    assert second == ["**Checking times", "The 7:40 bus is the first."]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["", "Plan", "Check"]),
                          st.text("ab .", max_size=12)), max_size=12),
       st.sampled_from(["gemini", "bob-shell", "other-cli"]))
def test_no_thought_text_is_lost(tmp_path: Path, thoughts: list[tuple[str, str]],
                                 kind: str) -> None:
    """Only a thought whose next one has the same subject and starts with its text is
    dropped: every description is still a prefix of a kept one with its subject."""
    record = {"id": "m2", "timestamp": "2026-05-17T14:10:31Z", "type": kind, "content": "ok",
              "thoughts": [{"subject": s, "description": d} for s, d in thoughts],
              "model": "m"}
    doc = {"sessionId": "s", "projectHash": "p", "startTime": "2026-05-17T14:10:27Z",
           "messages": [{"id": "m1", "timestamp": "2026-05-17T14:10:27Z", "type": "user",
                         "content": "go"}, record]}
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "session-x.json"
    path.write_text(json.dumps(doc))
    parts = [p for p in _messages(path)[1].parts if isinstance(p, v.ReasoningPart)]
    kept = [((p.metadata or {})["gemini"].get("subject"), p.text) for p in parts]
    for subject, text in thoughts:
        assert any(s == subject and k.startswith(text) for s, k in kept), (subject, text)
    assert len(kept) <= len(thoughts)
