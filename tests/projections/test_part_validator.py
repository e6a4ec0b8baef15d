"""The seed's PartValidator (section 4.3) and the field tables it checks (section 3).

Two directions: every part and message the WithParts projection shows passes it, for
any session (so the projection writes the seed's fields), and every way of breaking a
field is found, named by the seed's error type and rule.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from engine import events as ev
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections import views as v
from projections.part_validator import (
    Problem,
    is_reasoning_part,
    is_step_finish_part,
    is_step_start_part,
    is_text_part,
    is_tool_part,
    validate_message,
    validate_part,
)
from projections.withparts import WithPartsProjection
from tests.support.render_sessions import sessions

JSON = dict[str, Any]
TOKENS = ev.Tokens(input=1, output=2, reasoning=3, cache=ev.CacheTokens(read=4, write=5))


def one_of_each() -> tuple[Session, WithPartsProjection, str]:
    """A completed assistant message with every seed part type and every final ToolState."""
    s = Session.create(MemoryStore(), clock=StepClock())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    s.user_message("read it", agent="build", model=ev.ModelRef(provider_id="p", model_id="m"))
    mid = s.start_message("assistant", path=ev.PathInfo(cwd="/r", root="/r"))
    s.start_step(mid, snapshot="s1")
    s.end_part(s.add_reasoning(mid, "thinking"))
    s.add_text(mid, "answer", streaming=False)
    s.add_file(mid, "text/plain", "file:///r/a.txt", filename="a.txt")
    done = s.add_tool(mid, "c1", "read", raw='{"p": 1}')
    s.start_tool(done, title="read a")
    s.complete_tool(done, "contents", title="read a", metadata={"lines": 1},
                    attachments=[ev.Attachment(part_id="att-1", mime="image/png",
                                               url="data:image/png;base64,AA==")])
    failed = s.add_tool(mid, "c2", "bash", raw="{}")
    s.start_tool(failed)
    s.fail_tool(failed, "exit 1")
    s.fail_tool(s.add_tool(mid, "c3", "bash", raw=""), "stopped", kind="aborted")
    s.finish_step(mid, "tool-calls", cost=0.1, tokens=TOKENS)
    s.complete_message(mid, cost=0.1, tokens=TOKENS)
    return s, proj, mid


def part_json(proj: WithPartsProjection, mid: str, kind: str, n: int = 0) -> JSON:
    msg = next(m for m in proj.to_json() if m["info"]["id"] == mid)
    return [p for p in msg["parts"] if p["type"] == kind][n]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- what we show passes


def test_every_part_of_the_seed_passes() -> None:
    _, proj, _ = one_of_each()
    for msg in proj.messages():
        assert validate_message(msg).problems == ()
        for part in msg.parts:
            assert validate_part(part).valid, part


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_any_projected_session_passes_the_seeds_part_validator(
        built: tuple[Session, list[v.WithParts]]) -> None:
    session, history = built
    started = {e.message_id: e for e in session.store.read(session.id)
               if isinstance(e, ev.MessageStarted)}
    for msg in history:
        # A model or path the log never recorded is the only thing missing.
        e = started[msg.info.id]
        unrecorded = ({"info.model"} if e.role == "user" and e.model is None else set()) | (
            {"info.path"} if e.role == "assistant" and e.path is None else set())
        problems = validate_message(msg).problems
        assert {(p.error, p.field) for p in problems} == {
            ("MissingRequiredField", f) for f in unrecorded}
        # BR-14: time.completed is set exactly when the message completed.
        completed = session.lifecycle.messages[msg.info.id].state == "completed"
        assert (msg.info.time.completed is not None) == completed


def test_type_guards() -> None:
    _, proj, mid = one_of_each()
    parts = proj.message(mid).parts
    assert [type(p) for p in parts if is_text_part(p)] == [v.TextPart]
    assert [type(p) for p in parts if is_reasoning_part(p)] == [v.ReasoningPart]
    assert len([p for p in parts if is_tool_part(p)]) == 3
    assert len([p for p in parts if is_step_start_part(p)]) == 1
    assert len([p for p in parts if is_step_finish_part(p)]) == 1


# --------------------------------------------------------------------------- what breaks is found

REQUIRED = [
    ("text", 0, ["id", "sessionID", "messageID", "type", "text"]),
    ("reasoning", 0, ["text", "time", "time.start"]),
    ("tool", 0, ["callID", "tool", "state", "state.input", "state.output", "state.title",
                 "state.metadata", "state.time", "state.time.start", "state.time.end"]),
    ("tool", 1, ["state.error", "state.time.end"]),
    ("step-finish", 0, ["reason", "cost", "tokens", "tokens.input", "tokens.output",
                        "tokens.reasoning", "tokens.cache", "tokens.cache.read",
                        "tokens.cache.write"]),
    ("file", 0, ["mime", "url"]),
]


def _drop(obj: JSON, path: str) -> JSON:
    out = copy.deepcopy(obj)
    *outer, last = path.split(".")
    inner = out
    for key in outer:
        inner = inner[key]
    del inner[last]
    return out


@pytest.mark.parametrize(("kind", "n", "field"),
                         [(k, n, f) for k, n, fields in REQUIRED for f in fields])
def test_a_missing_required_field_is_missing_required_field(kind: str, n: int,
                                                            field: str) -> None:
    _, proj, mid = one_of_each()
    broken = _drop(part_json(proj, mid, kind, n), field)
    problems = validate_part(broken).problems
    assert [(p.error, p.field) for p in problems] == [("MissingRequiredField", field)]


def test_a_pending_tool_without_raw_breaks_br_06() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    mid = s.start_message("assistant")
    s.add_tool(mid, "c1", "bash", raw="{}")
    pending = part_json(proj, mid, "tool")
    assert validate_part(pending).valid
    (problem,) = validate_part(_drop(pending, "state.raw")).problems
    assert (problem.error, problem.rule, problem.field) == (
        "MissingRequiredField", "BR-06", "state.raw")


def _broken(kind: str, n: int, change: dict[str, Any]) -> tuple[Problem, ...]:
    _, proj, mid = one_of_each()
    part = copy.deepcopy(part_json(proj, mid, kind, n))
    for path, value in change.items():
        *outer, last = path.split(".")
        inner = part
        for key in outer:
            inner = inner[key]
        inner[last] = value
    return validate_part(part).problems


@pytest.mark.parametrize(("kind", "n", "change", "rule"), [
    ("text", 0, {"id": ""}, "BR-01"),
    ("text", 0, {"type": "txt"}, "BR-03"),
    ("text", 0, {"type": 3}, "BR-03"),
    ("text", 0, {"sessionID": "not-a-uuid"}, "BR-04"),
    ("text", 0, {"messageID": "msg_1"}, "BR-04"),
    ("tool", 0, {"state.status": "done"}, "BR-05"),
    ("tool", 0, {"state.time.end": 0}, "BR-08"),
    ("tool", 0, {"state.output": ""}, "BR-09"),
    ("tool", 1, {"state.error": "  "}, "BR-10"),
    ("tool", 1, {"state.time.start": "soon"}, "BR-07"),
    ("step-finish", 0, {"tokens.cache.read": True}, "BR-13"),
])
def test_a_broken_field_is_a_part_validation_error_naming_its_rule(
        kind: str, n: int, change: dict[str, Any], rule: str) -> None:
    (problem,) = _broken(kind, n, change)
    assert (problem.error, problem.rule) == ("PartValidationError", rule)


def test_br_02_a_part_id_twice_in_a_message() -> None:
    _, proj, mid = one_of_each()
    msg = copy.deepcopy(next(m for m in proj.to_json() if m["info"]["id"] == mid))
    msg["parts"][1]["id"] = msg["parts"][0]["id"]
    (problem,) = validate_message(msg).problems
    assert (problem.rule, problem.field) == ("BR-02", "parts[1].id")


@pytest.mark.parametrize(("role", "field"), [
    ("user", "info.agent"), ("user", "info.model"), ("user", "info.model.modelID"),
    ("assistant", "info.agent"), ("assistant", "info.path"), ("assistant", "info.path.root"),
    ("assistant", "info.cost"), ("assistant", "info.tokens"),
])
def test_a_message_info_without_a_required_field(role: str, field: str) -> None:
    _, proj, _ = one_of_each()
    msg = next(m for m in proj.to_json() if m["info"]["role"] == role)
    assert validate_message(msg).valid
    (problem,) = validate_message(_drop(msg, field)).problems
    assert (problem.error, problem.field) == ("MissingRequiredField", field)


def test_a_message_recorded_without_model_or_path_reports_them_missing() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    user = s.user_message("hi")
    assistant = s.start_message("assistant")
    assert [(p.error, p.field) for p in validate_message(proj.message(user)).problems] == [
        ("MissingRequiredField", "info.model")]
    assert [(p.error, p.field) for p in validate_message(proj.message(assistant)).problems] == [
        ("MissingRequiredField", "info.path")]


def test_br_13_an_assistant_message_without_cache_tokens() -> None:
    _, proj, mid = one_of_each()
    msg = _drop(next(m for m in proj.to_json() if m["info"]["id"] == mid),
                "info.tokens.cache")
    (problem,) = validate_message(msg).problems
    assert (problem.error, problem.rule, problem.field) == (
        "MissingRequiredField", "BR-13", "info.tokens.cache")
