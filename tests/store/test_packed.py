"""engine.store.packed: exact round trips for every event type and envelope, stable
meaning of written payloads, and typed errors for any damaged input."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine import codec
from engine import events as ev
from engine.errors import EventDecodeError
from engine.events import Event, tag_of
from engine.ids import EventIds
from engine.session import Session, StepClock
from engine.store import MemoryStore, packed
from tests.support.event_strategies import ANY_BODY, body_strategy, runs
from tests.support.runs_check import assert_runs_join

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "packed-v1"
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _same(back: Sequence[Event], events: Sequence[Event]) -> None:
    assert list(back) == list(events)
    for a, b in zip(back, events, strict=True):
        assert type(a) is type(b)
        assert codec.canonical(a) == codec.canonical(b)


def _round_trip(session_id: str, first: int, events: Sequence[Event]) -> bytes:
    data = packed.pack(events, session_id, first)
    packed._last.clear()  # decode for real, not from the one-block cache
    _same(packed.unpack(data, session_id, first), events)
    _same(packed.unpack(memoryview(zlib.decompress(zlib.compress(data))), session_id, first),
          events)
    as_json = packed.pack_json(events, session_id, first)
    _same(packed.unpack_json(as_json, session_id, first), events)
    # The builtins (what verify and upcasters read) are the events' own, in both flavours.
    for objs in (packed.unpack_builtins(data, session_id, first),
                 packed.unpack_builtins(as_json, session_id, first, json=True)):
        assert [codec.canonical(o) for o in objs] == [codec.canonical(e) for e in events]
        _same([codec.from_builtins(o) for o in objs], events)
    return data


@SETTINGS
@given(run=runs())
def test_any_run_round_trips_exactly(run: tuple[str, int, list[Event]]) -> None:
    _round_trip(*run)


_DELTAS = st.one_of(*(body_strategy(c) for c in (ev.TextDelta, ev.ReasoningDelta,
                                                   ev.ToolInputDelta)))


_RUN_FIELD = {ev.TextDelta: "delta", ev.ReasoningDelta: "delta", ev.ToolInputDelta: "fragment"}


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, int, list[Event]]:
    """Stretches of deltas to one part, stamped as the engine stamps a stream (ids
    from its generator, default actors, v 1), between other events; now and then a
    stamp the engine would not write (a foreign id, another actor, v 2), and times
    that repeat, step back or jump."""
    session_id = draw(st.sampled_from(["019b76da-a801-7005-8c2c-d958d8744d16", "s é"]))
    first = draw(st.sampled_from([1, 513]))
    t = draw(st.sampled_from([1_767_225_600_000, 0, 2**47 - 3]))
    gen = EventIds()
    out: list[Event] = []
    step = st.sampled_from([0, 0, 0, 1, 1, 7, -1, 2**20])
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from([*_RUN_FIELD, None]))
        msg, part = draw(st.sampled_from(["m1", "m2"])), draw(st.sampled_from(["p1", "p2"]))
        bodies: list[Event] = (
            [draw(ANY_BODY)] if kind is None else
            [msgspec.convert({"message_id": msg, "part_id": part,
                              _RUN_FIELD[kind]: draw(st.text(max_size=6))}, kind)
             for _ in range(draw(st.integers(1, 25)))])
        for e in bodies:
            t += draw(step)
            odd = draw(st.integers(0, 19))
            out.append(msgspec.structs.replace(
                e, id=gen(t) if odd != 1 else "foreign", session_id=session_id,
                seq=first + len(out), time=t,
                actor=type(e).default_actor if odd != 2 else "someone", v=2 if odd == 3 else 1))
    return session_id, first, out


@settings(max_examples=300, deadline=None)
@given(state=st.tuples(st.integers(-5, 2**48), st.integers(0, 0xFFF),
                       st.integers(0, 2**48 - 1), st.integers(0, 0x3FFF)),
       back=st.integers(0, 3),
       dts=st.lists(st.sampled_from([0, 0, 1, 3, -1]), min_size=1, max_size=40))
def test_advancing_the_id_generator_over_a_run_is_stepping_it(
        state: tuple[int, int, int, int], back: int, dts: list[int]) -> None:
    """The shortcut over a run's times (no id formatted) ends where the generator,
    stepped event by event, does: through repeats, borrows and counter wraps."""
    ms, cnt, lo, hi = state
    t = ms - back  # the previous event's time; ms is ahead of it after a borrow
    guess = packed._IdGuess()
    guess.ms, guess.cnt, guess.lo, guess.hi = ms, cnt, lo, hi
    now = t
    for dt in dts:
        now += dt
        guess.next(now)
    got = packed._advance_ids((ms, cnt, lo, hi), t, dts)
    assert got[:4] == (guess.ms, guess.cnt, guess.lo, guess.hi)


@SETTINGS
@given(run=streams())
def test_runs_join_exactly_the_events_they_stand_for(run: tuple[str, int, list[Event]]) -> None:
    """unpack_runs == unpack, with each Run standing for the deltas it joins: over
    times that repeat, step back and jump (the id generator's slow path), stored
    ids, other actors and versions (which end a run)."""
    session_id, first, events = run
    data = packed.pack(events, session_id, first)
    assert_runs_join(packed.unpack_runs(data, session_id, first), events)


def test_the_workload_reads_in_runs() -> None:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=5).run(3000)
    events = list(store.read(s.id))
    for i in range(0, len(events), 1024):
        block = events[i:i + 1024]
        items = packed.unpack_runs(packed.pack(block, s.id, i + 1), s.id, i + 1)
        assert_runs_join(items, block)
        # Most of a streamed session is deltas: far fewer items than events.
        assert len(items) < len(block) / 4


@pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=[tag_of(c) for c in ev.EVENT_TYPES])
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_event_type_round_trips(cls: type[Event], data: st.DataObject) -> None:
    run = data.draw(runs(body_strategy(cls), max_size=6))
    _round_trip(*run)


@SETTINGS
@given(run=runs(), data=st.data())
def test_ranges_are_slices_of_the_whole(run: tuple[str, int, list[Event]],
                                        data: st.DataObject) -> None:
    session_id, first, events = run
    blob = packed.pack(events, session_id, first)
    last = first + len(events) - 1
    lo = data.draw(st.integers(first - 2, last + 2))
    hi = data.draw(st.integers(lo - 1, last + 2))
    want = [e for e in events if lo <= e.seq <= hi]
    for _ in range(2):  # the second read answers from the kept block
        _same(packed.unpack_range(blob, session_id, first, lo, hi), want)


def test_the_workload_round_trips_and_its_ids_are_predicted() -> None:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=3).run(3000)
    events = list(store.read(s.id))
    for i in range(0, len(events), 512):
        block = events[i:i + 512]
        data = _round_trip(s.id, i + 1, block)
        stored_ids = msgspec.msgpack.decode(data[1:])[5]
        assert len(stored_ids) <= 1  # only a block's first id is stored


def test_a_payload_written_today_keeps_its_meaning() -> None:
    """tests/fixtures/packed-v1.* are written once: the events and their packed bytes.
    Whatever the catalog gains later, those bytes must decode to those events."""
    events = codec.decode_json_list((FIXTURE.with_suffix(".json")).read_bytes())
    blob = zlib.decompress(FIXTURE.with_suffix(".bin.z").read_bytes())
    _same(packed.unpack(blob, events[0].session_id, events[0].seq), events)
    assert packed.pack(events, events[0].session_id, events[0].seq) == blob  # deterministic


def test_pack_refuses_events_that_are_not_the_run() -> None:
    e = ev.TextDelta(id="x", session_id="s", seq=1, time=1, actor="assistant",
                     message_id="m", part_id="p", delta="d")
    with pytest.raises(ValueError, match="expected"):
        packed.pack([e], "other", 1)
    with pytest.raises(ValueError, match="expected"):
        packed.pack([e, e], "s", 1)
    with pytest.raises(ValueError, match="time"):
        packed.pack([msgspec.structs.replace(e, time=1.5)], "s", 1)


def test_an_unknown_format_or_type_is_a_decode_error() -> None:
    e = ev.TextDelta(id="x", session_id="s", seq=1, time=1, actor="assistant",
                     message_id="m", part_id="p", delta="d")
    data = packed.pack([e], "s", 1)
    with pytest.raises(EventDecodeError, match="format"):
        packed.unpack(b"\x02" + data[1:], "s", 1)
    with pytest.raises(EventDecodeError, match="format"):
        packed.unpack(b"", "s", 1)
    renamed = data.replace(b"text.delta", b"text.delte")
    with pytest.raises(EventDecodeError, match="unknown event type"):
        packed.unpack(renamed, "s", 1)


def _decodes_or_refuses(data: bytes) -> None:
    for json in (False, True):
        packed._last.clear()
        try:
            out = packed.unpack_json(data, "s", 1) if json else packed.unpack(data, "s", 1)
        except EventDecodeError:
            pass
        else:
            for e in out:  # what decodes is a list of well-formed events
                assert isinstance(e, ev.EVENT_TYPES)
                codec.canonical(e)
        with contextlib.suppress(EventDecodeError):
            packed.unpack_builtins(data, "s", 1, json=json)
    # The bulk read refuses exactly what the event-by-event read refuses.
    packed._last.clear()
    try:
        events = packed.unpack(data, "s", 1)
    except EventDecodeError:
        with pytest.raises(EventDecodeError):
            packed.unpack_runs(data, "s", 1)
    else:
        assert_runs_join(packed.unpack_runs(data, "s", 1), events)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_with_a_decode_error(data: bytes) -> None:
    _decodes_or_refuses(data)
    _decodes_or_refuses(b"\x01" + data)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(run=runs(max_size=12), data=st.data())
def test_damaged_payloads_are_refused_with_a_decode_error(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    json = data.draw(st.booleans())
    blob = bytearray((packed.pack_json if json else packed.pack)(run[2], run[0], run[1]))
    how = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
    at = data.draw(st.integers(0, len(blob) - 1))
    if how == "flip":
        blob[at] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        del blob[at:]
    else:
        blob[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    _decodes_or_refuses(bytes(blob))
