"""An import's session is checked as one batch (``write._batch``: the tables' batch
check, then the door over the whole batch, its stamped envelope vouched for) and,
when that refuses, again event by event (``write._one_by_one``) to name the first
refusal. Both must reach the same verdict on every sequence: a legal one gives the
same events and the same stored bytes, an illegal one (out of table order, a time
out of range, an actor of the wrong type, a repeated id) is refused by both with
the same typed error."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import ConvlogError
from engine.events import Event
from engine.importers.base import ImportReport, Plan, PlannedSession
from engine.importers.write import _batch, _one_by_one

SID = "0190a2b4-0000-7000-8000-0000000000aa"
MIDS = ["0190a2b4-0000-7000-8000-000000000001", "0190a2b4-0000-7000-8000-000000000002"]
PARTS = ["prt_a", "prt_b"]

# The envelope values an importer may leave in an event (time, actor): most in range,
# some the door refuses (a negative or 65-bit time, a bool, a non-str actor).
TIMES: list[Any] = [0, 1, 1_788_444_001_000, (1 << 63) - 1, 1 << 63, -1, True, 2.5]
ACTORS: list[Any] = ["", "importer", 7, None]


def _event(kind: str, m: int, p: int) -> Event:
    mid, pid = MIDS[m], PARTS[p]
    made: dict[str, Any] = {
        "user": lambda: ev.MessageStarted(message_id=mid, role="user"),
        "assistant": lambda: ev.MessageStarted(message_id=mid, role="assistant"),
        "text": lambda: ev.TextAdded(message_id=mid, part_id=pid, text="hi"),
        "reasoning": lambda: ev.ReasoningAdded(message_id=mid, part_id=pid, text="think",
                                               metadata={"openai": {"summary": ["a"]}}),
        "end": lambda: ev.PartEnded(message_id=mid, part_id=pid),
        "tool": lambda: ev.ToolAdded(message_id=mid, part_id=pid, call_id=f"c{p}",
                                     tool="shell", input={"command": "ls"}),
        "started": lambda: ev.ToolStarted(message_id=mid, part_id=pid),
        "done": lambda: ev.ToolCompleted(message_id=mid, part_id=pid, output="ok"),
        "fail": lambda: ev.ToolFailed(message_id=mid, part_id=pid, error="e",
                                      kind="aborted"),
        "complete": lambda: ev.MessageCompleted(message_id=mid),
    }
    return made[kind]()  # type: ignore[no-any-return]


KINDS = ["user", "assistant", "text", "reasoning", "end", "tool", "started", "done",
         "fail", "complete"]

steps = st.tuples(st.sampled_from(KINDS), st.integers(0, 1), st.integers(0, 1),
                  st.sampled_from(range(len(TIMES))), st.sampled_from(range(len(ACTORS))),
                  st.booleans())


def _plan(chosen: list[tuple[str, int, int, int, int, bool]]) -> tuple[Plan, PlannedSession]:
    events: list[Event] = []
    for n, (kind, m, p, t, a, fine) in enumerate(chosen):
        e = _event(kind, m, p)
        # Most events keep a legal envelope, so that long legal runs are common.
        time, actor = (TIMES[2], "") if fine else (TIMES[t], ACTORS[a])
        events.append(msgspec.structs.replace(e, id=f"0190a2b4-0000-7000-8000-{n:012x}",
                                              time=time, actor=actor))
    planned = PlannedSession(SID, "main", events, created=5)
    return Plan(ImportReport("test.jsonl", "codex"), [planned]), planned


def _outcome(check: Any, plan: Plan, planned: PlannedSession) -> Any:
    try:
        mine, canon = check(plan, planned, [], set())
    except (ConvlogError, OverflowError, TypeError, ValueError) as exc:
        return ("refused", type(exc).__name__)
    return ("accepted", [type(e).__name__ for e in mine], [e.seq for e in mine], canon)


LEGAL = [("user", 0, 0, 2, 0, True), ("text", 0, 0, 2, 0, True), ("end", 0, 0, 2, 0, True),
         ("complete", 0, 0, 2, 0, True), ("assistant", 1, 0, 2, 0, True),
         ("reasoning", 1, 0, 2, 0, True), ("end", 1, 0, 2, 0, True),
         ("tool", 1, 1, 2, 0, True), ("started", 1, 1, 2, 0, True),
         ("done", 1, 1, 2, 0, True), ("complete", 1, 0, 2, 0, True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, max_size=16))
@example(LEGAL)
@example([*LEGAL[:7], ("tool", 1, 1, 5, 0, False), *LEGAL[8:]])  # a negative time
@example([*LEGAL[:7], ("tool", 1, 1, 4, 0, False), *LEGAL[8:]])  # past 64 bits
@example([*LEGAL[:7], ("tool", 1, 1, 2, 2, False), *LEGAL[8:]])  # an int actor
@example([*LEGAL[:7], ("tool", 1, 1, 6, 0, False), *LEGAL[8:]])  # a bool time
@example([*LEGAL[:3], *LEGAL[5:]])  # no message.completed before the next message
def test_the_batch_check_and_the_per_event_check_agree(
        chosen: list[tuple[str, int, int, int, int, bool]]) -> None:
    plan, planned = _plan(chosen)
    batch = _outcome(_batch, plan, planned)
    plan, planned = _plan(chosen)
    one = _outcome(_one_by_one, plan, planned)
    if batch[0] == "refused":
        # The batch refuses; write._checked then names the error event by event.
        assert one[0] == "refused", (batch, one)
    else:
        assert one == batch


def test_a_legal_session_is_vouched_and_stored_as_proved_one_by_one() -> None:
    plan, planned = _plan(LEGAL)
    mine, canon = _batch(plan, planned, [], set())
    plan, planned = _plan(LEGAL)
    mine2, canon2 = _one_by_one(plan, planned, [], set())
    assert canon == canon2
    assert len(canon) == len(LEGAL)
    assert [e.seq for e in mine] == list(range(1, len(LEGAL) + 1)) == [e.seq for e in mine2]
