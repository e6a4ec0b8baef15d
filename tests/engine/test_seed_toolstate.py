"""The seed's ToolState machine (part-abstraction-toolstate, sections 3.4, 5.2, 6, 7.1),
checked by an oracle written from the seed, not from the tables.

The seed's machine is ``pending -> running -> (completed | error)`` (BR-05); running
records ``time.start`` (BR-07), completed and error record ``time.end`` (BR-08), a
completed output is not the empty string (BR-09), an error describes itself (BR-10).
A repeat of the transition into the current state is allowed (7.1, idempotence);
convlog reads that as "the same event again" (same payload: a no-op that appends
nothing), so a *different* start of a running tool is refused. convlog's one
documented widening: a tool that never ran may go ``pending -> error`` with a kind
that says why it never ran (``aborted``, ``cancelled``, ``denied``, ``truncated``),
so an abort can settle it. Every refusal is ``InvalidStateTransition`` (or a
``PartValidationError`` naming its rule) and leaves the log as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import (
    TOOL_STATUS,
    IllegalTransition,
    InvalidStateTransition,
    PartValidationError,
)
from engine.messages import NEVER_RAN
from engine.session import PartRef, Session, StepClock
from engine.store import MemoryStore
from engine.tables import TOOL
from projections import views as v
from projections.withparts import WithPartsProjection

SEED_STATUSES = ("pending", "running", "completed", "error")
TITLES = st.sampled_from([None, "a", "b"])
OUTPUTS = st.sampled_from(["", "out", "out2", " "])
ERRORS = st.sampled_from(["", " ", "boom", "other"])
KINDS = st.sampled_from(["error", "timeout", "aborted", "cancelled", "denied", "truncated"])
COMMANDS = st.one_of(
    st.tuples(st.just("start"), TITLES),
    st.tuples(st.just("complete"), OUTPUTS),
    st.tuples(st.just("fail"), st.tuples(ERRORS, KINDS)),
)


class SeedTool:
    """The seed's ToolState machine, with convlog's documented never-ran failure."""

    def __init__(self) -> None:
        self.status = "pending"
        self.entered: tuple[str, Any] | None = None  # the command that entered the status

    def decide(self, cmd: str, arg: Any) -> str:
        """``accept``, ``noop`` or the refusal's error class name (and rule)."""
        if self.entered == (cmd, arg):
            return "noop"  # 7.1: the same transition again is idempotent
        if self.status == "pending":
            if cmd == "start":
                return "accept"
            if cmd == "fail" and arg[1] in NEVER_RAN:
                return "BR-10" if not arg[0].strip() else "accept"
            return "InvalidStateTransition"
        if self.status == "running":
            if cmd == "complete":
                return "BR-09" if arg == "" else "accept"
            if cmd == "fail":
                return "BR-10" if not arg[0].strip() else "accept"
        return "InvalidStateTransition"  # BR-05: nothing else, and nothing after the end

    def move(self, cmd: str, arg: Any) -> None:
        self.status = {"start": "running", "complete": "completed", "fail": "error"}[cmd]
        self.entered = (cmd, arg)


def tool_part(proj: WithPartsProjection, message_id: str) -> v.ToolPart:
    (part,) = [p for p in proj.message(message_id).parts if isinstance(p, v.ToolPart)]
    return part


def run(s: Session, ref: PartRef, cmd: str, arg: Any
        ) -> IllegalTransition | PartValidationError | None:
    """Run one tool command; the refusal it raised, or None."""
    try:
        if cmd == "start":
            s.start_tool(ref, title=arg)
        elif cmd == "complete":
            s.complete_tool(ref, arg)
        else:
            s.fail_tool(ref, arg[0], kind=arg[1])
    except (IllegalTransition, PartValidationError) as exc:
        return exc
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(COMMANDS, max_size=8))
def test_br_05_any_sequence_of_tool_commands_follows_the_seeds_machine(
        commands: list[tuple[str, Any]]) -> None:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    mid = s.start_message("assistant")
    ref = s.add_tool(mid, "call-1", "bash", raw='{"cmd": "ls"}')
    seed = SeedTool()
    statuses = ["pending"]
    for cmd, arg in commands:
        before = list(store.read(s.id))
        want = seed.decide(cmd, arg)
        refused = run(s, ref, cmd, arg)
        if isinstance(refused, IllegalTransition):
            assert want == "InvalidStateTransition", (cmd, arg, want)
            assert refused.name == "InvalidStateTransition"
            assert refused.details["currentStatus"] == seed.status
            valid = refused.details["validTransitions"]
            assert isinstance(valid, list)
            assert set(valid) <= set(SEED_STATUSES)
            assert list(store.read(s.id)) == before  # the log is unchanged
            continue
        if refused is not None:
            assert want == refused.rule, (cmd, arg, want)
            assert list(store.read(s.id)) == before
            continue
        after = list(store.read(s.id))
        if want == "noop":
            assert after == before
            continue
        assert want == "accept", (cmd, arg, want)
        assert len(after) == len(before) + 1
        seed.move(cmd, arg)
        state = tool_part(proj, mid).state
        assert seed.status == type(state).TAG
        statuses.append(type(state).TAG)
        event_time = after[-1].time
        if isinstance(state, v.ToolStateRunning):
            assert state.time.start == event_time  # BR-07
        elif isinstance(state, v.ToolStateCompleted | v.ToolStateError):
            assert state.time.end == event_time  # BR-08
            assert state.time.start <= state.time.end
    # BR-05: the statuses seen are a path of the seed's machine (never backwards).
    order = {"pending": 0, "running": 1, "completed": 2, "error": 2}
    assert [order[x] for x in statuses] == sorted(order[x] for x in statuses)
    assert statuses.count("completed") + statuses.count("error") <= 1


def test_br_06_pending_keeps_the_raw_arguments() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    mid = s.start_message("assistant")
    ref = s.add_tool(mid, "call-1", "bash", raw='{"cmd": "l')
    s.tool_input_delta(ref, 's"}')
    assert tool_part(proj, mid).state == v.ToolStatePending(input={}, raw='{"cmd": "ls"}')


def test_timeout_moves_running_to_error() -> None:
    """7.1 boundary: a timeout turns running into error, by itself (``expire``)."""
    clock = StepClock()
    s = Session.create(MemoryStore(), clock=clock)
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    mid = s.start_message("assistant")
    ref = s.add_tool(mid, "call-1", "bash", raw="{}")
    s.start_tool(ref, timeout_ms=1000)
    life = s.lifecycle.part(*ref)
    assert life is not None
    assert life.deadline is not None
    assert s.expire(life.deadline - 1) == []  # one below the deadline: still running
    assert s.expire(life.deadline) == [ref]  # at the deadline: error
    state = tool_part(proj, mid).state
    assert isinstance(state, v.ToolStateError)
    assert state.metadata is not None
    assert state.metadata["kind"] == "timeout"


def test_the_seeds_error_name_is_an_alias() -> None:
    assert InvalidStateTransition is IllegalTransition


@pytest.mark.parametrize("state", sorted({r.source for r in TOOL.rows} - {"absent"}))
def test_every_tool_state_reads_as_a_seed_status(state: str) -> None:
    assert TOOL_STATUS.get(state, state) in SEED_STATUSES


def test_invalid_state_transition_details_are_the_seeds() -> None:
    """6.2: ``name``, ``message``, ``details.{currentStatus, attemptedStatus,
    validTransitions}``; an approval state reads as ``pending``."""
    s = Session.create(MemoryStore())
    mid = s.start_message("assistant")
    ref = s.add_tool(mid, "call-1", "bash", raw="{}")
    s.request_approval(ref)
    with pytest.raises(InvalidStateTransition) as err:
        s.complete_tool(ref, "out")
    seed = err.value.to_seed()
    assert seed["name"] == "InvalidStateTransition"
    assert seed["message"] == str(err.value)
    assert seed["details"] == {"currentStatus": "pending", "attemptedStatus": "completed",
                               "validTransitions": ["pending", "error"]}
    s.approve(ref)
    s.start_tool(ref)
    s.complete_tool(ref, "out")
    with pytest.raises(InvalidStateTransition) as err:
        s.start_tool(ref)
    assert err.value.details == {"currentStatus": "completed", "attemptedStatus": "running",
                                 "validTransitions": ["completed"]}  # only compaction


def test_a_non_tool_entity_keeps_its_table_states_in_details() -> None:
    s = Session.create(MemoryStore())
    mid = s.start_message("assistant")
    s.complete_message(mid)
    with pytest.raises(InvalidStateTransition) as err:
        s.append([ev.MessageCompleted(message_id=mid, finish="other")])
    assert err.value.details == {"currentStatus": "completed", "attemptedStatus": "completed",
                                 "validTransitions": []}
