"""Q CLI's saved JSON: read and write it, import it as events that replay to the same state,
export it back, and report what does not map."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.adapters.qcli_import import QCliFormatError, events_from_qcli, import_qcli
from engine.session import Session
from engine.store import MemoryStore
from projections.qcli import messages as m
from projections.qcli.fold import ConversationFold
from projections.qcli.serialize import (
    SCHEMA_KEY,
    export_qcli,
    from_json,
    from_json_obj,
    time_array,
    time_from_array,
    to_json,
    to_json_obj,
)
from tests.support.qcli_helpers import Convo

ENV = {"env_state": {"operating_system": "macos", "current_working_directory": "/work/app"}}


def imported(data: dict[str, Any] | str) -> tuple[m.ConversationState, tuple[str, ...], Session]:
    store = MemoryStore()
    session = Session.create(store)
    result = import_qcli(session, data if isinstance(data, str) else json.dumps(data))
    assert result.seqs == tuple(range(1, len(result.events) + 1))
    # Replay from the store, not a live subscriber: the log alone rebuilds the state.
    state = ConversationFold(session.id).apply_all(store.read(session.id)).state()
    return state, result.unmapped, session


def round_trip(c: Convo) -> tuple[m.ConversationState, m.ConversationState, tuple[str, ...]]:
    exported = export_qcli(c.state)
    state, unmapped, _ = imported(exported)
    return state, from_json_obj(copy.deepcopy(exported)), unmapped


def rich_conversation() -> Convo:
    c = Convo()
    s = c.session
    s.change_tools("builtin", [ev.ToolSpec(name="fs_read", description="Read a file",
                                          input_schema={"type": "object"})])
    s.change_tools("mcp", [ev.ToolSpec(name="gh___search")], server="github")
    s.add_context_file("AGENTS.md")
    s.create_checkpoint("0", description="start")
    c.prompt("read the files\nplease")
    c.reply("reading", [("t1", "fs_read", "ok"), ("t2", "fs_read", "fail")],
            tool_metadata={"orig_name": "read", "orig_args": {"path": "x"}})
    s.create_checkpoint("0.1", is_turn=False, tool_name="fs_read")
    c.reply("one failed", [("t3", "gh___search", "deny")])
    c.prompt("never mind that")
    c.reply("ok", error=ev.MessageError(kind="api", message="overloaded"))
    c.prompt("run it")
    c.reply("running", [("t4", "bash", "ok")])
    c.prompt("and meanwhile")  # joins the pending results as cancelled tool uses
    c.reply("done")
    s.change_file_lines("a.py", before_lines=3, after_lines=10, lines_added_by_agent=7)
    s.note_transcript("Error: the network went away")
    c.prompt("last question")
    return c


# --------------------------------------------------------------------------- JSON


def test_json_has_q_clis_shape_and_a_schema_version() -> None:
    c = rich_conversation()
    data = json.loads(to_json(c.state))
    assert data[SCHEMA_KEY] == 1
    assert list(data)[:9] == ["conversation_id", "next_message", "history",
                              "valid_history_range", "transcript", "tools", "context_manager",
                              "context_message_length", "latest_summary"]
    assert "model" not in data
    assert "tangent_state" not in data
    assert data["tools"]["native___"][0] == {"ToolSpecification": {
        "name": "fs_read", "description": "Read a file",
        "input_schema": {"json": {"type": "object"}}}}
    assert set(data["tools"]) == {"native___", "github"}
    first = data["history"][0]
    assert first["user"]["content"] == {"Prompt": {"prompt": "read the files\nplease"}}
    assert first["assistant"]["ToolUse"]["tool_uses"][0] == {
        "id": "t1", "name": "fs_read", "orig_name": "read", "args": {"arg": "t1"},
        "orig_args": {"path": "x"}}
    second = data["history"][1]["user"]["content"]["ToolUseResults"]["tool_use_results"]
    assert second[1] == {"tool_use_id": "t2", "content": [{"Text": "t2 failed"}],
                         "status": "Error"}
    checkpoint = data["checkpoint_manager"]["checkpoints"][1]
    assert checkpoint["tag"] == "0.1"
    assert len(checkpoint["history_snapshot"]) == 1
    assert data["checkpoint_manager"]["tag_index"] == {"0": 0, "0.1": 1}
    assert from_json(to_json(c.state)) == c.state
    assert SCHEMA_KEY not in export_qcli(c.state)


def test_a_newer_schema_is_refused_and_the_legacy_model_fills_model_info() -> None:
    data = {"conversation_id": "c", "history": [], "transcript": [], "model": "claude-3-5"}
    state = from_json_obj(data)
    assert state.model_info == m.ModelInfo("claude-3-5")
    assert state.model == "claude-3-5"
    assert to_json_obj(state)["model"] == "claude-3-5"  # kept as read
    with pytest.raises(ValueError, match="newer"):
        from_json_obj({**data, SCHEMA_KEY: 99})


def test_time_arrays_of_the_time_crate() -> None:
    ms = 1_772_657_112_819
    array = time_array(ms)
    assert array[:2] == [2026, 63]  # year, ordinal day
    assert array[6:] == [0, 0, 0]
    assert time_from_array(array) == ms
    assert time_from_array([2026, 63, 20, 45, 12, 819902000, 0, 0, 0]) == ms
    assert time_from_array("2026-03-04T21:45:12.819+01:00") == ms


# --------------------------------------------------------------------------- our own exports


def test_export_then_import_replays_to_an_equal_state() -> None:
    c = rich_conversation()
    state, want, unmapped = round_trip(c)
    assert state == want
    assert unmapped == ()
    assert to_json_obj(state) == to_json_obj(want)


def test_tangent_and_summary_round_trip() -> None:
    c = Convo()
    c.turn("q0")
    c.session.compact_history("summary of q0", keep_last=1, request_metadata={"r": 1})
    c.prompt("pending in main")
    c.session.enter_tangent()
    c.clock.advance(5_000)
    c.turn("side question", "side answer")
    c.prompt("side follow-up")
    state, want, unmapped = round_trip(c)
    assert state == want
    assert state.tangent_state is not None
    assert unmapped == ("context_message_length is recomputed from the summary",)


def test_results_left_first_by_a_compaction_import_through_a_stand_in() -> None:
    c = Convo()
    c.prompt("go")
    c.reply("", [("t1", "fs_read", "ok")])
    c.reply("read it")
    c.session.compact_history("we read a file", keep_last=1)
    assert c.state.history[0].user.has_tool_use_results()
    state, want, unmapped = round_trip(c)
    assert state == want
    assert any("stand-in" in note for note in unmapped)


def test_checkpoints_that_are_not_a_prefix_are_reported() -> None:
    c = Convo()
    c.turn("q0")
    c.session.create_checkpoint("1")
    c.session.clear_history()
    c.turn("q1")
    state, want, unmapped = round_trip(c)
    assert state.history == want.history
    assert state.checkpoint_manager is None
    assert any("checkpoint '1'" in note for note in unmapped)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["prompt", "reply", "tools", "cancel", "abort", "set", "clear",
                                 "enter", "exit", "checkpoint", "lines"]), max_size=25))
def test_random_conversations_round_trip(ops: list[str]) -> None:
    c = Convo()
    in_tangent, calls = False, 0
    for op in ops:
        if op == "prompt":
            c.prompt(f"prompt {calls}")
        elif op == "reply":
            c.reply(f"reply {calls}")
        elif op in ("tools", "cancel", "abort"):
            calls += 1
            end = {"tools": "ok", "cancel": "cancel", "abort": "abort"}[op]
            c.reply("", [(f"c{calls}", "fs_read", "fail"), (f"d{calls}", "bash", end)])  # type: ignore[list-item]
        elif op == "set":
            c.session.set_next_message(f"set {calls}", additional_context="hook")
        elif op == "clear":
            c.session.clear_next_message()
        elif op == "enter" and not in_tangent:
            c.session.enter_tangent()
            in_tangent = True
        elif op == "exit" and in_tangent:
            c.session.exit_tangent("last_entry")
            in_tangent = False
        elif op == "checkpoint" and not in_tangent:
            c.session.create_checkpoint(f"cp{len(ops)}-{calls}-{c.session.version}")
        elif op == "lines":
            c.session.change_file_lines("f.py", before_lines=calls, after_lines=calls + 2,
                                        lines_added_by_agent=2)
    state, want, unmapped = round_trip(c)
    assert state == want, unmapped
    assert all("checkpoint" in note for note in unmapped), unmapped


# --------------------------------------------------------------------------- a file Q CLI wrote


def qcli_file() -> dict[str, Any]:
    return {
        "conversation_id": "3f1c9a2e-5b7d-4c1a-9e8f-0a1b2c3d4e5f",
        "next_message": None,
        "history": [
            {"user": {"additional_context": "", "env_context": ENV,
                      "content": {"Prompt": {"prompt": "list the files here"}},
                      "timestamp": "2026-03-04T20:04:36.117492Z", "images": None},
             "assistant": {"ToolUse": {"message_id": "msg-001", "content": "",
                                       "tool_uses": [{"id": "tooluse_A", "name": "execute_bash",
                                                      "orig_name": "execute_bash",
                                                      "args": {"command": "ls"},
                                                      "orig_args": {"command": "ls"}},
                                                     {"id": "tooluse_B",
                                                      "name": "gh___search",
                                                      "orig_name": "search",
                                                      "args": {"q": "x"},
                                                      "orig_args": {"query": "x"}}]}},
             "request_metadata": {"request_id": "r-1", "message_id": "msg-001",
                                  "request_start_timestamp_ms": 1772654676289,
                                  "stream_end_timestamp_ms": 1772654690100,
                                  "time_to_first_chunk": {"secs": 2, "nanos": 550210125},
                                  "time_between_chunks": [], "user_prompt_length": 19,
                                  "response_size": 0, "chat_conversation_type": "ToolUse",
                                  "tool_use_ids_and_names": [["tooluse_A", "execute_bash"]],
                                  "model_id": "claude-sonnet-4", "message_meta_tags": []}},
            {"user": {"additional_context": "", "env_context": ENV,
                      "content": {"ToolUseResults": {"tool_use_results": [
                          {"tool_use_id": "tooluse_A",
                           "content": [{"Json": {"exit_status": "0", "stdout": "README.md"}}],
                           "status": "Success"},
                          {"tool_use_id": "tooluse_B", "content": [], "status": "Error"}]}},
                      "timestamp": None, "images": None},
             "assistant": {"Response": {"message_id": "msg-002",
                                        "content": "The directory contains README.md."}},
             "request_metadata": None},
            {"user": {"additional_context": "hook said hi", "env_context": ENV,
                      "content": {"Prompt": {"prompt": "write it"}},
                      "timestamp": "2026-03-04T21:00:00.000+09:00", "images": None},
             "assistant": {"ToolUse": {"message_id": None, "content": "Writing.",
                                       "tool_uses": [{"id": "tooluse_C", "name": "fs_write",
                                                      "orig_name": "fs_write", "args": {},
                                                      "orig_args": {}}]}},
             "request_metadata": None},
            {"user": {"additional_context": "", "env_context": ENV,
                      "content": {"CancelledToolUses": {
                          "prompt": "The user interrupted the tool execution.",
                          "tool_use_results": [{"tool_use_id": "tooluse_C",
                                                "content": [{"Text": "Tool use was cancelled "
                                                                     "by the user"}],
                                                "status": "Error"}]}},
                      "timestamp": "2026-03-04T21:00:05.000+09:00", "images": None},
             "assistant": {"Response": {"message_id": "msg-004", "content": "Stopped."}},
             "request_metadata": None},
        ],
        "valid_history_range": [0, 4],
        "transcript": ["> list the files here", "\n[Tool uses: execute_bash]",
                       "The directory contains README.md."],
        "tools": {"native___": [{"ToolSpecification": {
            "name": "execute_bash", "description": "Run a command",
            "input_schema": {"json": {"type": "object"}}}}], "github": []},
        "context_manager": {"max_context_files_size": 750000, "current_profile": "dev",
                            "paths": ["AGENTS.md"], "hooks": {}},
        "context_message_length": None,
        "latest_summary": None,
        "model_info": {"model_name": "Claude Sonnet 4", "model_id": "claude-sonnet-4",
                       "context_window_tokens": 200000, "rate_multiplier": 1.0,
                       "rate_unit": "Credit", "supports_images": True},
        "file_line_tracker": {"/work/app/a.md": {
            "prev_fswrite_lines": 440, "before_fswrite_lines": 0, "after_fswrite_lines": 440,
            "lines_added_by_agent": 440, "lines_removed_by_agent": 0, "is_first_write": False}},
        "checkpoint_manager": None,
        "mcp_enabled": True,
        "mcp_last_checked": [2026, 63, 20, 4, 29, 434118000, 0, 0, 0],
        "user_turn_metadata": {"continuation_id": "x", "requests": [], "usage_info": []},
    }


def test_a_file_q_cli_wrote_imports_with_a_report() -> None:
    data = qcli_file()
    state, unmapped, session = imported(data)
    want = from_json_obj(copy.deepcopy(data))
    for field in ("conversation_id", "history", "next_message", "transcript", "model_info",
                  "file_line_tracker", "mcp_enabled", "valid_history_range"):
        assert getattr(state, field) == getattr(want, field), field
    assert state.context_manager == m.ContextManager(("AGENTS.md",))
    assert state.tools == {"builtin": want.tools["builtin"]}
    # The exact Q CLI fields came through part metadata.
    results = state.history[1].user.tool_use_results()
    assert results == (m.ToolUseResult("tooluse_A", (m.JsonBlock(
        {"exit_status": "0", "stdout": "README.md"}),), "Success"),
        m.ToolUseResult("tooluse_B", (), "Error"))
    assert state.history[0].user.timestamp == "2026-03-04T20:04:36.117492Z"
    assert state.history[2].assistant.message_id is None
    assert state.history[2].user.additional_context == "hook said hi"
    use = m.tool_uses_of(state.history[0].assistant)[1]
    assert (use.name, use.orig_name, use.args, use.orig_args) == (
        "gh___search", "search", {"q": "x"}, {"query": "x"})
    notes = "\n".join(unmapped)
    for fragment in ("'mcp_last_checked'", "'user_turn_metadata'", "'github'",
                     "context_manager fields", "model_info fields"):
        assert fragment in notes, fragment
    assert not any("entry" in note for note in unmapped), unmapped  # every entry mapped
    # Export gives Q CLI's history back exactly.
    assert export_qcli(state)["history"] == data["history"]
    # The imported log is an ordinary log: reopening and refolding agrees.
    reopened = Session.open(session.store, session.id)
    assert ConversationFold(reopened.id).apply_all(session.store.read(session.id)).state() == state


def test_a_q_cli_tangent_imports_and_exits() -> None:
    main = qcli_file()["history"][:2]
    side = {"user": {"additional_context": "", "env_context": ENV,
                     "content": {"Prompt": {"prompt": "side question"}},
                     "timestamp": "2026-03-04T20:10:00.000Z", "images": None},
            "assistant": {"Response": {"message_id": "m9", "content": "side answer"}},
            "request_metadata": None}
    data = {"conversation_id": "c1", "next_message": None, "history": [*main, side],
            "valid_history_range": [0, 3], "transcript": ["> side question"], "tools": {},
            "latest_summary": None, "mcp_enabled": True,
            "tangent_state": {"main_history": main, "main_next_message": None,
                              "main_transcript": ["> list the files here"],
                              "main_latest_summary": None,
                              "tangent_start_time": [2026, 63, 20, 9, 0, 0, 0, 0, 0]}}
    state, unmapped, session = imported(data)
    assert state.tangent_state == from_json_obj(copy.deepcopy(data)).tangent_state
    assert len(state.history) == 3
    assert unmapped == ()
    session.exit_tangent()
    fold = ConversationFold(session.id).apply_all(session.store.read(session.id))
    assert fold.state().history == from_json_obj(copy.deepcopy(data)).tangent_state.main_history  # type: ignore[union-attr]
    assert fold.state().transcript == ("> list the files here",)


def test_orphan_results_and_legacy_model_are_reported() -> None:
    data = {"conversation_id": "c", "model": "old-model", "history": [
        {"user": {"additional_context": "", "env_context": {"env_state": None},
                  "content": {"ToolUseResults": {"tool_use_results": [
                      {"tool_use_id": "x", "content": [{"Text": "left"}], "status": "Success"}]}},
                  "timestamp": None, "images": None},
         "assistant": {"Response": {"message_id": "m", "content": "ok"}},
         "request_metadata": None}]}
    state, unmapped, _ = imported(data)
    assert state.model_info == m.ModelInfo("old-model")
    assert state.history[0].user.content == m.Prompt("left")
    assert any("legacy model" in n for n in unmapped)
    assert any("no tool use before them" in n for n in unmapped)


@pytest.mark.parametrize("bad", [
    [],
    {"history": []},
    {"conversation_id": "c", "history": [{"user": {"content": {"Nope": {}}},
                                          "assistant": {"Response": {"content": ""}}}]},
])
def test_malformed_input_is_a_typed_error_and_appends_nothing(bad: Any) -> None:
    session = Session.create(MemoryStore())
    with pytest.raises(QCliFormatError):
        import_qcli(session, json.dumps(bad))
    assert session.version == 0


def test_events_come_without_envelope_but_with_times() -> None:
    result = events_from_qcli(qcli_file())
    assert all(e.seq == 0 and e.id == "" and e.time > 0 for e in result.events)
    assert isinstance(result.events[0], ev.ConversationCreated)


MORE_OPS = ["prompt", "reply", "tools", "cancel", "abort", "set", "clear", "enter", "exit",
            "tail", "checkpoint", "restore", "compact", "wipe", "lines", "note"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MORE_OPS), max_size=30), st.integers(0, 3))
def test_an_import_is_exact_or_says_why(ops: list[str], keep: int) -> None:
    """With compactions, clears and restores some checkpoints cannot map; never silently."""
    c = Convo()
    s = c.session
    in_tangent = False
    tags: list[str] = []
    for calls, op in enumerate(ops, start=1):
        if op == "prompt":
            c.prompt(f"p{calls}")
        elif op == "reply":
            c.reply(f"r{calls}")
        elif op in ("tools", "cancel", "abort"):
            end = {"tools": "ok", "cancel": "cancel", "abort": "abort"}[op]
            c.reply("", [(f"c{calls}", "fs_read", "fail"), (f"d{calls}", "bash", end)])  # type: ignore[list-item]
        elif op == "set":
            s.set_next_message(f"s{calls}", additional_context="h")
        elif op == "clear":
            s.clear_next_message()
        elif op == "enter" and not in_tangent:
            s.enter_tangent()
            in_tangent = True
        elif op in ("exit", "tail") and in_tangent:
            s.exit_tangent("none" if op == "exit" else "last_entry")
            in_tangent = False
        elif op == "checkpoint":
            tags.append(f"t{len(tags)}")
            s.create_checkpoint(tags[-1])
        elif op == "restore" and tags:
            s.restore_checkpoint(tags[calls % len(tags)])
        elif op == "compact":
            s.compact_history("summary", keep_last=keep)
        elif op == "wipe":
            s.clear_history()
        elif op == "lines":
            s.change_file_lines("f.py", before_lines=1, after_lines=2)
        elif op == "note":
            s.note_transcript("Error: x")
    state, want, unmapped = round_trip(c)
    if state != want:
        differ = [k for k, v in to_json_obj(state).items() if to_json_obj(want)[k] != v]
        assert [n for n in unmapped if "context_message_length" not in n], differ
