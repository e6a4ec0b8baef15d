"""Shared helpers for the Q CLI conversation tests: a session with a conversation fold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from engine import events as ev
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections.qcli import messages as m
from projections.qcli.fold import ConversationFold

Outcome = Literal["ok", "fail", "deny", "cancel", "abort"]


class Convo:
    """A memory-store session whose events a :class:`ConversationFold` follows live."""

    def __init__(self, *, create: bool = True, **caps: int) -> None:
        self.clock = StepClock()
        self.store = MemoryStore()
        self.session = Session.create(self.store, clock=self.clock)
        self.caps = caps
        self.fold = ConversationFold(self.session.id, **caps)
        self.session.subscribe(self.fold)
        if create:
            self.session.create_conversation(
                "conv-1", model_info=ev.ModelInfo(model_id="claude-sonnet"), os="linux",
                cwd="/repo")

    @property
    def state(self) -> m.ConversationState:
        return self.fold.state()

    def rebuilt(self, seq: int | None = None) -> m.ConversationState:
        last = self.session.version if seq is None else seq
        fold = ConversationFold(self.session.id, **self.caps)
        return fold.apply_all(self.store.read(self.session.id, 1, last)).state()

    def prompt(self, text: str) -> str:
        return self.session.user_message(text)

    def reply(self, text: str = "ok", tools: Sequence[tuple[str, str, Outcome]] = (), *,
              error: ev.MessageError | None = None,
              tool_metadata: dict[str, Any] | None = None) -> str:
        """An assistant message: text, then tools that end as ``outcome`` says."""
        s = self.session
        mid = s.start_message("assistant")
        if text:
            s.add_text(mid, text, streaming=False)
        aborting = False
        for call_id, name, outcome in tools:
            ref = s.add_tool(mid, call_id, name, input={"arg": call_id}, metadata=tool_metadata)
            if outcome == "ok":
                s.start_tool(ref)
                s.complete_tool(ref, f"output of {call_id}")
            elif outcome == "fail":
                s.start_tool(ref)
                s.fail_tool(ref, f"{call_id} failed")
            elif outcome == "deny":
                s.request_approval(ref)
                s.deny(ref, "no")
            elif outcome == "cancel":
                s.fail_tool(ref, "cancelled", kind="cancelled")
            else:
                s.start_tool(ref)
                aborting = True
        if aborting:
            s.abort(mid, "user pressed ctrl-c")
        else:
            s.complete_message(mid, error=error)
        return mid

    def turn(self, prompt: str, answer: str = "ok") -> None:
        self.prompt(prompt)
        self.reply(answer)
