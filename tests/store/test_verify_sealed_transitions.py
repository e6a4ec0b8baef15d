"""A deep verify judges the transitions inside sealed blocks exactly as one by one.

The deep walk replays a sealed block's events as one batch (``Lifecycle.apply_batch``,
the gate an append's batch passes); when the batch does not accept every event as
it is, it is rolled back and replayed event by event. Whatever the forgery (an
illegal event at a block's start, middle or end, an idempotent repeat, a repeat
followed by an illegal event), the first problem must be the one a plain
event-by-event replay through ``Lifecycle.apply`` names: same seq, same kind.
The forged events are appended raw (a store does not judge transitions), in
batches that seal them, so they sit inside sealed blocks.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import msgspec
import pytest

from engine.codec import canonical
from engine.errors import ConvlogError
from engine.events import Event
from engine.lifecycle import Lifecycle
from engine.session import Session, StepClock
from engine.store import MemoryStore, open_store
from engine.store.base import Span
from engine.store.verify import reader_of, verify

SID = "0194d1e0-0000-7000-8000-00000000abcd"


def _turns(n: int) -> list[Event]:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock())
    for t in range(n):
        s.user_message(f"question {t}")
        m = s.start_message("assistant")
        part = s.add_text(m)
        for i in range(40):
            s.text_delta(part, f"w{t}.{i} ")
        s.end_part(part)
        s.complete_message(m, finish="stop")
    return list(store.read(s.id))


def _reference(events: list[Event]) -> tuple[int, str] | None:
    """(seq, 'illegal' or 'repeats') of the first problem, replayed one by one."""
    lc = Lifecycle(SID)
    for e in events:
        try:
            if not lc.apply(e):
                return e.seq, "repeats"
        except ConvlogError:
            return e.seq, "illegal"
    return None


def _forge(events: list[Event], how: str, at: int) -> list[Event]:
    out = list(events)
    delta = next(i for i in range(at, len(out)) if type(out[i]).__name__ == "TextDelta")
    if how == "illegal":
        out[delta] = msgspec.structs.replace(out[delta], part_id="prt_nowhere")
    elif how == "repeat":
        ended = next(i for i in range(at, len(out)) if type(out[i]).__name__ == "PartEnded")
        out.insert(ended + 1, msgspec.structs.replace(out[ended], id=str(uuid.uuid4())))
    elif how == "repeat_then_illegal":
        ended = next(i for i in range(at, len(out)) if type(out[i]).__name__ == "PartEnded")
        out.insert(ended + 1, msgspec.structs.replace(out[ended], id=str(uuid.uuid4())))
        after = next(i for i in range(ended + 2, len(out))
                     if type(out[i]).__name__ == "TextDelta")
        out[after] = msgspec.structs.replace(out[after], part_id="prt_nowhere")
    return [msgspec.structs.replace(e, seq=i + 1, session_id=SID) for i, e in enumerate(out)]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@pytest.mark.parametrize(("how", "at"), [
    ("illegal", 0), ("illegal", 500), ("illegal", 1023), ("illegal", 1024),
    ("repeat", 300), ("repeat_then_illegal", 700), ("none", 0)])
def test_the_first_problem_inside_sealed_blocks_is_the_one_by_one_replays(
        kind: str, how: str, at: int, tmp_path: Path) -> None:
    events = _forge(_turns(60), how, at)
    expected = _reference(events)
    assert (expected is None) == (how == "none")
    url = f"sqlite:///{tmp_path}/t.db" if kind == "sqlite" else f"jsonl:///{tmp_path}/log"
    store = open_store(url)
    try:
        store.create_session(SID, created=0)
        blank = [msgspec.structs.replace(e, seq=0, session_id="") for e in events]
        for i in range(0, len(blank), 1000):
            store.append(SID, blank[i:i + 1000])
        spans = [u for u in reader_of(store).units(SID, deep=False) if isinstance(u, Span)]
        assert spans  # the forged events sit in sealed blocks
        assert spans[-1].last >= min(at + 2, len(events) - 300)
        report = verify(store)
        assert verify(store, deep=False).ok  # the chain itself is sound
    finally:
        store.close()
    if expected is None:
        assert report.ok, report.first
        assert report.events == len(events)
        return
    first = report.first
    assert first is not None
    assert (first.seq, "repeats" if "repeats" in first.reason else "illegal") == expected


def test_own_stored_still_gives_every_event_of_packed_blocks(tmp_path: Path) -> None:
    """The deep walk hands a packed block's events over whole (``Span.events``); the
    per-event view of the same walk (``reader.stored``) still gives each one."""
    events = _forge(_turns(30), "none", 0)
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    try:
        store.create_session(SID, created=0)
        store.append(SID, [msgspec.structs.replace(e, seq=0, session_id="") for e in events])
        assert any(u.events for u in reader_of(store).units(SID, deep=True) if isinstance(u, Span))
        stored = list(reader_of(store).stored(SID))
    finally:
        store.close()
    assert [st.seq for st in stored] == list(range(1, len(events) + 1))
    assert [bytes(st.canon or b"") if st.event is not None else canonical(st.obj or {})
            for st in stored] == [canonical(e) for e in events]
