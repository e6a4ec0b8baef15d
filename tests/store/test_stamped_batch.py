"""A batch a session stamped itself (``Stamped``): the store skips only the checks of
what the session wrote, and stores exactly what the fully checked path stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.codec import canonical
from engine.errors import ConvlogError, EventIdConflict, InvalidEvent
from engine.events import Event
from engine.ids import EventIds
from engine.session import Session, StepClock
from engine.store import MemoryStore, door
from engine.store.base import ANY, Appended, Expected, Stamped
from engine.store.door import INT_MAX, STAMPED_FIELDS, admit, admit_all
from tests.store.test_store_door import ANY_OBJECT, ANY_VALUE
from tests.support.catalog import minimal

SID = "0190a8f2-5c3e-7b4d-8e2f-0123456789ab"
MID = "0190a8f2-5c3e-7b4d-8e2f-0123456789ac"


def test_both_proofs_cover_the_same_event_types() -> None:
    assert set(door._FAST_PAYLOAD) == set(door._FAST)


# A stamped envelope: what Session.record writes (ids of its generator, its session,
# a seq, a checked commit time, a default actor).
STAMP = st.fixed_dictionaries({
    "id": st.just(EventIds()(1_700_000_000_000)), "session_id": st.just(SID),
    "seq": st.integers(1, INT_MAX), "time": st.integers(0, INT_MAX),
    "actor": st.sampled_from(["assistant", "user", "system"])})


@settings(max_examples=1000, deadline=None)
@given(cls=st.sampled_from(sorted(door._FAST_PAYLOAD, key=lambda c: c.__name__)),
       stamp=STAMP, data=st.data())
def test_the_stamped_proof_accepts_only_what_the_full_proof_accepts(
        cls: type[Event], stamp: dict[str, Any], data: st.DataObject) -> None:
    """With the envelope a session stamps, the payload-only short proof says yes only
    where the full proof admits the same bytes, and ``admit_all(stamped=True)`` gives
    :func:`admit`'s verdict on whatever the caller put in the other fields (``v``
    among them)."""
    event = msgspec.structs.replace(minimal(cls), **stamp)
    payload = [f for f in cls.__struct_fields__ if f not in STAMPED_FIELDS]
    for name in data.draw(st.lists(st.sampled_from(payload), max_size=3)):
        event = msgspec.structs.replace(
            event, **{name: data.draw(st.one_of(ANY_VALUE, ANY_OBJECT))})
    verdict: bytes | str
    try:
        verdict = admit(event)
    except InvalidEvent as exc:
        verdict = exc.path
    try:
        stamped: bytes | str = admit_all([event], stamped=True)[0]
    except InvalidEvent as exc:
        stamped = exc.path
    assert stamped == verdict
    try:
        # The short proof is asked only after a plain encode succeeded: a value that
        # needs an extension (a lone surrogate, a big integer) goes to the full proof.
        data_bytes = door._canonical_encode(event)
    except (OverflowError, UnicodeEncodeError, TypeError, ValueError):
        return
    if door._FAST_PAYLOAD[cls](event):
        assert verdict == data_bytes


class _Plain(MemoryStore):
    """Every batch as a plain list: the fully checked path."""

    def append(self, session_id: str, events: Any, expected_version: Expected = ANY
               ) -> Appended:
        return super().append(session_id, list(events), expected_version)


class _Seen(MemoryStore):
    """Counts the stamped batches it is handed."""

    stamped = 0

    def append(self, session_id: str, events: Any, expected_version: Expected = ANY
               ) -> Appended:
        if events.__class__ is Stamped:
            self.stamped += 1
        return super().append(session_id, events, expected_version)


# What a caller may hand Session.record: the fields it may fill, right or wrong.
_FIELDS = st.sampled_from(["delta", "message_id", "part_id", "v", "id", "time", "actor"])
_CLOCKS: list[Callable[[], Any]] = [StepClock(), lambda: 1.5e12, lambda: -5,
                                    lambda: 1 << 63, lambda: True]


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.lists(st.tuples(
    _FIELDS, st.one_of(ANY_VALUE, st.just("prt_b"), st.just(SID))), max_size=2),
    st.booleans()), min_size=1, max_size=5), min_size=1, max_size=5),
    clock=st.sampled_from(range(len(_CLOCKS))))
def test_a_stamped_batch_stores_what_the_checked_path_stores(
        batches: list[list[tuple[list[tuple[str, Any]], bool]]], clock: int) -> None:
    """Session.record batches (deltas, some with a field of the caller's: a wrong type,
    an id, a time, an actor, another version; a clock reading of the wrong type or out
    of range) into a store that takes the stamped path and one that checks every batch
    in full: the same verdicts (error type and path) and the same log, byte for byte,
    with the same hash chain."""
    logs = []
    for cls in (_Seen, _Plain):
        store = cls()
        start = StepClock()
        s = Session.create(store, SID, clock=start)
        # The same ids in both runs: random bits all zero.
        s._ids._hi, s._ids._lo, s._ids._middle, s._ids._upper = 0, 0, "-8000-", "000000000"
        mid = s.start_message("assistant", message_id=MID)
        s.add_text(mid, part_id="prt_a")
        s.add_text(mid, part_id="prt_b")
        s._clock = _CLOCKS[clock] if clock else start
        verdicts: list[object] = []
        for batch in batches:
            events: list[Event] = []
            for fields, tool in batch:
                e: Event = (ev.ToolInputDelta(message_id=mid, part_id="prt_a", fragment="{")
                            if tool else ev.TextDelta(message_id=mid, part_id="prt_a",
                                                      delta="x"))
                for name, value in fields:
                    field = "fragment" if name == "delta" and tool else name
                    e = msgspec.structs.replace(e, **{field: value})
                events.append(e)
            try:
                s.record(events)
                verdicts.append("ok")
            except ConvlogError as exc:
                verdicts.append((type(exc).__name__, getattr(exc, "path", None)))
            except (TypeError, ValueError, OverflowError) as exc:  # a clock the ids refuse
                verdicts.append(type(exc).__name__)
        own = store.recorder._own[SID]
        logs.append((verdicts, [canonical(e) for e in own.events], own.hashes))
        if isinstance(store, _Seen) and clock == 0:  # the fast path taken where it could be
            own_stamp = [all(not value for name, value in fields if name in ("id", "time",
                                                                            "actor"))
                         for fields, _ in (pair for batch in batches for pair in batch)]
            per_batch, i = [], 0
            for batch in batches:
                per_batch.append(all(own_stamp[i:i + len(batch)]))
                i += len(batch)
            assert store.stamped >= sum(1 for ok, mine in zip(verdicts, per_batch, strict=True)
                                        if ok == "ok" and mine)
    assert logs[0] == logs[1]


def test_a_stamped_batch_still_meets_the_id_index_and_the_door() -> None:
    """What the stamped path skips is only what the session wrote: a payload field of
    the wrong type is refused, a stored batch handed again is a retry, and a stored
    id with other content a conflict."""
    store = MemoryStore()
    s = Session.create(store, SID, clock=StepClock())
    mid = s.start_message("assistant", message_id=MID)
    s.add_text(mid, part_id="prt_a")
    good = [ev.TextDelta(message_id=mid, part_id="prt_a", delta=d) for d in "ab"]
    with pytest.raises(InvalidEvent) as refused:
        s.record([*good, ev.TextDelta(message_id=mid, part_id="prt_a", delta=5)])  # type: ignore[arg-type]
    assert refused.value.path == "$.delta"
    done = s.record(good)
    before = store.last_position()
    again = store.append(SID, Stamped(done), done[0].seq - 1)
    assert again.retried
    assert list(again.seqs) == [e.seq for e in done]
    changed = Stamped(msgspec.structs.replace(e, delta="other") for e in done)
    with pytest.raises(EventIdConflict):
        store.append(SID, changed, done[0].seq - 1)
    with pytest.raises(EventIdConflict):
        store.append(SID, changed, s.version)
    assert store.last_position() == before
