"""Q CLI: every /save schema generation imports; junk is a typed error, never a crash."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import ConvlogError
from engine.importers.base import ImportInputError
from engine.importers.qcli import QCliFormatError, events_from_qcli, import_qcli, plan_qcli
from engine.importers.write import write_plan
from engine.session import Session
from engine.store import MemoryStore
from projections.qcli import messages as m
from projections.qcli.fold import ConversationFold
from tests.importers.support import FIXTURES, written

PAIRS = FIXTURES / "qcli-v1.10-pairs.json"
OBJECTS = FIXTURES / "qcli-v1.14-objects.json"


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def state_of(data: Any) -> m.ConversationState:
    session = Session.create(MemoryStore())
    import_qcli(session, json.dumps(data))
    return ConversationFold(session.id).apply_all(session.store.read(session.id)).state()


def test_an_older_save_with_pair_entries_imports() -> None:
    """It crashed with AttributeError: 'list' object has no attribute 'get'."""
    state = state_of(load(PAIRS))
    assert [e.user.prompt() for e in state.history] == [
        "what is in README.md?", None, "run the tests", None]
    assert (state.history[1].user.tool_use_results() or ())[0].content == (
        m.TextBlock("# app\nA small app."),)
    failed = (state.history[3].user.tool_use_results() or ())[0]
    assert failed.status == "Error"
    assert failed.content == (m.JsonBlock({"exit_status": "1", "stdout": "", "stderr": "no rule"}),)
    assert state.model_info == m.ModelInfo("CLAUDE_SONNET_4_20250514_V1_0")
    assert state.tangent_state is None
    assert state.history[0].user.timestamp == "2025-06-02T09:15:01.250+02:00"


def test_pairs_and_objects_are_the_same_conversation() -> None:
    pairs = load(PAIRS)
    objects = copy.deepcopy(pairs)
    objects["history"] = [{"user": u, "assistant": a, "request_metadata": None}
                          for u, a in pairs["history"]]
    assert state_of(pairs) == state_of(objects)


def test_a_newer_save_with_tangent_checkpoints_and_mcp_flag_imports() -> None:
    data = load(OBJECTS)
    state = state_of(data)
    assert state.tangent_state is not None
    assert len(state.tangent_state.main_history) == 4
    assert len(state.history) == 5
    assert state.mcp_enabled is False
    assert state.model_info is not None
    assert state.model_info.context_window_tokens == 200000
    assert state.checkpoint_manager is not None
    assert [c.tag for c in state.checkpoint_manager.checkpoints] == ["1"]
    assert state.history[0].request_metadata is not None


def test_a_file_import_is_idempotent_and_reports() -> None:
    plan = plan_qcli(PAIRS)
    store = written(plan)
    assert plan.report.written == len(plan.sessions[0].events)
    assert any("legacy model" in what for what in plan.report.unmapped)
    again = plan_qcli(PAIRS)
    write_plan(store, again)
    assert again.report.written == 0
    assert again.report.existing == len(again.sessions[0].events)
    assert len(store.sessions()) == 1


def test_importing_into_a_session_twice_adds_nothing() -> None:
    session = Session.create(MemoryStore())
    first = import_qcli(session, PAIRS.read_text())
    version = session.version
    second = import_qcli(session, PAIRS.read_text())
    assert session.version == version
    assert second.seqs == first.seqs


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", "\x00\x01binary", '{"conversation_id": 1,'])
def test_bad_files_name_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "save.json"
    path.write_text(text)
    with pytest.raises(ImportInputError) as caught:
        plan_qcli(path)
    assert str(path) in str(caught.value)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "save.json"
    path.write_text('{\n"conversation_id": "c",\n"history": [,]\n}\n')
    with pytest.raises(ImportInputError) as caught:
        plan_qcli(path)
    assert caught.value.line == 3


# --------------------------------------------------------------------------- fuzzing

OPTIONAL = ("tangent_state", "checkpoint_manager", "mcp_enabled", "context_manager",
            "file_line_tracker", "transcript", "valid_history_range", "context_message_length")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_schema_variants_import_to_the_same_history(data: st.DataObject) -> None:
    """Any mix of pair and object entries, with or without the optional keys."""
    base = load(OBJECTS)
    variant = copy.deepcopy(base)
    for key in data.draw(st.sets(st.sampled_from(OPTIONAL))):
        variant.pop(key, None)
    if data.draw(st.booleans()):
        variant.pop("model_info")
        variant["model"] = "claude-sonnet-4"

    def mixed(entries: list[Any]) -> list[Any]:
        return [[e["user"], e["assistant"]] if data.draw(st.booleans(), label="pair")
                and e["request_metadata"] is None else e for e in entries]

    variant["history"] = mixed(variant["history"])
    if "tangent_state" in variant:
        variant["tangent_state"]["main_history"] = mixed(variant["tangent_state"]["main_history"])
    got, want = state_of(variant), state_of(base)
    assert [(e.user.content, e.assistant) for e in got.history] == [
        (e.user.content, e.assistant) for e in want.history]
    assert got.model_info is not None
    assert got.model_info.model_id == "claude-sonnet-4"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([PAIRS, OBJECTS]), st.data(), JSON)
def test_junk_anywhere_is_a_typed_error_or_an_import(path: Path, data: st.DataObject,
                                                     junk: Any) -> None:
    save = load(path)
    where = data.draw(st.sampled_from(_paths(save)[1:]))
    target: Any = save
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = junk
    try:
        result = events_from_qcli(save)
    except QCliFormatError:
        return
    session = Session.create(MemoryStore())
    try:
        import_qcli(session, save)
    except ConvlogError:  # the log's own rules refused it (a blank name, ...): typed, atomic
        assert session.version == 0
        return
    except Exception as exc:
        pytest.fail(f"{where} = {junk!r}: {type(exc).__name__}: {exc}")
    assert session.version == len(result.events)


@pytest.mark.parametrize("part", [0, 1, 2])
def test_a_time_out_of_datetime_range_is_a_typed_error(part: int) -> None:
    """A junk tangent start time (year -739251) raised a bare OverflowError."""
    save = load(OBJECTS)
    save["tangent_state"]["tangent_start_time"][part] = -739251 * 10**6
    with pytest.raises(QCliFormatError):
        events_from_qcli(save)



def _assistant_bodies(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The variant bodies of every assistant message of a pairs save."""
    return [next(iter(entry[1].values())) for entry in data["history"]]


def test_a_newer_saves_thinking_is_a_reasoning_part(tmp_path: Path) -> None:
    # Newer Q CLI keeps ReasoningContentForHistory on the assistant message; it was
    # dropped without a word in the report.
    data = load(PAIRS)
    thinking = {"text": "Read the README first.", "signature": "sig-1",
                "redacted_content": [], "model_id": "claude-sonnet-4"}
    _assistant_bodies(data)[0]["thinking"] = thinking
    path = tmp_path / "save.json"
    path.write_text(json.dumps(data))
    plan = plan_qcli(path)
    events = list(written(plan).read(plan.sessions[0].id))
    reasoning = [e for e in events if isinstance(e, ev.ReasoningAdded)]
    assert [e.text for e in reasoning] == ["Read the README first."]
    meta = reasoning[0].metadata or {}
    assert meta["qcli"]["thinking"] == thinking
    assert meta["anthropic"] == {"signature": "sig-1"}


@settings(max_examples=40, deadline=None)
@given(st.data(), st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=8))
def test_no_assistant_field_is_dropped_silently(data: st.DataObject, key: str,
                                                value: str) -> None:
    save = load(PAIRS)
    body = data.draw(st.sampled_from(_assistant_bodies(save)), label="assistant")
    if key in body:
        return
    marker = f"MARK-{value}"
    body[key] = marker
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "save.json"
        path.write_text(json.dumps(save))
        try:
            plan = plan_qcli(path)
        except ImportInputError:
            return  # refused as a whole: nothing half-imported
    events = json.dumps([msgspec.to_builtins(e) for s in plan.sessions for e in s.events])
    reported = any(repr(key) in item for item in plan.report.unmapped)
    assert marker in events or reported, key


def _objects_save() -> dict[str, Any]:
    """The v1.14 save without its tangent and checkpoints (which hold copies of the
    history): an edit to the history is then the only reading of that entry."""
    data = load(FIXTURES / "qcli-v1.14-objects.json")
    del data["tangent_state"], data["checkpoint_manager"]
    return data


def test_a_tool_result_without_its_id_is_refused_naming_the_entry() -> None:
    data = _objects_save()
    del data["history"][1]["user"]["content"]["ToolUseResults"]["tool_use_results"][0][
        "tool_use_id"]
    with pytest.raises(QCliFormatError, match="entry 0: a tool result needs a tool_use_id"):
        events_from_qcli(data)


def test_a_tool_use_without_an_id_or_name_is_refused_naming_the_entry() -> None:
    for key in ("id", "name"):
        data = _objects_save()
        del data["history"][0]["assistant"]["ToolUse"]["tool_uses"][0][key]
        with pytest.raises(QCliFormatError, match="entry 0: a tool use needs an id and a name"):
            events_from_qcli(data)


def test_missing_orig_args_reads_as_args_and_a_null_one_stays_null() -> None:
    def orig_args(value: Any) -> Any:
        data = _objects_save()
        use = data["history"][0]["assistant"]["ToolUse"]["tool_uses"][0]
        if value is _MISSING:
            del use["orig_args"]
        else:
            use["orig_args"] = value
        added = [e for e in events_from_qcli(data).events if isinstance(e, ev.ToolAdded)]
        return (added[0].metadata or {})["orig_args"], use["args"]

    got, args = orig_args(_MISSING)
    assert got == args
    assert args
    assert orig_args(None)[0] is None


_MISSING = object()
