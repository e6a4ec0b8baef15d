"""Gemini CLI's logs.json (the prompts of every session of a project) and the project
temp directory as Gemini CLI lays it out (~/.gemini/tmp/<projectHash>/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main as main_cli
from engine.importers.base import ImportInputError
from engine.importers.detect import detect, plan_path
from engine.importers.gemini import plan_gemini
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

TMP = FIXTURES / "gemini-tmp"
V0 = FIXTURES / "gemini-logs-v0" / "logs.json"


def texts(store: object, sid: str) -> list[tuple[str, list[str]]]:
    return [(m.info.role, [p.text for p in m.parts if isinstance(p, v.TextPart)])
            for m in at(store, sid).messages()]  # type: ignore[arg-type]


def test_logs_json_is_detected_by_name_and_by_shape(tmp_path: Path) -> None:
    assert detect(TMP / "logs.json") == "gemini"
    renamed = tmp_path / "prompts.json"
    renamed.write_bytes(V0.read_bytes())
    assert detect(renamed) == "gemini"
    assert [s.original_id for s in plan_gemini(renamed).sessions] == ["1748600000",
                                                                      "1748600999"]


def test_one_session_of_user_prompts_per_session_id() -> None:
    plan = plan_gemini(TMP / "logs.json")
    store = written(plan)
    by_id = {s.original_id: s.id for s in plan.sessions}
    assert texts(store, by_id["a9b20000-1111-4222-8333-444455556666"]) == [
        ("user", ["rename the module"]), ("user", ["and update the imports"])]
    # The damaged entry (messageId a string) is skipped, as Gemini CLI skips it, and said.
    assert plan.report.unmapped[
        "a logs.json entry without a valid 'messageId': not mapped"].lines == ["logs.json entry 3"]


def test_the_first_versions_numeric_session_ids() -> None:
    plan = plan_gemini(V0)
    store = written(plan)
    assert [s.original_id for s in plan.sessions] == ["1748600000", "1748600999"]
    assert texts(store, plan.sessions[0].id) == [("user", ["hello"]), ("user", ["list the files"])]
    assert at(store, plan.sessions[0].id).messages()[0].info.time.created == 1748600000000


def test_the_project_directory_as_gemini_lays_it_out() -> None:
    plan = plan_path(TMP)
    store = written(plan)
    originals = sorted(s.original_id for s in plan.sessions)
    # The session with a chat recording comes from the recording (with the replies), once;
    # the one only logs.json knows comes from logs.json; the /chat save is a session.
    assert originals == ["", "7e1c0000-1111-4222-8333-444455556666",
                         "a9b20000-1111-4222-8333-444455556666"]
    recorded = next(s for s in plan.sessions if s.original_id.startswith("7e1c"))
    assert [r for r, _ in texts(store, recorded.id)] == ["user", "assistant"]
    report = plan.report.unmapped
    assert report["a /restore snapshot (checkpoints/): not a session, not imported"].count == 1
    assert report["a file no importer recognises: not imported"].lines == [
        "logs/session-7e1c0000-1111-4222-8333-444455556666.jsonl"]


def test_the_activity_log_is_not_taken_for_a_codex_rollout() -> None:
    with pytest.raises(ImportInputError, match="activity log"):
        detect(TMP / "logs" / "session-7e1c0000-1111-4222-8333-444455556666.jsonl")


def test_an_empty_logs_json_imports_nothing_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "logs.json"
    empty.write_text("[]")  # what Gemini CLI writes when it creates the file
    plan = plan_gemini(empty)
    assert plan.sessions == []
    assert "an empty logs.json: nothing to import" in plan.report.unmapped


def test_reimport_writes_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'g.db'}"
    assert main_cli(["import", str(TMP), "--store", store]) == 0
    assert main_cli(["import", str(TMP / "logs.json"), "--store", store, "--json"]) == 0


def test_a_logs_json_of_the_wrong_shape_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "logs.json"
    bad.write_text('{"sessionId": "x"}')
    with pytest.raises(ImportInputError, match="JSON array of"):
        plan_gemini(bad)


_value = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                   st.lists(st.integers(), max_size=2))
_entry = st.fixed_dictionaries({}, optional={
    "sessionId": st.one_of(st.sampled_from(["s1", "s2"]), _value),
    "messageId": st.one_of(st.integers(0, 3), _value),
    "timestamp": st.one_of(st.just("2025-11-02T10:00:01Z"), _value),
    "type": st.one_of(st.just("user"), _value),
    "message": st.one_of(st.text(max_size=8), _value)})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.one_of(_entry, _value), max_size=6))
def test_junk_entries_never_crash_and_lose_no_valid_prompt(tmp_path: Path,
                                                           entries: list[object]) -> None:
    f = tmp_path / "logs.json"
    f.write_text(json.dumps([{"sessionId": "ok", "messageId": 0, "type": "user",
                              "timestamp": "2025-11-02T10:00:00Z", "message": "kept"},
                             *entries]))
    plan = plan_gemini(f)
    store = written(plan)
    ok = next(s for s in plan.sessions if s.original_id == "ok")
    assert texts(store, ok.id)[0] == ("user", ["kept"])
