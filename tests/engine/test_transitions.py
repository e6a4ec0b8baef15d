"""Every transition rule of the write side, one readable test per rule.

Each rejection must raise the right error with the right fields and leave the
log, the session version and the lifecycle exactly as they were.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

import msgspec
import pytest

from engine import events as ev
from engine import lifecycle
from engine import tables as tb
from engine.errors import (
    BUSINESS_RULES,
    DuplicateEventId,
    EventIdConflict,
    IllegalTransition,
    PartValidationError,
)
from engine.events import Event
from engine.lifecycle import Lifecycle, MessageLife, PartLife
from engine.session import PartRef, Session
from engine.store import Store
from projections import views as v
from projections.withparts import WithPartsProjection

E = TypeVar("E", bound=Exception)
FAR_FUTURE = 10**15


# --------------------------------------------------------------------------- helpers


def lifecycle_state(lc: Lifecycle) -> Any:
    """A plain-data picture of the lifecycle, to prove a rejection changed nothing."""
    return (
        lc.version,
        dict(lc.call_ids),
        {
            mid: (m.role, m.state, m.step, m.entered.id, list(m.unsettled),
                  {pid: (p.kind, p.state, p.entered.id, p.deadline) for pid, p in m.parts.items()})
            for mid, m in lc.messages.items()
        },
    )


def rejected(session: Session, command: Callable[[], object], exc: type[E]) -> E:
    """Run ``command``, expect ``exc``, and check that nothing changed."""
    log_before = list(session.store.read(session.id))
    version_before = session.version
    lc_before = lifecycle_state(session.lifecycle)
    with pytest.raises(exc) as info:
        command()
    assert list(session.store.read(session.id)) == log_before
    assert session.version == version_before == session.store.version(session.id)
    assert lifecycle_state(session.lifecycle) == lc_before
    return info.value


def illegal(session: Session, command: Callable[[], object]) -> IllegalTransition:
    return rejected(session, command, IllegalTransition)


def invalid(session: Session, command: Callable[[], object], rule: str) -> PartValidationError:
    err = rejected(session, command, PartValidationError)
    assert err.rule == rule
    assert str(err).startswith(f"{rule}: ")
    return err


def events_of(session: Session) -> list[Event]:
    return list(session.store.read(session.id))


def view(session: Session, message_id: str) -> v.WithParts:
    return WithPartsProjection(session.id).apply_all(events_of(session)).message(message_id)


def tool_view(session: Session, ref: PartRef) -> v.ToolPart:
    for part in view(session, ref.message_id).parts:
        if part.id == ref.part_id:
            assert isinstance(part, v.ToolPart)
            return part
    raise AssertionError(f"no part {ref.part_id}")


def event_time(session: Session, cls: type[Event], part_id: str) -> int:
    (e,) = [e for e in events_of(session)
            if isinstance(e, cls) and getattr(e, "part_id", None) == part_id]
    return e.time


@pytest.fixture
def mid(session: Session) -> str:
    """An open assistant message."""
    return session.start_message("assistant", agent="build")


# Ways to bring a fresh tool into each state of the TOOL table. The payloads here
# differ from the ones the sweep below attempts, so no attempt is an idempotent repeat.
REACH: dict[str, Callable[[Session, PartRef], object]] = {
    "pending": lambda s, t: None,
    "awaiting-approval": lambda s, t: s.request_approval(t, reason="setup"),
    "approved": lambda s, t: (s.request_approval(t, reason="setup"),
                              s.approve(t, reason="setup")),
    "running": lambda s, t: s.start_tool(t, title="setup"),
    "completed": lambda s, t: (s.start_tool(t, title="setup"),
                               s.complete_tool(t, "setup output")),
    "error": lambda s, t: (s.start_tool(t, title="setup"), s.fail_tool(t, "setup failure")),
    "compacted": lambda s, t: (s.start_tool(t, title="setup"),
                               s.complete_tool(t, "setup output"), s.compact_tool_output(t)),
}

ATTEMPT: dict[type[Event], Callable[[Session, PartRef], object]] = {
    ev.ToolInputDelta: lambda s, t: s.tool_input_delta(t, '{"cmd": '),
    ev.ToolInputReady: lambda s, t: s.tool_input_ready(t, {"cmd": "ls"}),
    ev.ToolApprovalRequested: lambda s, t: s.request_approval(t, reason="writes files"),
    ev.ToolApprovalGranted: lambda s, t: s.approve(t, reason="ok"),
    ev.ToolApprovalDenied: lambda s, t: s.deny(t, "no"),
    ev.ToolStarted: lambda s, t: s.start_tool(t, title="ls"),
    ev.ToolProgress: lambda s, t: s.tool_progress(t, metadata={"lines": 1}),
    ev.ToolCompleted: lambda s, t: s.complete_tool(t, "file.txt"),
    ev.ToolFailed: lambda s, t: s.fail_tool(t, "boom"),  # kind "error"
    ev.ToolOutputCompacted: lambda s, t: s.compact_tool_output(t),
}


def tool_in(session: Session, mid: str, state: str, call_id: str = "call_1") -> PartRef:
    ref = session.add_tool(mid, call_id, "bash", raw='{"cmd": "ls"}')
    REACH[state](session, ref)
    assert session.lifecycle.messages[mid].parts[ref.part_id].state == state
    return ref


# --------------------------------------------------------------------------- the tool table


def test_the_tool_table_is_the_seed_state_machine() -> None:
    assert tb.TOOL.valid_from("pending")[0] == ["pending", "awaiting-approval", "running",
                                                 "error"]
    assert tb.TOOL.valid_from("running")[0] == ["running", "completed", "error"]
    assert tb.TOOL.valid_from("completed")[0] == ["compacted"]
    assert tb.TOOL.valid_from("error") == ([], [])
    assert set(tb.TOOL.terminal) == {"error", "compacted"}


@pytest.mark.parametrize("state", list(REACH))
@pytest.mark.parametrize("event", list(ATTEMPT), ids=ev.tag_of)
def test_every_tool_move(session: Session, mid: str, state: str, event: type[Event]) -> None:
    """Moves in the table are accepted (one event); all others raise with full fields."""
    ref = tool_in(session, mid, state)
    if state == "compacted" and event is ev.ToolOutputCompacted:
        # The only payload-free event: repeating it is the idempotent no-op.
        version = session.version
        assert ATTEMPT[event](session, ref) == version == session.version
        return
    row = tb.TOOL.index.get((state, event))
    allowed = row is not None and (row.kinds is None or "error" in row.kinds)
    if allowed:
        assert row is not None
        before = session.version
        seq = ATTEMPT[event](session, ref)
        assert seq == before + 1 == session.version
        assert session.lifecycle.messages[mid].parts[ref.part_id].state == row.target
        return
    err = illegal(session, lambda: ATTEMPT[event](session, ref))
    valid, valid_events = tb.TOOL.valid_from(state)
    assert err.entity == "tool"
    assert err.session_id == session.id
    assert err.message_id == mid
    assert err.part_id == ref.part_id
    assert err.current == state
    assert err.attempted == " | ".join(tb.TOOL.targets_of[event])
    assert err.event_type == ev.tag_of(event)
    assert list(err.valid) == valid
    assert list(err.valid_events) == valid_events
    text = str(err)
    assert ev.tag_of(event) in text
    assert f"state is '{state}'" in text
    assert ref.part_id in text
    assert mid in text


def test_complete_from_pending_reads_well(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "pending")
    err = illegal(session, lambda: session.complete_tool(ref, "out"))
    assert (err.current, err.attempted) == ("pending", "completed")
    assert err.valid == ("pending", "awaiting-approval", "running", "error")
    assert "tool.started" in err.valid_events
    assert str(err) == (
        f"illegal tool.completed on tool message {mid} part {ref.part_id}: state is 'pending', "
        "attempted 'completed'; valid next states: pending, awaiting-approval, running, error "
        "via tool.input_delta, tool.input_ready, tool.approval_requested, tool.started, "
        "tool.failed"
    )


@pytest.mark.parametrize("state", ["pending", "awaiting-approval", "approved"])
@pytest.mark.parametrize("kind", ["aborted", "cancelled", "denied", "truncated"])
def test_not_yet_running_tool_may_fail_only_abort_like(
    session: Session, mid: str, state: str, kind: ev.ToolFailureKind
) -> None:
    ref = tool_in(session, mid, state)
    session.fail_tool(ref, "stopped", kind=kind)
    state_view = tool_view(session, ref).state
    assert isinstance(state_view, v.ToolStateError)
    assert state_view.metadata is not None
    assert state_view.metadata["kind"] == kind
    added = event_time(session, ev.ToolAdded, ref.part_id)
    assert state_view.time.start == added  # never ran: it starts when it was added
    assert state_view.time.end == event_time(session, ev.ToolFailed, ref.part_id)


@pytest.mark.parametrize("state", ["pending", "awaiting-approval", "approved"])
@pytest.mark.parametrize("kind", ["error", "timeout"])
def test_not_yet_running_tool_rejects_other_failure_kinds(
    session: Session, mid: str, state: str, kind: ev.ToolFailureKind
) -> None:
    ref = tool_in(session, mid, state)
    err = illegal(session, lambda: session.fail_tool(ref, "boom", kind=kind))
    assert (err.current, err.attempted) == (state, "error")
    assert "aborted, cancelled, denied, truncated" in err.reason
    assert kind in err.reason


def test_truncated_is_a_never_ran_kind_but_not_abort_like() -> None:
    """A truncated call never ran, but nobody stopped it: views must not show it as
    cancelled (the Q CLI view reads ABORT_LIKE as cancelled)."""
    assert tb.ABORT_LIKE | {"truncated"} == tb.NEVER_RAN
    assert "truncated" not in tb.ABORT_LIKE
    assert set(get_args(ev.ToolFailureKind)) >= tb.NEVER_RAN


@pytest.mark.parametrize("kind", get_args(ev.ToolFailureKind))
def test_running_tool_may_fail_with_any_kind(
    session: Session, mid: str, kind: ev.ToolFailureKind
) -> None:
    ref = tool_in(session, mid, "running")
    session.fail_tool(ref, "boom", kind=kind, metadata={"exit": 1})
    state = tool_view(session, ref).state
    assert isinstance(state, v.ToolStateError)
    assert state.error == "boom"
    assert state.metadata == {"exit": 1, "kind": kind}
    assert state.time.start == event_time(session, ev.ToolStarted, ref.part_id)  # BR-07
    assert state.time.end == event_time(session, ev.ToolFailed, ref.part_id)  # BR-08


@pytest.mark.parametrize("state", ["error", "compacted"])
def test_terminal_tool_states_accept_nothing(session: Session, mid: str, state: str) -> None:
    ref = tool_in(session, mid, state)
    for attempt in ATTEMPT.values():
        if state == "compacted" and attempt is ATTEMPT[ev.ToolOutputCompacted]:
            continue  # the identical repeat, a no-op (tested below)
        err = illegal(session, lambda a=attempt: a(session, ref))  # type: ignore[misc]
        assert err.current == state
        assert err.valid == ()
        assert "none (terminal)" in str(err)


def test_completed_tool_only_compacts(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "completed")
    err = illegal(session, lambda: session.fail_tool(ref, "late", kind="aborted"))
    assert (err.current, err.valid, err.valid_events) == (
        "completed", ("compacted",), ("tool.output_compacted",))
    seq = session.compact_tool_output(ref)
    state = tool_view(session, ref).state
    assert isinstance(state, v.ToolStateCompleted)  # still status completed
    assert state.time.compacted == events_of(session)[seq - 1].time


# --------------------------------------------------------------------------- approval


def test_approval_requested_then_approved_then_runs(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "pending")
    session.request_approval(ref, reason="writes to disk")
    assert tool_view(session, ref).approval == v.ToolApproval("requested", "writes to disk")
    assert isinstance(tool_view(session, ref).state, v.ToolStatePending)
    err = illegal(session, lambda: session.start_tool(ref))
    assert (err.current, err.valid) == ("awaiting-approval", ("approved", "error"))
    session.approve(ref)
    assert tool_view(session, ref).approval == v.ToolApproval("approved", "writes to disk")
    session.start_tool(ref)
    session.complete_tool(ref, "written")
    assert isinstance(tool_view(session, ref).state, v.ToolStateCompleted)


def test_denied_tool_ends_in_error_kind_denied(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "awaiting-approval")
    seq = session.deny(ref, "not in this repo")
    part = tool_view(session, ref)
    assert part.approval == v.ToolApproval("denied", "not in this repo")
    state = part.state
    assert isinstance(state, v.ToolStateError)
    assert state.metadata == {"kind": "denied"}
    assert "not in this repo" in state.error  # BR-10: a description
    assert state.time.end == events_of(session)[seq - 1].time
    assert session.lifecycle.messages[mid].parts[ref.part_id].state == "error"
    err = illegal(session, lambda: session.start_tool(ref))
    assert err.current == "error"


def test_approval_cannot_be_decided_twice(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "approved")
    err = illegal(session, lambda: session.deny(ref, "changed my mind"))
    assert (err.current, err.attempted) == ("approved", "error")
    assert err.valid == ("running", "error")


# --------------------------------------------------------------------------- streaming parts


def test_deltas_only_while_streaming(session: Session, mid: str) -> None:
    text = session.add_text(mid, "Hel")
    session.text_delta(text, "lo")
    session.end_part(text)
    err = illegal(session, lambda: session.text_delta(text, "!"))
    assert (err.entity, err.current, err.attempted) == ("stream part", "done", "streaming")
    assert err.valid == ()
    assert (err.message_id, err.part_id) == (mid, text.part_id)

    reasoning = session.add_reasoning(mid, streaming=False)
    err = illegal(session, lambda: session.reasoning_delta(reasoning, "more"))
    assert err.current == "done"
    part = view(session, mid).parts[0]
    assert isinstance(part, v.TextPart)
    assert part.text == "Hello"


def test_delta_to_a_missing_part(session: Session, mid: str) -> None:
    err = illegal(session, lambda: session.text_delta(PartRef(mid, "prt_missing"), "x"))
    assert (err.current, err.attempted) == ("absent", "streaming")
    assert err.part_id == "prt_missing"
    assert err.valid == ("streaming",)


def test_delta_of_the_wrong_kind(session: Session, mid: str) -> None:
    text = session.add_text(mid, "hi")
    err = illegal(session, lambda: session.reasoning_delta(text, "x"))
    assert err.current == "text streaming"
    assert err.valid == ("streaming", "done")  # what the text part could do instead
    assert "text part" in err.reason
    tool = tool_in(session, mid, "pending")
    err = illegal(session, lambda: session.text_delta(tool, "x"))
    assert err.entity == "tool"
    assert err.current == "tool pending"


def test_event_for_a_missing_message(session: Session) -> None:
    ghost = "0190a000-0000-7000-8000-000000000000"
    err = illegal(session, lambda: session.add_text(ghost, "x", part_id="prt_x"))
    assert (err.entity, err.current, err.message_id) == ("message", "absent", ghost)
    assert err.valid == ("open",)
    assert err.valid_events == ("message.started",)
    assert "does not exist" in err.reason


# --------------------------------------------------------------------------- messages


def test_no_parts_after_completion(session: Session, mid: str) -> None:
    session.complete_message(mid)
    err = illegal(session, lambda: session.add_text(mid, "late"))
    assert err.current == "message completed"
    assert "completed" in err.reason
    illegal(session, lambda: session.add_tool(mid, "c9", "bash"))
    illegal(session, lambda: session.start_step(mid))
    err = illegal(session, lambda: session.complete_message(mid, finish="stop"))
    assert (err.entity, err.current, err.valid) == ("message", "completed", ())


def test_compaction_allowed_on_a_completed_message(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "completed")
    session.complete_message(mid)
    illegal(session, lambda: session.fail_tool(ref, "late", kind="aborted"))
    seq = session.compact_tool_output(ref)
    assert seq == session.version
    assert isinstance(events_of(session)[-1], ev.ToolOutputCompacted)


def test_message_started_twice(session: Session, mid: str) -> None:
    err = illegal(session, lambda: session.start_message("assistant", message_id=mid,
                                                         agent="other"))
    assert (err.entity, err.current, err.attempted) == ("message", "open", "open")
    assert err.valid == ("open", "completed")  # open: via message.stream_ended


@pytest.mark.parametrize("unsettled", ["pending", "awaiting-approval", "approved", "running"])
def test_completion_rejected_with_unsettled_tool(
    session: Session, mid: str, unsettled: str
) -> None:
    ref = tool_in(session, mid, unsettled)
    err = illegal(session, lambda: session.complete_message(mid))
    assert (err.entity, err.current, err.attempted) == ("message", "open", "completed")
    assert ref.part_id in err.reason
    assert err.part_id is None
    assert err.message_id == mid


def test_completion_rejected_with_streaming_part(session: Session, mid: str) -> None:
    reasoning = session.add_reasoning(mid, "thinking")
    err = illegal(session, lambda: session.complete_message(mid))
    assert reasoning.part_id in err.reason
    session.end_part(reasoning)
    session.complete_message(mid)
    assert session.lifecycle.messages[mid].state == "completed"


def test_completion_rejected_with_open_step_unless_error(session: Session, mid: str) -> None:
    session.start_step(mid)
    err = illegal(session, lambda: session.complete_message(mid, finish="stop"))
    assert "step" in err.reason
    session.complete_message(mid, error=ev.MessageError(kind="api", message="HTTP 529"))
    info = view(session, mid).info
    assert isinstance(info, v.AssistantInfo)
    assert info.error == v.MessageError("api", "HTTP 529")
    assert info.time.completed == events_of(session)[-1].time  # BR-14


def test_step_start_and_finish_pair(session: Session, mid: str) -> None:
    err = illegal(session, lambda: session.finish_step(mid, "stop"))
    assert (err.entity, err.current, err.valid, err.valid_events) == (
        "step", "idle", ("in-step",), ("step.started",))
    session.start_step(mid)
    err = illegal(session, lambda: session.start_step(mid))
    assert (err.entity, err.current, err.valid, err.valid_events) == (
        "step", "in-step", ("idle",), ("step.finished",))
    session.finish_step(mid, "tool-calls")
    session.start_step(mid)
    session.finish_step(mid, "stop")
    session.complete_message(mid)
    kinds = [type(p) for p in view(session, mid).parts]
    assert kinds == [v.StepStartPart, v.StepFinishPart] * 2


# --------------------------------------------------------------------------- abort


def test_abort_settles_everything(session: Session, mid: str) -> None:
    session.start_step(mid)
    done = tool_in(session, mid, "completed", "c_done")
    pending = tool_in(session, mid, "pending", "c_pending")
    running = tool_in(session, mid, "running", "c_running")
    session.tool_progress(running, metadata={"output": "partial line\n"})
    text = session.add_text(mid, "I will")
    reasoning = session.add_reasoning(mid, "hmm")
    before = session.version

    seq = session.abort(mid, "user pressed esc")
    tail = events_of(session)[before:]
    assert seq == session.version == before + len(tail)
    assert [ev.tag_of(type(e)) for e in tail] == [
        "tool.failed", "tool.failed", "part.ended", "part.ended", "message.completed"]

    msg = view(session, mid)
    parts = {p.id: p for p in msg.parts}
    run = parts[running.part_id]
    assert isinstance(run, v.ToolPart)
    assert isinstance(run.state, v.ToolStateError)
    assert run.state.metadata == {"output": "partial line\n", "interrupted": True,
                                  "kind": "aborted"}
    assert run.state.time.start == event_time(session, ev.ToolStarted, running.part_id)
    assert run.state.time.end == event_time(session, ev.ToolFailed, running.part_id)
    assert run.state.error  # BR-10
    pend = parts[pending.part_id]
    assert isinstance(pend, v.ToolPart)
    assert isinstance(pend.state, v.ToolStateError)
    assert pend.state.metadata == {"interrupted": True, "kind": "aborted"}
    assert pend.state.time.start == event_time(session, ev.ToolAdded, pending.part_id)
    finished = parts[done.part_id]
    assert isinstance(finished, v.ToolPart)
    assert isinstance(finished.state, v.ToolStateCompleted)  # left alone
    for ref in (text, reasoning):
        p = parts[ref.part_id]
        assert isinstance(p, v.TextPart | v.ReasoningPart)
        assert p.time is not None
        assert p.time.end == event_time(session, ev.PartEnded, ref.part_id)
    info = msg.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error == v.MessageError("aborted", "user pressed esc")
    assert info.finish == "aborted"
    assert info.time.completed == tail[-1].time
    assert session.lifecycle.messages[mid].state == "completed"
    assert not session.lifecycle.messages[mid].unsettled


def test_completion_with_aborted_error_is_an_abort(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "running")
    session.complete_message(mid, error=ev.MessageError(kind="aborted", message="stop"))
    state = tool_view(session, ref).state
    assert isinstance(state, v.ToolStateError)
    assert state.metadata is not None
    assert state.metadata["kind"] == "aborted"


def test_abort_of_a_completed_message_is_rejected(session: Session, mid: str) -> None:
    session.complete_message(mid)
    err = illegal(session, lambda: session.abort(mid))
    assert err.current == "completed"


# --------------------------------------------------------------------------- timeouts


def test_expire_fails_only_running_tools_past_deadline(session: Session, mid: str) -> None:
    late = tool_in(session, mid, "pending", "c_late")
    session.start_tool(late, deadline=1_000)
    edge = tool_in(session, mid, "pending", "c_edge")
    session.start_tool(edge, deadline=2_000)
    later = tool_in(session, mid, "pending", "c_later")
    session.start_tool(later, deadline=FAR_FUTURE)
    forever = tool_in(session, mid, "running", "c_forever")
    waiting = tool_in(session, mid, "pending", "c_waiting")

    before = session.version
    expired = session.expire(now=2_000)  # a deadline at ``now`` has passed
    assert expired == [late, edge]
    assert session.version == before + 2
    for ref, deadline in ((late, 1_000), (edge, 2_000)):
        state = tool_view(session, ref).state
        assert isinstance(state, v.ToolStateError)
        assert state.metadata is not None
        assert state.metadata["kind"] == "timeout"
        assert state.metadata["deadline"] == deadline
        assert state.time.start == event_time(session, ev.ToolStarted, ref.part_id)
    for ref, status in ((later, "running"), (forever, "running"), (waiting, "pending")):
        assert session.lifecycle.messages[mid].parts[ref.part_id].state == status

    assert session.expire(now=2_001) == []
    assert session.version == before + 2


def test_expire_with_timeout_ms(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "pending")
    session.start_tool(ref, timeout_ms=50)
    assert session.expire(now=event_time(session, ev.ToolStarted, ref.part_id)) == []
    assert session.expire(now=FAR_FUTURE) == [ref]


# --------------------------------------------------------------------------- idempotency


def test_identical_repeat_is_a_noop_returning_the_original_seq(
    session: Session, mid: str
) -> None:
    ref = tool_in(session, mid, "pending")
    first = session.start_tool(ref, title="ls")
    session.tool_progress(ref, metadata={"n": 1})
    version = session.version
    assert session.start_tool(ref, title="ls") == first  # still running: entered by it
    done = session.complete_tool(ref, "out", title="ls")
    assert session.complete_tool(ref, "out", title="ls") == done
    text = session.add_text(mid, "hi")
    ended = session.end_part(text)
    assert session.end_part(text) == ended
    log = events_of(session)
    assert session.version == version + 3 == len(log)
    closed = session.complete_message(mid, finish="stop")
    assert session.complete_message(mid, finish="stop") == closed
    assert len(events_of(session)) == len(log) + 1


def test_identical_repeat_of_a_part_creation_is_a_noop(session: Session, mid: str) -> None:
    ref = session.add_tool(mid, "c1", "bash", raw="{}", part_id="prt_tool")
    seq = session.version
    again = session.add_tool(mid, "c1", "bash", raw="{}", part_id="prt_tool")
    assert again == ref
    assert session.version == seq


def test_different_payload_into_a_terminal_state_is_rejected(
    session: Session, mid: str
) -> None:
    ref = tool_in(session, mid, "pending")
    session.start_tool(ref)
    session.complete_tool(ref, "out")
    err = illegal(session, lambda: session.complete_tool(ref, "other output"))
    assert (err.current, err.attempted, err.valid) == ("completed", "completed", ("compacted",))
    failed = tool_in(session, mid, "error", "c2")
    err = illegal(session, lambda: session.fail_tool(failed, "another reason"))
    assert (err.current, err.valid) == ("error", ())


def test_raw_append_same_event_id_is_a_noop(session: Session, mid: str) -> None:
    e = ev.TextAdded(id="0190a000-0000-7000-8000-0000000000aa", message_id=mid,
                     part_id="prt_raw", text="hi")
    (seq,) = session.append([e])
    version = session.version
    assert session.append([e]) == [seq]
    assert session.version == version
    # A different payload under a stored id is a conflict (issue 9), naming where it is.
    err = rejected(session, lambda: session.append([msgspec.structs.replace(e, text="changed")]),
                   EventIdConflict)
    assert (err.event_id, err.session_id, err.seq, err.field) == (e.id, session.id, seq, "text")
    assert session.version == version


def test_raw_append_id_of_another_session(store: Store, session: Session, mid: str) -> None:
    e = ev.TextAdded(id="0190a000-0000-7000-8000-0000000000bb", message_id=mid,
                     part_id="prt_raw", text="hi")
    session.append([e])
    other = Session.create(store)
    other_mid = other.start_message("user")
    dup = msgspec.structs.replace(e, message_id=other_mid)
    err = rejected(other, lambda: other.append([dup]), DuplicateEventId)
    assert err.event_id == e.id
    assert session.id in str(err)


def test_raw_batch_is_atomic(session: Session) -> None:
    mid = "0190a000-0000-7000-8000-0000000000cc"
    batch: list[Event] = [
        ev.MessageStarted(message_id=mid, role="assistant"),
        ev.TextAdded(message_id=mid, part_id="prt_t", text="Hel"),
        ev.TextDelta(message_id=mid, part_id="prt_other", delta="lo"),  # no such part
        ev.PartEnded(message_id=mid, part_id="prt_t"),
    ]
    err = illegal(session, lambda: session.append(batch))
    assert err.batch_index == 3
    assert (err.event_type, err.part_id, err.current) == ("text.delta", "prt_other", "absent")
    assert events_of(session) == []
    assert mid not in session.lifecycle.messages

    fixed = [*batch[:2], ev.TextDelta(message_id=mid, part_id="prt_t", delta="lo"), batch[3]]
    assert session.append(fixed) == [1, 2, 3, 4]
    part = view(session, mid).parts[0]
    assert isinstance(part, v.TextPart)
    assert part.text == "Hello"


def test_raw_events_pass_the_same_tables(session: Session, mid: str) -> None:
    session.append([ev.ToolAdded(message_id=mid, part_id="prt_t", call_id="c1", tool="bash")])
    err = illegal(session, lambda: session.append(
        [ev.ToolCompleted(message_id=mid, part_id="prt_t", output="x")]))
    assert (err.current, err.attempted, err.batch_index) == ("pending", "completed", 1)


def test_raw_event_of_another_session_is_rejected(session: Session, mid: str) -> None:
    foreign = ev.TextAdded(session_id="0190a000-0000-7000-8000-0000000000dd", message_id=mid,
                           part_id="prt_x")
    invalid(session, lambda: session.append([foreign]), "session")


def test_raw_batch_with_a_repeated_id(session: Session, mid: str) -> None:
    e = ev.TextAdded(id="0190a000-0000-7000-8000-0000000000ee", message_id=mid, part_id="prt_a")
    rejected(session, lambda: session.append([e, e]), DuplicateEventId)


# --------------------------------------------------------------------------- business rules


def test_br01_part_needs_ids(session: Session, mid: str) -> None:
    invalid(session, lambda: session.append([ev.TextAdded(message_id=mid, part_id="")]),
            "BR-01")
    invalid(session, lambda: session.add_tool(mid, "", "bash"), "BR-01")
    invalid(session, lambda: session.add_tool(mid, "c1", ""), "BR-01")


def test_br02_part_ids_unique_within_message(session: Session, mid: str) -> None:
    text = session.add_text(mid, "hi")
    err = invalid(session, lambda: session.add_reasoning(mid, part_id=text.part_id), "BR-02")
    assert err.event_type == "reasoning.added"
    invalid(session, lambda: session.add_file(mid, "text/plain", "file:///a",
                                              part_id=text.part_id), "BR-02")
    # The same part id in another message is fine.
    other = session.start_message("assistant")
    session.add_text(other, "hi", part_id=text.part_id)


def test_br02_attachment_ids(session: Session, mid: str) -> None:
    text = session.add_text(mid, "hi", streaming=False)
    ref = tool_in(session, mid, "running")
    att = ev.Attachment(part_id=text.part_id, mime="image/png", url="file:///a.png")
    invalid(session, lambda: session.complete_tool(ref, "shot", attachments=[att]), "BR-02")
    ok = ev.Attachment(part_id="prt_att", mime="image/png", url="file:///a.png")
    session.complete_tool(ref, "shot", attachments=[ok])
    invalid(session, lambda: session.add_text(mid, "x", part_id="prt_att"), "BR-02")
    state = tool_view(session, ref).state
    assert isinstance(state, v.ToolStateCompleted)
    assert state.attachments == [v.FilePart("prt_att", session.id, mid, "image/png",
                                            "file:///a.png")]


def test_br04_ids_are_uuids(store: Store, session: Session) -> None:
    invalid(session, lambda: session.start_message("user", message_id="msg-1"), "BR-04")
    with pytest.raises(PartValidationError) as info:
        Session.create(store, "not-a-uuid")
    assert info.value.rule == "BR-04"
    assert all(s.id != "not-a-uuid" for s in store.sessions())
    with pytest.raises(PartValidationError):
        session.fork(session_id="fork-1")


def test_br09_completed_output_not_empty(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "running")
    invalid(session, lambda: session.complete_tool(ref, ""), "BR-09")


def test_br10_error_needs_a_description(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "running")
    invalid(session, lambda: session.fail_tool(ref, ""), "BR-10")
    invalid(session, lambda: session.fail_tool(ref, "   "), "BR-10")


def _br02(s: Session, m: str) -> Callable[[], object]:
    taken = s.add_text(m, "a").part_id
    return lambda: s.add_text(m, "b", part_id=taken)


def _br09(s: Session, m: str) -> Callable[[], object]:
    ref = tool_in(s, m, "running")
    return lambda: s.complete_tool(ref, "")


def _br10(s: Session, m: str) -> Callable[[], object]:
    ref = tool_in(s, m, "running")
    return lambda: s.fail_tool(ref, " ")


@pytest.mark.parametrize(("rule", "setup", "quoted"), [
    ("BR-01", lambda s, m: lambda: s.add_tool(m, "", "bash"), "every part must have an id"),
    ("BR-02", _br02, "unique within its message"),
    ("BR-04", lambda s, m: lambda: s.start_message("user", message_id="msg-1"), "valid UUIDs"),
    ("BR-09", _br09, "must not be an empty string"),
    ("BR-10", _br10, "describe the error"),
])
def test_a_business_rule_error_quotes_its_rule(
    session: Session, mid: str, rule: str,
    setup: Callable[[Session, str], Callable[[], object]], quoted: str,
) -> None:
    """The seed is not in the repository: the message says what the code means."""
    err = invalid(session, setup(session, mid), rule)
    assert str(err).startswith(f"{rule}: ")
    assert f"(rule {rule}: " in str(err)
    assert quoted in str(err)
    assert quoted in BUSINESS_RULES[rule]


def test_every_business_rule_code_in_the_engine_is_quoted() -> None:
    """A BR code used anywhere in the engine has its English quote."""
    used = set()
    for path in (Path(__file__).resolve().parents[2] / "engine").rglob("*.py"):
        used |= set(re.findall(r"BR-\d\d", path.read_text(encoding="utf-8")))
    assert used
    assert used <= set(BUSINESS_RULES)


def test_duplicate_call_id_rejected(session: Session, mid: str) -> None:
    first = session.add_tool(mid, "call_1", "bash")
    err = invalid(session, lambda: session.add_tool(mid, "call_1", "grep"), "callID")
    assert first.part_id in str(err)
    # Unique within a message, not a session: a model restarting at call_1 is fine.
    other = session.start_message("assistant")
    again = session.add_tool(other, "call_1", "bash")
    assert session.lifecycle.call_ids[(other, "call_1")] == again.part_id


def test_unknown_parent_message(session: Session) -> None:
    invalid(session, lambda: session.start_message(
        "assistant", parent_id="0190a000-0000-7000-8000-0000000000ff"), "parentID")


def test_rejection_leaves_the_next_command_working(session: Session, mid: str) -> None:
    ref = tool_in(session, mid, "running")
    illegal(session, lambda: session.start_tool(ref, title="again"))
    invalid(session, lambda: session.complete_tool(ref, ""), "BR-09")
    seq = session.complete_tool(ref, "fine")
    assert seq == session.version == len(events_of(session))
    reopened = Session.open(session.store, session.id)
    assert lifecycle_state(reopened.lifecycle) == lifecycle_state(session.lifecycle)


def test_identical_repeat_after_the_message_completed_is_still_a_noop(
    session: Session, mid: str
) -> None:
    ref = tool_in(session, mid, "running")
    done = session.complete_tool(ref, "out", title="ls")
    closed = session.complete_message(mid, finish="stop")
    version = session.version
    # A retry that arrives late (the agent crashed between result and ack) changes nothing.
    assert session.complete_tool(ref, "out", title="ls") == done
    assert session.complete_message(mid, finish="stop") == closed
    assert session.version == version
    with pytest.raises(IllegalTransition):
        session.complete_tool(ref, "other output", title="ls")


def test_rollback_keeps_the_order_of_open_parts(session: Session, mid: str) -> None:
    first = tool_in(session, mid, "running")
    second = session.add_text(mid, "streaming")
    order = list(session.lifecycle.messages[mid].unsettled)
    assert order == [first.part_id, second.part_id]
    batch = [ev.ToolCompleted(message_id=mid, part_id=first.part_id, output="done"),
             ev.TextDelta(message_id=mid, part_id="prt_missing", delta="x")]
    with pytest.raises(IllegalTransition):
        session.append(batch)
    # The rejected batch settled the tool and was rolled back: same parts, same order,
    # so an abort now settles them exactly as a rebuild from the log would.
    assert list(session.lifecycle.messages[mid].unsettled) == order
    rebuilt = Session.open(session.store, session.id)
    assert list(rebuilt.lifecycle.messages[mid].unsettled) == order


# --------------------------------------------------------------------------- delta fast path

_PART_STATES = sorted({s for t in (tb.STREAM, tb.TOOL, tb.PART) for r in t.rows
                       for s in (r.source, r.target) if s != tb.ABSENT})
_KINDS = sorted(set(tb.PART_KIND.values()))
_MID, _PID = "0190a2b4-0000-7000-8000-000000000001", "prt_x"
_STARTED = ev.MessageStarted(message_id=_MID, role="assistant")


def _lifecycle_at(msg_state: str, kind: str, state: str) -> Lifecycle:
    """A lifecycle at version 7 with one message and one part in the given states."""
    lc = Lifecycle("s")
    lc.version = 7
    msg = MessageLife("assistant", _STARTED)
    msg.state = msg_state
    msg.parts[_PID] = PartLife(kind, state, _STARTED)
    lc.messages[_MID] = msg
    return lc


def _verdict(run: Callable[[], object]) -> object:
    try:
        return run()
    except (IllegalTransition, PartValidationError) as exc:
        return type(exc)


@pytest.mark.parametrize("cls", [c for c in ev.EVENT_TYPES if c in lifecycle._SELF_LOOP])
def test_the_delta_fast_path_decides_like_the_full_check(cls: type[Event]) -> None:
    """For every message state, part kind and part state: same verdict, same fold."""
    names = {f.name for f in msgspec.structs.fields(cls)}
    values: dict[str, Any] = {"message_id": _MID, "part_id": _PID, "seq": 8, "id": "e1",
                              "delta": "x", "fragment": "{", "input": {}}
    event = cls(**{k: v for k, v in values.items() if k in names})
    cases = [(m, k, s) for m in ("open", "completed") for k in _KINDS for s in _PART_STATES]
    accepted = 0
    for case in cases:
        full = _verdict(lambda case=case: _lifecycle_at(*case).check(event))  # type: ignore[misc]
        fast = _lifecycle_at(*case)
        fast.begin()
        verdict = _verdict(lambda fast=fast: fast.apply(event))  # type: ignore[misc]
        if isinstance(full, type):
            assert verdict is full, case
            continue
        accepted += 1
        assert full is not None, case  # a row, not an idempotent repeat
        assert verdict is True, case
        assert fast.version == 8
        assert (fast.messages[_MID].state, fast.messages[_MID].parts[_PID].state) == case[::2]
        fast.rollback()
        assert fast.version == 7
    assert accepted == len(lifecycle._SELF_LOOP[cls][1])  # one legal part state each


def test_the_fast_path_is_derived_from_the_entity_declarations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An event type that gains a rule or an evolve step leaves the fast path by itself,
    and the fast path holds exactly the rule-free self-loops of the message's parts."""
    from engine import messages  # noqa: PLC0415

    fast = set(lifecycle._SELF_LOOP)
    assert fast == {ev.TextDelta, ev.ReasoningDelta, ev.ToolInputDelta, ev.ToolInputReady,
                    ev.ToolProgress}
    assert fast.isdisjoint(messages.RULES)
    assert fast.isdisjoint(messages.EVOLVES)

    def no_empty_deltas(_: messages.Messages, e: ev.TextDelta) -> None:
        if not e.delta:
            raise PartValidationError("delta", "empty")

    rules: dict[type[Event], Any] = messages.RULES
    evolves: dict[type[Event], Any] = messages.EVOLVES
    delta: type[Event] = ev.TextDelta
    progress: type[Event] = ev.ToolProgress
    monkeypatch.setitem(rules, delta, (no_empty_deltas,))
    assert ev.TextDelta not in lifecycle._self_loops()
    monkeypatch.delitem(rules, delta)
    monkeypatch.setitem(evolves, progress, (lambda *_: None,))
    assert ev.ToolProgress not in lifecycle._self_loops()
    assert lifecycle._self_loops().keys() == fast - {ev.ToolProgress}


def test_the_rules_are_the_entities_rules() -> None:
    """RULES and EVOLVES are gathered from the declarations, in declaration order."""
    from engine import messages  # noqa: PLC0415

    gathered: dict[type[Event], list[object]] = {}
    for entity in messages.ENTITIES:
        for cls, rule in entity.rules.items():
            gathered.setdefault(cls, []).append(rule)
    assert {c: list(r) for c, r in messages.RULES.items()} == gathered
    assert messages.RULES[ev.StepStarted] == (messages.STEP.rules[ev.StepStarted],
                                              messages.PART.rules[ev.StepStarted])
