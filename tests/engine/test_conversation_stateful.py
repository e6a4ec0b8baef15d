"""Hypothesis drives a conversation at random; the fold must hold up after every step.

Rules: prompts, plain replies, tool turns whose tools complete, fail, are denied,
cancelled or aborted, tangents (a nested enter or a stray exit must be rejected
and leave the log unchanged), compactions, clears, checkpoints and restores
(unknown tags rejected), next-message commands and compacted tool outputs.
Invariants after every step: the live fold equals a rebuild from the log, the
sendable view satisfies every invariant, the state survives its JSON, the valid
range follows the rule, and the write side agrees about tangent mode.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engine import events as ev
from engine.errors import IllegalTransition
from engine.session import PartRef
from projections.qcli.limits import valid_history_range
from projections.qcli.sendable import invariant_violations, sendable
from projections.qcli.serialize import from_json, to_json
from tests.support.qcli_helpers import Convo, Outcome

HISTORY_CAP = 12  # small, so trimming and the valid range move during a run
TRANSCRIPT_CAP = 15

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)  # no lone surrogates
outcomes: st.SearchStrategy[list[Outcome]] = st.lists(
    st.sampled_from(["ok", "fail", "deny", "cancel", "abort"]), min_size=1, max_size=3)


class ConversationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.c = Convo(history_cap=HISTORY_CAP, transcript_cap=TRANSCRIPT_CAP)
        self.in_tangent = False
        self.tags: list[str] = []
        self.calls = 0
        self.compacted: set[tuple[str, str]] = set()

    def rejected(self, command: object) -> None:
        version = self.c.session.version
        with pytest.raises(IllegalTransition):
            command()  # type: ignore[operator]
        assert self.c.session.version == version

    # ------------------------------------------------------------------ messages

    @rule(text=texts)
    def prompt(self, text: str) -> None:
        self.c.prompt(text)

    @rule(text=texts)
    def reply(self, text: str) -> None:
        self.c.reply(text)

    @rule(text=texts, ends=outcomes)
    def tool_turn(self, text: str, ends: list[Outcome]) -> None:
        tools = []
        for end in ends:
            self.calls += 1
            tools.append((f"call_{self.calls}", "fs_read" if self.calls % 2 else "bash", end))
        self.c.reply(text, tools)

    @rule(data=st.data())
    def compact_a_tool_output(self, data: st.DataObject) -> None:
        done = [(e.message_id, e.part_id) for e in self.c.store.read(self.c.session.id)
                if isinstance(e, ev.ToolCompleted)
                and (e.message_id, e.part_id) not in self.compacted]
        if not done:
            return
        key = data.draw(st.sampled_from(done))
        self.c.session.compact_tool_output(PartRef(*key))
        self.compacted.add(key)

    @rule(text=texts)
    def set_next_message(self, text: str) -> None:
        self.c.session.set_next_message(text, additional_context="ctx" if text else "")

    @rule()
    def clear_next_message(self) -> None:
        self.c.session.clear_next_message()

    # ------------------------------------------------------------------ conversation

    @rule()
    def enter_tangent(self) -> None:
        if self.in_tangent:
            self.rejected(self.c.session.enter_tangent)
        else:
            self.c.session.enter_tangent()
            self.in_tangent = True

    @rule(tail=st.sampled_from(["none", "last_entry", "thread"]))
    def exit_tangent(self, tail: ev.TangentTail) -> None:
        if not self.in_tangent:
            self.rejected(lambda: self.c.session.exit_tangent(tail))
        else:
            self.c.session.exit_tangent(tail)
            self.in_tangent = False

    @rule(keep=st.integers(min_value=0, max_value=4), summary=texts)
    def compact(self, keep: int, summary: str) -> None:
        self.c.session.compact_history(f"summary: {summary}", keep_last=keep)

    @rule()
    def clear(self) -> None:
        self.c.session.clear_history()

    @rule()
    def checkpoint(self) -> None:
        tag = str(len(self.tags))
        self.c.session.create_checkpoint(tag, is_turn=len(self.tags) % 3 != 2)
        self.tags.append(tag)

    @precondition(lambda self: bool(self.tags))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        self.c.session.restore_checkpoint(data.draw(st.sampled_from(self.tags)))

    @rule()
    def restore_unknown(self) -> None:
        self.rejected(lambda: self.c.session.restore_checkpoint("no-such-tag"))

    @rule(path=st.sampled_from(["a.py", "b.py"]), before=st.integers(0, 50),
          added=st.integers(0, 20))
    def file_lines(self, path: str, before: int, added: int) -> None:
        self.c.session.change_file_lines(path, before_lines=before, after_lines=before + added,
                                         lines_added_by_agent=added)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def equals_a_rebuild_from_the_log(self) -> None:
        assert self.c.state == self.c.rebuilt()

    @invariant()
    def sendable_view_satisfies_the_invariants(self) -> None:
        view = sendable(self.c.state, history_cap=HISTORY_CAP)
        assert invariant_violations(view) == []

    @invariant()
    def json_round_trips(self) -> None:
        state = self.c.state
        assert from_json(to_json(state)) == state

    @invariant()
    def valid_range_follows_the_rule(self) -> None:
        state = self.c.state
        assert len(state.history) <= HISTORY_CAP
        assert len(state.transcript) <= TRANSCRIPT_CAP
        assert state.valid_history_range == valid_history_range(state.history, HISTORY_CAP)

    @invariant()
    def both_sides_agree_about_tangent_mode(self) -> None:
        tangent = self.c.session.lifecycle.conversation.tangent == "tangent"
        assert tangent == self.in_tangent == self.c.state.is_in_tangent_mode()


def test_conversation_machine() -> None:
    run_state_machine_as_test(ConversationMachine, settings=settings(
        max_examples=100, stateful_step_count=40, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
