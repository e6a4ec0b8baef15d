"""A tool whose streamed argument text is empty (one empty fragment: the SDK's
arguments are "") keeps ``raw == ""`` through a snapshot and a restore, as the live
fold has it; ``None`` means no argument text was streamed at all."""

from __future__ import annotations

import pytest

from engine import events as ev
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections.withparts import WithPartsProjection

MID = "0190a000-0000-7000-8000-0000000000bb"


@pytest.mark.parametrize(("fragments", "raw"), [([""], ""), ([], None), (["{}"], "{}")])
def test_restored_from_a_pending_snapshot_the_tool_keeps_its_raw(
        fragments: list[str], raw: str | None) -> None:
    session = Session.create(MemoryStore(), clock=StepClock())
    live = WithPartsProjection(session.id)
    session.subscribe(live)
    session.record([ev.MessageStarted(message_id=MID, role="assistant"),
                    ev.ToolAdded(message_id=MID, part_id="prt_t", call_id="c1", tool="bash")])
    session.record([ev.ToolInputDelta(message_id=MID, part_id="prt_t", fragment=f)
                    for f in fragments])
    restored = WithPartsProjection.restore(session.id, live.snapshot())
    session.subscribe(restored)
    session.record([ev.ToolFailed(message_id=MID, part_id="prt_t", error="x", kind="aborted")])
    assert restored.messages() == live.messages()
    assert live.messages()[0].parts[0].raw == raw  # type: ignore[union-attr]
