"""``Lifecycle.apply_batch`` decides a batch as ``apply`` per event decides it: the
inline delta path and its shortcut for the next delta on the same part (any other
event in between drops the shortcut), and the inline part steps (a part created, a
part moved along a plain row: a block's start and end, a tool's approval and start)
accept, refuse, fold and roll back exactly the same."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import ConvlogError
from engine.events import Event
from engine.lifecycle import Lifecycle

MID = "0190a2b4-0000-7000-8000-000000000001"
PARTS = ["prt_a", "prt_b"]  # the same str objects in every event: the shortcut's case


class _PerEvent(Lifecycle):
    def apply(self, e: Event) -> bool:  # an override: apply_batch calls it for every event
        return super().apply(e)


def _event(kind: str, part: int) -> Event:
    pid = PARTS[part]
    made: dict[str, Any] = {
        "text": lambda: ev.TextAdded(message_id=MID, part_id=pid),
        "delta": lambda: ev.TextDelta(message_id=MID, part_id=pid, delta="x"),
        "reasoning": lambda: ev.ReasoningDelta(message_id=MID, part_id=pid, delta="y"),
        "end": lambda: ev.PartEnded(message_id=MID, part_id=pid),
        "tool": lambda: ev.ToolAdded(message_id=MID, part_id=pid, call_id=f"c{part}",
                                     tool="t"),
        "fragment": lambda: ev.ToolInputDelta(message_id=MID, part_id=pid, fragment="{"),
        "ready": lambda: ev.ToolInputReady(message_id=MID, part_id=pid, input={}),
        "started": lambda: ev.ToolStarted(message_id=MID, part_id=pid, deadline=part + 5),
        "complete": lambda: ev.MessageCompleted(message_id=MID),
        "thinking": lambda: ev.ReasoningAdded(message_id=MID, part_id=pid),
        "step": lambda: ev.StepStarted(message_id=MID, part_id=pid),
        "finish": lambda: ev.StepFinished(message_id=MID, part_id=pid, reason="stop"),
        "ask": lambda: ev.ToolApprovalRequested(message_id=MID, part_id=pid),
        "grant": lambda: ev.ToolApprovalGranted(message_id=MID, part_id=pid),
        "deny": lambda: ev.ToolApprovalDenied(message_id=MID, part_id=pid, reason="no"),
        "done": lambda: ev.ToolCompleted(message_id=MID, part_id=pid, output="ok"),
        "fail": lambda: ev.ToolFailed(message_id=MID, part_id=pid, error="e", kind="aborted"),
        "file": lambda: ev.FileAdded(message_id=MID, part_id=pid, mime="text/plain",
                                     url="file:///x"),
        "empty": lambda: ev.TextAdded(message_id=MID, part_id=""),  # BR-01 refuses it
        "other": lambda: ev.TextDelta(message_id="0190a2b4-0000-7000-8000-00000000000f",
                                      part_id=pid, delta="z"),
    }
    return made[kind]()  # type: ignore[no-any-return]


KINDS = ["text", "delta", "reasoning", "end", "tool", "fragment", "ready", "started",
         "complete", "thinking", "step", "finish", "ask", "grant", "deny", "done", "fail",
         "file", "empty", "other"]


def _run(lc: Lifecycle, batches: list[list[Event]]) -> list[Any]:
    out: list[Any] = []
    for batch in batches:
        lc.begin()
        try:
            accepted = lc.apply_batch(batch)
        except ConvlogError as exc:
            lc.rollback()
            out.append(type(exc).__name__)
            continue
        lc.commit()
        out.append([(type(e).__name__, e.seq) for e in accepted])
    msg = lc.messages[MID]
    out.append((lc.version, msg.state, msg.step,
                sorted((p, life.kind, life.state, life.entered.seq, life.deadline)
                       for p, life in msg.parts.items()),
                list(msg.unsettled.items()), sorted(lc.call_ids.items())))
    return out


# Kinds drawn mostly on one part, so that a delta often follows a delta, an end or a
# completion of the same part within a batch.
EVENTS = st.tuples(st.sampled_from(KINDS), st.sampled_from([0, 0, 0, 1]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(EVENTS, min_size=1, max_size=10), min_size=1, max_size=6))
# A delta passes, the part ends, the next delta on it must be refused (the shortcut's
# trap); the same after the message completes; a tool's fragments around its ready.
@example([[("text", 0), ("delta", 0), ("end", 0), ("delta", 0)]])
@example([[("text", 0), ("delta", 0), ("complete", 0), ("delta", 0)]])
@example([[("tool", 0), ("fragment", 0), ("ready", 0), ("fragment", 0), ("started", 0),
           ("fragment", 0)]])
# A block started and ended in one batch, then a refused event rolls it all back; a
# tool's call id registered in a batch that is then refused (the id is free again).
@example([[("text", 0), ("delta", 0), ("end", 0), ("text", 1), ("end", 1), ("delta", 1)],
          [("text", 0)]])
@example([[("tool", 0), ("ask", 0), ("grant", 0), ("started", 0), ("end", 0)],
          [("tool", 0), ("done", 0)]])
@example([[("step", 0), ("thinking", 1), ("finish", 0)], [("step", 1), ("complete", 0)]])
def test_a_batch_is_decided_as_event_by_event(batches: list[list[tuple[str, int]]]) -> None:
    start = ev.MessageStarted(message_id=MID, role="assistant", seq=1)
    plans = [[_event(kind, part) for kind, part in batch] for batch in batches]
    results = []
    for lc in (Lifecycle("s"), _PerEvent("s")):
        lc.begin()
        lc.apply(start)
        lc.commit()
        results.append(_run(lc, plans))
    assert results[0] == results[1]
