"""Codex's thread_rolled_back: the dropped turns stay in the log, what follows is a fork."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.codex import plan_codex
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written


def rollout(path: Path, ops: list[tuple[str, object]]) -> Path:
    lines = [{"type": "session_meta", "payload": {"id": "019dc0a1-0000-7000-8000-00000000abcd",
                                                   "cwd": "/app", "cli_version": "0.130.0"}}]
    for kind, value in ops:
        if kind == "turn":
            lines += [
                {"type": "event_msg", "payload": {"type": "task_started"}},
                {"type": "response_item", "payload": {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": value}]}},
                {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": f"re: {value}"}]}},
                {"type": "event_msg", "payload": {"type": "task_complete"}}]
        else:
            lines.append({"type": "event_msg", "payload": {"type": "thread_rolled_back",
                                                           "num_turns": value}})
    stamp = "2026-07-02T09:00:00.000Z"
    path.write_text("".join(json.dumps({"timestamp": stamp, **x}) + "\n" for x in lines))
    return path


def prompts(store: object, sid: str) -> list[str]:
    return [p.text for m in at(store, sid).messages()  # type: ignore[arg-type]
            if m.info.role == "user" for p in m.parts if isinstance(p, v.TextPart)]


def test_a_rollback_forks_at_the_dropped_turn(tmp_path: Path) -> None:
    path = rollout(tmp_path / "rollout-x.jsonl",
                   [("turn", "one"), ("turn", "two"), ("rollback", 1), ("turn", "three")])
    plan = plan_codex(path)
    store = written(plan)
    main, fork = plan.sessions
    assert prompts(store, main.id) == ["one", "two"]
    assert prompts(store, fork.id) == ["one", "three"]
    assert fork.parent == main.id
    replies = [p.text for m in at(store, fork.id).messages() if m.info.role == "assistant"
               for p in m.parts if isinstance(p, v.TextPart)]
    assert replies == ["re: one", "re: three"]


def test_a_rollback_of_more_turns_than_recorded_is_reported(tmp_path: Path) -> None:
    plan = plan_codex(rollout(tmp_path / "rollout-x.jsonl", [("turn", "one"), ("rollback", 3)]))
    assert len(plan.sessions) == 1
    assert "thread_rolled_back of 3 turns (1 recorded): not applied" in plan.report.unmapped


_ops = st.lists(st.one_of(st.tuples(st.just("turn"), st.sampled_from("abcdef")),
                          st.tuples(st.just("rollback"), st.integers(0, 3))), max_size=10)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_every_session_shows_the_turns_left_at_its_end(tmp_path: Path,
                                                       ops: list[tuple[str, object]]) -> None:
    plan = plan_codex(rollout(tmp_path / "rollout-x.jsonl", ops))
    store = written(plan)
    kept: list[str] = []
    ends: list[list[str]] = []  # what each session holds when the next one starts
    for kind, value in ops:
        if kind == "turn":
            kept.append(str(value))
        elif isinstance(value, int) and 0 < value <= len(kept):
            ends.append(list(kept))
            del kept[len(kept) - value:]
    ends.append(kept)
    assert [prompts(store, s.id) for s in plan.sessions] == ends
