"""ConversationState folded from the log: history, tools, transcript, valid range, tangent,
compaction, checkpoints and the sendable view's repairs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import attrs
import msgspec
import pytest

from engine import events as ev
from engine.errors import IllegalTransition, PartValidationError
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections.qcli import messages as m
from projections.qcli.as_sent import SUMMARY_ACKNOWLEDGEMENT, format_timestamp, summary_context
from projections.qcli.limits import valid_history_range
from projections.qcli.sendable import OVERFLOW_PROMPT, invariant_violations, sendable
from projections.qcli.serialize import from_json, to_json
from projections.qcli.timetravel import conversation_at
from projections.withparts import WithPartsProjection
from tests.project.test_architecture import impurities  # the scanner the other folds pass
from tests.support.qcli_helpers import Convo

ROOT = Path(__file__).resolve().parents[2]


def prompts(state: m.ConversationState) -> list[str | None]:
    return [e.user.prompt() for e in state.history]


def rules(view: object) -> list[str]:
    return [r.rule for r in view.repairs]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- messages to history


def test_a_prompt_and_a_response_make_one_entry() -> None:
    c = Convo()
    c.prompt("hello")
    assert c.state.next_message is not None
    assert c.state.next_message.content == m.Prompt("hello")
    assert c.state.next_message.env_context == m.UserEnvContext(m.EnvState("linux", "/repo"))
    started = next(e for e in c.store.read(c.session.id) if isinstance(e, ev.MessageStarted))
    assert c.state.next_message.timestamp == format_timestamp(started.time)
    mid = c.reply("hi there")
    (entry,) = c.state.history
    assert entry.user.content == m.Prompt("hello")
    assert entry.assistant == m.Response(mid, "hi there")
    meta = entry.request_metadata
    assert meta is not None
    assert meta["message_id"] == mid
    assert meta["chat_conversation_type"] == "NotToolUse"
    assert meta["response_size"] == 8
    assert meta["user_prompt_length"] == 5
    assert meta["model_id"] == "claude-sonnet"
    assert meta["request_start_timestamp_ms"] < meta["stream_end_timestamp_ms"]
    assert c.state.next_message is None
    assert c.state.valid_history_range == (0, 1)
    assert c.state.conversation_id == "conv-1"


def test_user_parts_ignored_synthetic_and_empty() -> None:
    c = Convo()
    s = c.session
    mid = s.start_message("user")
    s.add_text(mid, "visible", streaming=False)
    s.add_text(mid, "hidden", streaming=False, ignored=True)
    s.add_text(mid, "hook context", streaming=False, synthetic=True)
    s.add_file(mid, "image/png", "data:image/png;base64,AAAA")
    s.complete_message(mid)
    nm = c.state.next_message
    assert nm is not None
    assert nm.content == m.Prompt("visible")
    assert nm.additional_context == "hook context"
    assert nm.images == ({"format": "png", "source": {"Bytes": "data:image/png;base64,AAAA"}},)
    c.reply()
    only_ignored = s.start_message("user")
    s.add_text(only_ignored, "x", streaming=False, ignored=True)
    s.complete_message(only_ignored)
    assert c.state.next_message is not None
    assert c.state.next_message.content == m.Prompt("Empty prompt")


def test_tool_turn_then_results_become_the_next_user_side() -> None:
    c = Convo()
    c.prompt("read two files")
    first = c.reply("reading", [("t1", "fs_read", "ok"), ("t2", "fs_read", "fail")],
                    tool_metadata={"orig_name": "@fs/read", "orig_args": {"p": 1}})
    entry = c.state.history[0]
    assert isinstance(entry.assistant, m.ToolUse)
    assert entry.assistant.message_id == first
    use = entry.assistant.tool_uses[0]
    assert (use.id, use.name, use.orig_name, use.args, use.orig_args) == (
        "t1", "fs_read", "@fs/read", {"arg": "t1"}, {"p": 1})
    assert entry.request_metadata is not None
    assert entry.request_metadata["tool_use_ids_and_names"] == [["t1", "fs_read"],
                                                                ["t2", "fs_read"]]
    nm = c.state.next_message
    assert nm is not None
    assert nm.timestamp is None
    assert nm.content == m.ToolUseResults((
        m.ToolUseResult("t1", (m.TextBlock("output of t1"),), "Success"),
        m.ToolUseResult("t2", (m.TextBlock("t2 failed"),), "Error"),
    ))
    c.reply("both read")
    assert c.state.history[1].user == nm
    assert c.state.next_message is None


@pytest.mark.parametrize("outcome", ["deny", "cancel", "abort"])
def test_cancelled_tools_become_cancelled_tool_uses(outcome: str) -> None:
    c = Convo()
    c.prompt("go")
    c.reply("", [("t1", "bash", "ok"), ("t2", "bash", outcome)])  # type: ignore[list-item]
    nm = c.state.next_message
    assert nm is not None
    assert nm.content == m.CancelledToolUses(None, (
        m.ToolUseResult("t1", (m.TextBlock("output of t1"),), "Success"),
        m.cancelled_result("t2"),
    ))
    assert m.cancelled_result("t2").content == (m.TextBlock("Tool use was cancelled by the user"),)
    c.prompt("do something else")  # the typed prompt joins the cancelled results
    nm = c.state.next_message
    assert nm is not None
    assert isinstance(nm.content, m.CancelledToolUses)
    assert nm.content.prompt == "do something else"
    assert nm.timestamp is not None


def test_a_prompt_typed_while_results_are_pending_joins_them() -> None:
    c = Convo()
    c.prompt("go")
    c.reply("", [("t1", "bash", "ok")])
    c.prompt("and also this")
    nm = c.state.next_message
    assert nm is not None
    assert nm.content == m.CancelledToolUses("and also this", (
        m.ToolUseResult("t1", (m.TextBlock("output of t1"),), "Success"),))
    c.prompt("second line")
    assert c.state.next_message is not None
    assert c.state.next_message.prompt() == "and also this\nsecond line"


def test_compacted_tool_output_is_shown_cleared_before_and_after_completion() -> None:
    c = Convo()
    s = c.session
    c.prompt("go")
    a = s.start_message("assistant")
    ref = s.add_tool(a, "t1", "fs_read")
    s.start_tool(ref)
    s.complete_tool(ref, "big output")
    s.compact_tool_output(ref)
    s.complete_message(a)
    assert c.state.next_message is not None
    assert c.state.next_message.tool_use_results() == (
        m.ToolUseResult("t1", (m.TextBlock("[Old tool result content cleared]"),), "Success"),)
    c.prompt("next")
    a2 = s.start_message("assistant")
    ref2 = s.add_tool(a2, "t2", "fs_read")
    s.start_tool(ref2)
    s.complete_tool(ref2, "second output")
    s.complete_message(a2)
    c.reply("done")
    entry = c.state.history[2]
    assert entry.user.tool_use_results() == (
        m.ToolUseResult("t2", (m.TextBlock("second output"),), "Success"),)
    s.compact_tool_output(ref2)  # long after: the entry holding its result changes
    assert c.state.history[2].user.tool_use_results() == (
        m.ToolUseResult("t2", (m.TextBlock("[Old tool result content cleared]"),), "Success"),)
    assert c.state == c.rebuilt()


def test_a_timed_out_response_gets_the_placeholder_and_errors_reach_the_transcript() -> None:
    c = Convo()
    c.prompt("slow")
    c.reply("", error=ev.MessageError(kind="timeout", message="took too long"))
    assert c.state.history[0].assistant.content == (
        "Response timed out - message took too long to generate")
    c.prompt("again")
    c.reply("partial", error=ev.MessageError(kind="api", message="HTTP 500"))
    assert c.state.transcript[-1] == "Error: HTTP 500"
    c.session.note_transcript("Error: the tool server crashed")
    assert c.state.transcript[-1] == "Error: the tool server crashed"


def test_transcript_prefixes_user_lines_and_lists_tool_uses() -> None:
    c = Convo()
    c.prompt("line one\nline two")
    c.reply("reading", [("t1", "fs_read", "ok"), ("t2", "grep", "ok")])
    c.reply("done")
    assert c.state.transcript == (
        "> line one\n> line two",
        "reading\n[Tool uses: fs_read,grep]",
        "done\n[Tool uses: none]",
    )


def test_history_and_transcript_caps_drop_the_oldest_from_the_view_only() -> None:
    c = Convo(history_cap=3, transcript_cap=4)
    for i in range(5):
        c.turn(f"q{i}", f"a{i}")
    assert [e.user.prompt() for e in c.state.history] == ["q2", "q3", "q4"]
    assert c.state.transcript == ("> q3", "a3\n[Tool uses: none]", "> q4", "a4\n[Tool uses: none]")
    # The log keeps everything: the first prompt is still there.
    texts = [e.text for e in c.store.read(c.session.id) if isinstance(e, ev.TextAdded)]
    assert "q0" in texts
    assert c.state == c.rebuilt()


def test_no_conversation_event_still_folds_a_conversation() -> None:
    c = Convo(create=False)
    c.turn("hi", "hello")
    assert c.state.conversation_id == c.session.id
    assert c.state.history[0].user.env_context == m.UserEnvContext(None)
    assert c.state.model_info is None
    # The WithParts view of the same log is unaffected by conversation events.
    c.session.create_conversation("conv-9")
    c.session.create_checkpoint("1")
    wp = WithPartsProjection(c.session.id).apply_all(c.store.read(c.session.id))
    assert len(wp.messages()) == 2


def test_tools_model_context_files_and_line_tracker() -> None:
    c = Convo()
    s = c.session
    s.change_tools("builtin", [ev.ToolSpec(name="fs_read", input_schema={"type": "object"})])
    s.change_tools("mcp", [ev.ToolSpec(name="search")], server="github")
    s.select_model(ev.ModelInfo(model_id="claude-opus", context_window_tokens=200_000))
    s.add_context_file("AGENTS.md")
    s.add_context_file("docs/*.md")
    s.remove_context_file("AGENTS.md")
    s.change_file_lines("a.py", before_lines=10, after_lines=14, lines_added_by_agent=5,
                        lines_removed_by_agent=1)
    st = c.state
    assert st.tools == {"builtin": (m.ToolSpec("fs_read", "", {"type": "object"}),),
                        "mcp:github": (m.ToolSpec("search"),)}
    assert st.model_info == m.ModelInfo("claude-opus", context_window_tokens=200_000)
    assert st.context_manager == m.ContextManager(("docs/*.md",))
    assert st.file_line_tracker["a.py"] == m.FileLineTracker(14, 10, 14, 5, 1, False)
    assert st.file_line_tracker["a.py"].lines_by_agent() == 4
    s.change_tools("mcp", [], server="github")  # an empty list removes the origin
    assert set(c.state.tools) == {"builtin"}


# --------------------------------------------------------------------------- valid range


def entry(kind: str) -> m.HistoryEntry:
    content: m.UserMessageContent = (
        m.Prompt("p") if kind == "p" else m.ToolUseResults((m.cancelled_result("x"),)))
    return m.HistoryEntry(m.UserMessage("", m.UserEnvContext(), content), m.Response(None, "a"))


@pytest.mark.parametrize(("shape", "cap", "expected"), [
    ("ppp", 10_000, (0, 3)),
    ("", 10_000, (0, 0)),
    ("pppp", 10, (2, 4)),  # 4*2 > 10-6: one prompt turn at a time until 2 entries
    ("prrpp", 10, (3, 5)),  # the start skips entries that carry tool results
    ("prrrr", 10, (0, 0)),  # no later prompt to start from
    ("pp", 10, (0, 2)),
])
def test_valid_history_range_rule(shape: str, cap: int, expected: tuple[int, int]) -> None:
    history = [entry("p" if ch == "p" else "r") for ch in shape]
    assert valid_history_range(history, cap) == expected


def test_valid_range_is_recomputed_from_events() -> None:
    c = Convo(history_cap=10)
    for i in range(4):
        c.turn(f"q{i}")
    assert c.state.valid_history_range == (2, 4)
    view = sendable(c.state)
    assert [e.user.prompt() for e in view.history] == ["q2", "q3"]
    assert "trim-history" in rules(view)


def test_overflow_with_pending_results_becomes_the_overflow_prompt() -> None:
    c = Convo(history_cap=8)  # limit 2: more than one entry must be trimmed
    c.prompt("go")
    c.reply("", [("t1", "bash", "ok")])
    c.reply("", [("t2", "bash", "ok")])
    assert c.state.valid_history_range == (0, 0)
    view = sendable(c.state, history_cap=8)
    assert view.history == ()
    assert view.next_message is not None
    assert view.next_message.content == m.Prompt(OVERFLOW_PROMPT)
    assert invariant_violations(view) == []


# --------------------------------------------------------------------------- tangent


def test_tangent_keeps_the_main_conversation_and_restores_it() -> None:
    c = Convo()
    c.turn("main question", "main answer")
    c.session.compact_history("main summary", keep_last=1)
    c.prompt("pending main prompt")
    before = c.state
    c.session.enter_tangent()
    ts = c.state.tangent_state
    assert ts is not None
    assert ts.main_history == before.history
    assert ts.main_next_message == before.next_message
    assert ts.main_transcript == before.transcript
    assert ts.main_latest_summary == ("main summary", {})
    assert c.state.history == before.history  # the tangent starts from the main history
    c.clock.advance(42_000)
    c.reply("side answer")
    c.session.clear_history()
    assert c.fold.tangent_duration_seconds() == 42
    c.session.exit_tangent()
    after = c.state
    assert after.tangent_state is None
    for field in ("history", "next_message", "transcript", "latest_summary"):
        assert getattr(after, field) == getattr(before, field), field
    assert after.valid_history_range == (0, len(after.history))
    assert c.fold.tangent_duration_seconds() is None


def test_nested_tangent_and_exit_outside_are_illegal_and_leave_the_log() -> None:
    c = Convo()
    with pytest.raises(IllegalTransition) as exc:
        c.session.exit_tangent()
    assert (exc.value.entity, exc.value.current, exc.value.valid) == ("tangent", "main",
                                                                      ("tangent",))
    c.session.enter_tangent()
    version = c.session.version
    with pytest.raises(IllegalTransition) as exc:
        c.session.enter_tangent()
    assert "do not nest" in exc.value.reason
    assert c.session.version == version
    assert c.session.lifecycle.conversation.tangent == "tangent"


def test_conversation_events_need_the_conversation() -> None:
    c = Convo(create=False)
    with pytest.raises(IllegalTransition) as exc:
        c.session.enter_tangent()
    assert exc.value.valid_events == ("conversation.created",)
    assert c.session.version == 0
    c.session.create_conversation("a")
    assert c.session.create_conversation("a") == 1  # an identical repeat is a no-op
    with pytest.raises(IllegalTransition):
        c.session.create_conversation("b")


def test_tangent_tail_last_entry_keeps_the_whole_last_exchange() -> None:
    c = Convo()
    c.turn("main", "main answer")
    c.session.enter_tangent()
    c.turn("side one", "side answer one")
    c.prompt("side two")
    c.reply("looking", [("t1", "fs_read", "ok")])
    c.reply("found it")  # answers with the tool results: no prompt in this entry
    c.session.exit_tangent("last_entry")
    prompts = [e.user.prompt() for e in c.state.history]
    assert prompts == ["main", "side two", None]  # back to the last typed prompt
    view = sendable(c.state)
    assert view.repairs == ()  # no orphan tool result
    assert invariant_violations(view) == []


def test_tangent_tail_thread_and_tail_of_an_empty_tangent() -> None:
    c = Convo()
    c.turn("main")
    c.session.enter_tangent()
    c.session.exit_tangent("last_entry")
    assert len(c.state.history) == 1  # the tangent did not grow: nothing to keep
    c.session.enter_tangent()
    c.turn("side one")
    c.turn("side two")
    c.session.exit_tangent("thread")
    assert [e.user.prompt() for e in c.state.history] == ["main", "side one", "side two"]


def test_a_tool_using_tail_carries_its_pending_results() -> None:
    c = Convo()
    c.turn("main")
    c.session.enter_tangent()
    c.prompt("side")
    c.reply("", [("t1", "bash", "ok")])
    c.session.exit_tangent("last_entry")
    assert c.state.next_message is not None
    assert c.state.next_message.tool_use_results() == (
        m.ToolUseResult("t1", (m.TextBlock("output of t1"),), "Success"),)
    assert invariant_violations(sendable(c.state)) == []


# --------------------------------------------------------------------------- compaction


def test_compaction_injects_the_summary_as_the_first_pair() -> None:
    c = Convo()
    for i in range(4):
        c.turn(f"q{i}", f"a{i}")
    c.prompt("the current request")
    c.session.compact_history("Summary A", keep_last=1,
                              request_metadata={"message_id": "sum-1"},
                              custom_instruction="keep file names")
    st = c.state
    assert st.latest_summary == ("Summary A", {"message_id": "sum-1"})
    assert [e.user.prompt() for e in st.history] == ["q3"]
    assert st.next_message is not None
    assert st.next_message.prompt() == "the current request"
    assert c.fold.compactions[-1].dropped == 3
    assert c.fold.compactions[-1].kept == 1
    view = sendable(st)
    assert view.context_entries == 1
    first = view.history[0]
    assert first.user.content == m.Prompt(summary_context("Summary A")[0])
    assert first.assistant == m.Response(None, SUMMARY_ACKNOWLEDGEMENT)
    assert st.context_message_length == len(summary_context("Summary A")[0].encode())
    # The log keeps everything, and time travel still sees the history before.
    compaction_seq = next(e.seq for e in c.store.read(c.session.id)
                          if isinstance(e, ev.HistoryCompacted))
    earlier = conversation_at(c.store, c.session.id, compaction_seq - 1).state()
    assert len(earlier.history) == 4
    assert earlier.latest_summary is None


def test_a_later_compaction_replaces_the_summary_and_clear_resets_it() -> None:
    c = Convo()
    c.turn("q0")
    c.session.compact_history("Summary A")
    c.turn("q1")
    c.session.compact_history("Summary B", keep_last=1)
    assert c.state.latest_summary == ("Summary B", {})
    assert [e.user.prompt() for e in c.state.history] == ["q1"]
    c.session.clear_history()
    cleared = c.fold.state()
    assert cleared.history == ()
    assert cleared.latest_summary is None
    assert cleared.next_message is None


@pytest.mark.parametrize("bad", [{"summary": " "}, {"summary": "s", "keep_last": -1}])
def test_compaction_is_validated(bad: dict[str, object]) -> None:
    c = Convo()
    with pytest.raises(PartValidationError):
        c.session.append([ev.HistoryCompacted(**bad)])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_restore_rewinds_everything_together() -> None:
    c = Convo()
    c.turn("q0")
    c.session.change_file_lines("a.py", before_lines=1, after_lines=2, lines_added_by_agent=1)
    c.prompt("pending")
    c.session.create_checkpoint("1", description="turn 1")
    at_checkpoint = c.state
    c.reply("a1")
    c.turn("q2")
    c.session.compact_history("sum", keep_last=1)
    c.session.change_file_lines("a.py", before_lines=2, after_lines=9, lines_added_by_agent=7)
    c.session.note_transcript("Error: x")
    restore_seq = c.session.restore_checkpoint("1")
    st = c.state
    for field in ("history", "next_message", "latest_summary", "transcript",
                  "file_line_tracker", "valid_history_range"):
        assert getattr(st, field) == getattr(at_checkpoint, field), field
    # The log keeps what came after, and time travel still sees it.
    before_restore = conversation_at(c.store, c.session.id, restore_seq - 1).state()
    assert before_restore.latest_summary == ("sum", {})
    assert c.state == c.rebuilt()


def test_restore_can_go_forward_and_checkpoints_stay() -> None:
    c = Convo()
    c.session.create_checkpoint("0")
    c.turn("q1")
    c.session.create_checkpoint("1")
    c.session.restore_checkpoint("0")
    assert prompts(c.state) == []
    c.session.restore_checkpoint("1")
    assert prompts(c.state) == ["q1"]
    cm = c.state.checkpoint_manager
    assert cm is not None
    assert [(x.tag, len(x.history_snapshot)) for x in cm.checkpoints] == [("0", 0), ("1", 1)]
    assert cm.tag_index() == {"0": 0, "1": 1}


def test_restoring_an_unknown_tag_is_illegal() -> None:
    c = Convo()
    c.session.create_checkpoint("1")
    version = c.session.version
    with pytest.raises(IllegalTransition) as exc:
        c.session.restore_checkpoint("2")
    assert exc.value.entity == "checkpoint"
    assert "'2'" in exc.value.reason
    assert c.session.version == version
    with pytest.raises(IllegalTransition):
        c.session.create_checkpoint("1", description="another")  # same tag, new payload
    assert c.session.create_checkpoint("1") == version  # identical repeat: the original seq


def test_checkpoint_events_are_constant_size() -> None:
    c = Convo()
    sizes = []
    for i in range(30):
        c.turn(f"question {i} " * 5, f"answer {i} " * 20)
        c.session.create_checkpoint(str(i), is_turn=True)
        last = next(iter(c.store.read(c.session.id, c.session.version, c.session.version)))
        sizes.append(len(msgspec.msgpack.encode(last)))
    # Only the tag ("0".."29") and the seq's varint grow; the history does not show.
    assert max(sizes) - min(sizes) <= 4
    assert max(sizes) < 200


def test_a_rejected_batch_rolls_back_conversation_state() -> None:
    c = Convo()
    before = c.session.version
    with pytest.raises(IllegalTransition):
        c.session.append([ev.TangentEntered(), ev.CheckpointCreated(tag="x"),
                          ev.ContextFileAdded(path="a"), ev.CheckpointRestored(tag="nope")])
    life = c.session.lifecycle.conversation
    assert (life.tangent, life.checkpoints, life.context_files) == ("main", {}, {})
    assert c.session.version == before
    c.session.enter_tangent()  # still possible: nothing half-applied


def test_reopening_a_session_replays_conversation_state() -> None:
    c = Convo()
    c.session.enter_tangent()
    c.session.create_checkpoint("1")
    c.session.add_context_file("a.md")
    reopened = Session.open(c.store, c.session.id)
    life = reopened.lifecycle.conversation
    assert (life.state, life.tangent, sorted(life.checkpoints), sorted(life.context_files)) == (
        "active", "tangent", ["1"], ["a.md"])
    with pytest.raises(IllegalTransition):
        reopened.enter_tangent()
    assert reopened.add_context_file("a.md") == c.session.version  # idempotent repeat


# --------------------------------------------------------------------------- sendable view


def state_with(history: list[m.HistoryEntry], next_message: m.UserMessage | None = None,
               tools: dict[str, tuple[m.ToolSpec, ...]] | None = None) -> m.ConversationState:
    return m.ConversationState("c", next_message, tuple(history),
                               valid_history_range(history), tools=tools or {})


def um(content: m.UserMessageContent, extra: str = "") -> m.UserMessage:
    return m.UserMessage(extra, m.UserEnvContext(), content)


def use(i: str, name: str = "fs_read", orig: str | None = None) -> m.AssistantToolUse:
    return m.AssistantToolUse(i, name, orig or name, {"a": 1}, {"o": 1})


def ok(i: str, text: str = "out") -> m.ToolUseResult:
    return m.ToolUseResult(i, (m.TextBlock(text),), "Success")


def test_orphan_missing_and_duplicate_results_are_repaired_and_reported() -> None:
    history = [
        m.HistoryEntry(um(m.Prompt("go")), m.ToolUse("a1", "", (use("t1"), use("t2")))),
        m.HistoryEntry(um(m.ToolUseResults((ok("t1"), ok("t1", "again"), ok("zz", "stray")))),
                       m.Response("a2", "done")),
    ]
    view = sendable(state_with(history, um(m.ToolUseResults((ok("t9"),)))))
    got = {(r.rule, r.ids) for r in view.repairs}
    assert ("orphan-results-to-text", ("zz",)) in got
    assert ("duplicate-results", ("t1",)) in got
    assert ("missing-results", ("t2",)) in got
    assert ("orphan-results-to-text", ("t9",)) in got  # next message after a plain response
    fixed = view.history[1].user
    assert fixed.tool_use_results() == (ok("t1"), m.cancelled_result("t2"))
    assert fixed.additional_context == "stray"
    assert view.next_message is not None
    assert view.next_message.content == m.Prompt("out")
    assert invariant_violations(view) == []
    assert invariant_violations(attrs.evolve(view, history=tuple(history))) != []


def test_dangling_tool_uses_get_cancelled_results_keeping_the_prompt() -> None:
    history = [m.HistoryEntry(um(m.Prompt("go")), m.ToolUse("a1", "", (use("t1"),)))]
    view = sendable(state_with(history, um(m.Prompt("actually, stop"))))
    assert view.next_message is not None
    assert view.next_message.content == m.CancelledToolUses(
        "actually, stop", (m.cancelled_result("t1"),))
    assert rules(view) == ["missing-results"]


def test_first_entry_results_empty_content_and_tool_names() -> None:
    tools: dict[str, tuple[m.ToolSpec, ...]] = {
        "builtin": (m.ToolSpec("fs_read"), m.ToolSpec("execute_bash")),
             "mcp:gh": (m.ToolSpec("gh___search_issues"), m.ToolSpec("other___search_issues"))}
    history = [
        m.HistoryEntry(um(m.ToolUseResults((ok("t0", "left over"),))),
                       m.ToolUse("a0", "", (use("t1", "read", orig="fs_read"),
                                            use("t2", "bash"), use("t3", "search_issues"),
                                            use("t4", "fs_read")))),
        m.HistoryEntry(um(m.ToolUseResults((
            m.ToolUseResult("t1", (), "Success"), m.ToolUseResult("t2", (m.TextBlock(""),),
                                                                  "Error"),
            ok("t3"), ok("t4")))), m.Response("a1", "")),
        m.HistoryEntry(um(m.Prompt("")), m.Response("a2", "fine")),
    ]
    view = sendable(state_with(history, tools=tools))
    assert view.history[0].user.content == m.Prompt("left over")
    names = [u.name for u in m.tool_uses_of(view.history[0].assistant)]
    assert names == ["fs_read", "execute_bash", "dummy", "fs_read"]
    restored = m.tool_uses_of(view.history[0].assistant)[0]
    assert restored.args == {"o": 1}  # orig_args come back with orig_name
    assert view.history[1].user.tool_use_results()[:2] == (  # type: ignore[index]
        m.ToolUseResult("t1", (m.TextBlock("<tool result redacted>"),), "Success"),
        m.ToolUseResult("t2", (m.TextBlock("<tool result redacted>"),), "Error"))
    assert view.history[2].user.content == m.Prompt("Empty prompt")
    got = [(r.rule, r.ids) for r in view.repairs]
    assert ("first-entry-results-to-text", ("t0",)) in got
    assert ("empty-tool-result", ("t1", "t2")) in got
    assert ("tool-name", ("t1",)) in got
    assert ("tool-name", ("t2",)) in got
    assert ("tool-name", ("t3",)) in got
    assert ("tool-name", ("t4",)) not in got
    assert ("empty-prompt", ()) in got
    assert invariant_violations(view) == []


def test_oversized_user_messages_are_cut_and_reported() -> None:
    c = Convo()
    c.prompt("x" * 500)
    view = sendable(c.state, max_user_message_size=100)
    assert view.next_message is not None
    assert len(view.next_message.prompt() or "") == 100
    assert rules(view) == ["truncate-user-message"]


def test_sendable_request_shape() -> None:
    c = Convo()
    c.session.change_tools("builtin", [ev.ToolSpec(name="fs_read")])
    c.turn("q0", "a0")
    c.session.compact_history("S", keep_last=1)
    c.prompt("now")
    request = sendable(c.state).to_request()
    assert request.conversation_id == "conv-1"
    assert len(request.history) == 4  # summary pair + one entry, flattened
    assert request.user_input_message is not None
    assert request.user_input_message.model_id == "claude-sonnet"
    assert request.user_input_message.user_input_message_context.tools == (
        m.ToolSpec("fs_read"),)


# --------------------------------------------------------------------------- purity


def test_the_conversation_modules_are_pure() -> None:
    names = sorted(p.name for p in (ROOT / "projections" / "qcli").glob("*.py"))
    assert {"fold.py", "window.py", "as_sent.py", "timetravel.py"} <= set(names)
    for name in names:
        tree = ast.parse((ROOT / "projections" / "qcli" / name).read_text(encoding="utf-8"))
        assert impurities(tree) == [], name


def test_the_fold_dispatch_is_pure() -> None:
    tree = ast.parse((ROOT / "projections" / "dispatch.py").read_text(encoding="utf-8"))
    assert impurities(tree) == []


def test_model_info_and_tools_keep_q_cli_json() -> None:
    """The event values the state reuses serialize exactly as Q CLI writes them
    (the expected JSON is what the attrs copies wrote before they were removed)."""
    s = Session.create(MemoryStore(), clock=StepClock())
    s.create_conversation("c1", model_info=ev.ModelInfo(
        model_id="claude", model_name="Claude", context_window_tokens=200000,
        rate_multiplier=1.5))
    s.change_tools("builtin", [ev.ToolSpec(name="fs_read", description="read",
                                           input_schema={"type": "object"})])
    s.change_tools("mcp", [ev.ToolSpec(name="search")], server="gh")
    state = conversation_at(s.store, s.id).state()
    text = to_json(state)
    data = json.loads(text)
    assert json.dumps({k: data[k] for k in ("model_info", "tools")}) == (
        '{"model_info": {"model_id": "claude", "model_name": "Claude", '
        '"context_window_tokens": 200000, "rate_multiplier": 1.5}, "tools": {"native___": '
        '[{"ToolSpecification": {"name": "fs_read", "description": "read", "input_schema": '
        '{"json": {"type": "object"}}}}], "gh": [{"ToolSpecification": {"name": "search", '
        '"description": "", "input_schema": {"json": {}}}}]}}')
    assert from_json(text) == state
    assert to_json(from_json(text)) == text
