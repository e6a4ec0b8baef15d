"""``Lifecycle.apply_batch`` decides a batch as ``apply`` per event decides it: the
inline delta path and its shortcut for the next delta on the same part (any other
event in between drops the shortcut) accept, refuse and fold exactly the same."""

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
        "started": lambda: ev.ToolStarted(message_id=MID, part_id=pid),
        "complete": lambda: ev.MessageCompleted(message_id=MID),
    }
    return made[kind]()  # type: ignore[no-any-return]


KINDS = ["text", "delta", "reasoning", "end", "tool", "fragment", "ready", "started",
         "complete"]


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
    out.append((lc.version, msg.state,
                sorted((p, life.kind, life.state) for p, life in msg.parts.items()),
                list(msg.unsettled)))
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
