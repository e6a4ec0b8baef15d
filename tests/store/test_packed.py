"""engine.store.packed: exact round trips for every event type and envelope, stable
meaning of written payloads, and typed errors for any damaged input."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Annotated, Any

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
from engine.store.columns import NEAR
from engine.store.runs import Run
from tests.support.event_strategies import ANY_BODY, body_strategy, drawn_damage, runs
from tests.support.packed_format_1 import as_format_1, as_json_format_1, columns_1
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
    # The bulk read without ids (a replay's) gives the same events: an all-defaults
    # event of every kind is made from its kind's blank (packed._blank), not converted.
    assert_runs_join(packed.unpack_runs(data, session_id, first, ids=False), events, ids=False)
    # Format 1, which the release before wrote, reads the same (upcast on opening).
    old, old_json = as_format_1(data), as_json_format_1(as_json)
    _same(packed.unpack(old, session_id, first), events)
    _same(packed.unpack_json(old_json, session_id, first), events)
    # The builtins (what verify and upcasters read) are the events' own, in both flavours.
    for objs in (packed.unpack_builtins(data, session_id, first),
                 packed.unpack_builtins(as_json, session_id, first, json=True),
                 packed.unpack_builtins(old, session_id, first),
                 packed.unpack_builtins(old_json, session_id, first, json=True)):
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
    assert_runs_join(packed.unpack_runs(as_format_1(data), session_id, first), events)
    # Without ids (a bulk replay): the same items, and no event keeps an id.
    items = packed.unpack_runs(data, session_id, first, ids=False)
    assert_runs_join(items, events, ids=False)
    assert all(x.id == "" for x in items if not isinstance(x, Run))


def test_the_workload_reads_in_runs() -> None:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=5).run(3000)
    events = list(store.read(s.id))
    for i in range(0, len(events), 1024):
        block = events[i:i + 1024]
        data = packed.pack(block, s.id, i + 1)
        items = packed.unpack_runs(data, s.id, i + 1)
        assert_runs_join(items, block)
        # Most of a streamed session is deltas: far fewer items than events.
        assert len(items) < len(block) / 4
        without = packed.unpack_runs(data, s.id, i + 1, ids=False)
        assert_runs_join(without, block, ids=False)
        assert [type(x) for x in without] == [type(x) for x in items]


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


@pytest.mark.parametrize("version", [1, 2])
def test_a_payload_written_by_each_format_keeps_its_meaning(version: int) -> None:
    """tests/fixtures/packed-v1.* are written once: the events and their packed bytes
    (format 1); packed-v2.bin.z holds the same events in format 2. Whatever the
    catalog gains later, those bytes must decode to those events."""
    events = codec.decode_json_list((FIXTURE.with_suffix(".json")).read_bytes())
    blob = zlib.decompress(FIXTURE.with_name(f"packed-v{version}.bin.z").read_bytes())
    assert blob[0] == version
    _same(packed.unpack(blob, events[0].session_id, events[0].seq), events)
    if version == packed.FORMAT:
        assert packed.pack(events, events[0].session_id, events[0].seq) == blob  # deterministic
        # The format 1 writer of the tests writes what the release before wrote.
        old = zlib.decompress(FIXTURE.with_name("packed-v1.bin.z").read_bytes())
        assert as_format_1(blob) == old
    for ids in (True, False):  # and so must a bulk read of them
        assert_runs_join(packed.unpack_runs(blob, events[0].session_id, events[0].seq,
                                            ids=ids), events, ids=ids)
    builtins = packed.unpack_builtins(blob, events[0].session_id, events[0].seq)
    assert [codec.canonical(b) for b in builtins] == [codec.canonical(e) for e in events]


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
        packed.unpack(b"\x03" + data[1:], "s", 1)
    with pytest.raises(EventDecodeError):  # today's columns under format 1's byte
        packed.unpack(bytes((packed.FORMAT_1,)) + data[1:], "s", 1)
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
    _bulk_reads_as_unpack(data)


def _bulk_reads_as_unpack(data: bytes) -> None:
    """The bulk reads (with and without ids) refuse exactly what the event-by-event
    read refuses, and give its events where it gives them."""
    packed._last.clear()
    try:
        events = packed.unpack(data, "s", 1)
    except EventDecodeError:
        for ids in (True, False):
            with pytest.raises(EventDecodeError):
                packed.unpack_runs(data, "s", 1, ids=ids)
    else:
        for ids in (True, False):
            assert_runs_join(packed.unpack_runs(data, "s", 1, ids=ids), events, ids=ids)


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
    blob = (packed.pack_json if json else packed.pack)(run[2], run[0], run[1])
    if data.draw(st.booleans()):
        blob = (as_json_format_1 if json else as_format_1)(blob)
    _decodes_or_refuses(drawn_damage(data, blob))


# Columns of the msgpack array (``packed._Block``), by name.
_COLUMNS = packed._Block.__struct_fields__
_ODD_VALUES = st.one_of(st.none(), st.integers(-3, 300), st.text(max_size=3), st.binary(max_size=3),
                        st.just({}), st.just(2**62), st.just({"delta": 5}))
_ENVELOPE_KEYS = st.sampled_from(["type", "id", "session_id", "seq", "time", "actor", "v",
                                  "message_id", "part_id"])
# A flag bit and the column holding one value per event that has it.
_FLAG_COLUMNS = {packed.ID_STORED: "ids", packed.ACTOR_STORED: "actors", packed.MSG_NEW: "refidx",
                 packed.PART_NEW: "refidx", packed.V_STORED: "vs", packed.TIME_ABS: ""}
_FLAG_VALUES = {"ids": st.one_of(st.text(max_size=3), st.binary(min_size=16, max_size=16)),
                "actors": st.sampled_from(["user", "assistant", "system", "x"]),
                "refidx": st.integers(-1, 3), "vs": st.integers(0, 3)}


def _column_index(flags: bytes, at: int, bit: int) -> int:
    """Where the value of event ``at``'s flag ``bit`` sits in its column (refidx holds
    an event's message id before its part id)."""
    if bit & (packed.MSG_NEW | packed.PART_NEW):
        both = packed.MSG_NEW | packed.PART_NEW
        before = sum(bin(f & both).count("1") for f in flags[:at])
        return before + (1 if bit == packed.PART_NEW and flags[at] & packed.MSG_NEW else 0)
    return sum(1 for f in flags[:at] if f & bit)


_ODD_KEYS = st.one_of(st.integers(-3, 3), st.none(), st.booleans(), st.binary(max_size=2),
                     st.floats(allow_nan=False))


def _maps_in(value: Any) -> list[dict[Any, Any]]:
    """Every map inside ``value`` (a decoded column), at any depth."""
    found: list[dict[Any, Any]] = []
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            found.append(x)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return found


def _damage(cols: list[Any], data: st.DataObject) -> None:
    """One change to decoded columns (of either format: format 1 has no ``text`` and
    ``lens``) that keeps them well-formed msgpack."""
    name = data.draw(st.sampled_from([*_COLUMNS[2:len(cols)], "flag", "flag", "flag",
                                      "bodies"]))
    if name == "flag":  # a flag set or cleared with its column value: the columns still agree
        flags = cols[3]  # (the first event often opens the block's message and part)
        at = data.draw(st.one_of(st.just(0), st.integers(0, len(flags) - 1)))
        bit = data.draw(st.sampled_from(sorted(_FLAG_COLUMNS)))
        column = _FLAG_COLUMNS[bit]
        if column:
            values = cols[_COLUMNS.index(column)]
            i = _column_index(flags, at, bit)
            if flags[at] & bit:
                del values[i:i + 1]  # (an earlier change may have dropped it already)
            else:
                values.insert(i, data.draw(_FLAG_VALUES[column]))
        cols[3] = flags[:at] + bytes((flags[at] ^ bit,)) + flags[at + 1:]
        return
    col = cols[_COLUMNS.index(name)]
    if name == "text":  # a character more, fewer or another
        at = data.draw(st.integers(0, len(col)))
        how = data.draw(st.sampled_from(["drop", "insert", "replace"]))
        new = data.draw(st.characters())
        col = (col[:at] + col[at + 1:] if how == "drop" else col[:at] + new + col[at:]
               if how == "insert" else col[:at] + new + col[at + 1:])
    elif name in ("codes", "flags"):
        at = data.draw(st.integers(0, len(col) - 1))
        byte = (col[at] ^ (1 << data.draw(st.integers(0, 6))) if name == "flags"
                else data.draw(st.integers(0, len(cols[0]))))
        col = col[:at] + bytes((byte,)) + col[at + 1:]
    elif not col:
        col.append(data.draw(_ODD_VALUES))
    else:
        at = data.draw(st.integers(0, len(col) - 1))
        how = data.draw(st.sampled_from(["drop", "repeat", "append", "replace", "envelope",
                                         "key", "key"]))
        if how == "key" and (nested := _maps_in(col)):
            # a map anywhere in the column (a body, a typed or a free-form value in it)
            # gains a key that is not a string: no canonical bytes exist for it
            inner = data.draw(st.sampled_from(nested))
            inner[data.draw(_ODD_KEYS)] = data.draw(_ODD_VALUES)
        elif how == "drop":
            del col[at]
        elif how == "repeat":  # a value of the right type, one too many
            col.insert(at, col[at])
        elif how == "append":
            col.append(col[at])
        elif how == "envelope" and (maps := [i for i, x in enumerate(col)
                                              if isinstance(x, dict)]):
            at = data.draw(st.sampled_from(maps))
            col[at] = {**col[at], data.draw(_ENVELOPE_KEYS): data.draw(_ODD_VALUES)}
        else:
            col[at] = data.draw(_ODD_VALUES)
    cols[_COLUMNS.index(name)] = col


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(run=streams(), data=st.data())
def test_payloads_with_damaged_columns_are_read_alike_in_bulk(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    """Well-formed msgpack whose columns say something else (a flag set or cleared
    with or without its value, a code, a value dropped, repeated or replaced, an
    envelope field in a body): the bulk reads refuse exactly what the event-by-event
    read refuses, and read what it reads. Byte damage (above) rarely gets past the
    msgpack decode; this reaches the row loops' checks."""
    session_id, first, events = run
    cols = msgspec.msgpack.decode(packed.pack(events, session_id, first)[1:])
    fmt = data.draw(st.sampled_from([packed.FORMAT, packed.FORMAT_1]))
    if fmt == packed.FORMAT_1:
        cols = columns_1(cols)
    for _ in range(data.draw(st.integers(1, 3))):
        _damage(cols, data)
    _bulk_reads_as_unpack(bytes((fmt,)) + msgspec.msgpack.encode(cols))


def _set_flag(cols: list[Any], at: int, bit: int, value: Any = None) -> None:
    """Event ``at`` gains (``value`` given) or loses flag ``bit`` with its column value."""
    flags, column = cols[3], _FLAG_COLUMNS[bit]
    values = cols[_COLUMNS.index(column)]
    i = _column_index(flags, at, bit)
    if value is None:
        del values[i]
    else:
        values.insert(i, value)
    cols[3] = flags[:at] + bytes((flags[at] ^ bit,)) + flags[at + 1:]


_SHAPES = ("a run names its part but no message before it",
           "a run's deltas name neither, after an event without either",
           "a message id on a kind without one",
           "a part id on a kind with only a message id",
           "an envelope field in a body")


@pytest.mark.parametrize("case", range(len(_SHAPES)), ids=_SHAPES)
def test_references_and_envelopes_are_checked_alike_in_bulk(case: int) -> None:
    """The reference and envelope checks one at a time (each needs a shape of block
    that damage seldom makes): every read refuses each."""
    gen = EventIds()
    events: list[Event] = [
        ev.CheckpointRestored(tag="t", session_id="s", seq=1, time=1, actor="user", id=gen(1)),
        *(ev.TextDelta(message_id="m", part_id="p", delta=d, session_id="s", seq=2 + i, time=2,
                       actor="assistant", id=gen(2)) for i, d in enumerate("abc")),
        ev.MessageStarted(message_id="m2", role="user", session_id="s", seq=5, time=3,
                          actor="user", id=gen(3)),
    ]
    cols = msgspec.msgpack.decode(packed.pack(events, "s", 1)[1:])
    assert cols[3][1] == packed.MSG_NEW | packed.PART_NEW  # the run opens message and part
    if case == 0:
        _set_flag(cols, 1, packed.MSG_NEW)
    elif case == 1:
        _set_flag(cols, 1, packed.PART_NEW)
        _set_flag(cols, 1, packed.MSG_NEW)
    elif case == 2:
        _set_flag(cols, 0, packed.MSG_NEW, 0)
    elif case == 3:
        _set_flag(cols, 4, packed.PART_NEW, 1)
    else:
        bodies = cols[_COLUMNS.index("bodies")]
        bodies[-1] = {**bodies[-1], "seq": 9}
    data = bytes((packed.FORMAT,)) + msgspec.msgpack.encode(cols)
    packed._last.clear()
    with pytest.raises(EventDecodeError):
        packed.unpack(data, "s", 1)
    for ids in (True, False):
        with pytest.raises(EventDecodeError):
            packed.unpack_runs(data, "s", 1, ids=ids)


def test_a_map_key_that_is_no_string_is_refused_as_damage() -> None:
    """Found by the damaged-payload fuzz: a flipped byte turned a nested key's header
    into an integer, and the event decoded although no canonical bytes exist for it."""
    e = ev.SessionImported(format="f", source="s", original_id="o",
                           metadata={"k": [{"": None}]}, id="x", session_id="s", seq=1,
                           time=1, actor="system")
    blob = packed.pack([e], "s", 1)
    i = blob.index(b"\x81\xa0\xc0")  # the map {"": None}
    bad = blob[:i + 1] + b"\xe0" + blob[i + 2:]  # its key: the integer -32
    packed._last.clear()
    with pytest.raises(EventDecodeError, match="not a string"):
        packed.unpack(bad, "s", 1)
    _decodes_or_refuses(bad)


@pytest.mark.parametrize("steps", [
    [NEAR, 1, 1, -NEAR, 0],  # every step at the bound: summed without a check
    [NEAR + 1, 1, 1, 2],  # one past it: the bulk read checks the sums itself
    [-NEAR - 1, 1, 1, 2],
    [2**62, 2**62 - 1, 1, -(2**62), 3],  # sums near the top of int64
], ids=["at-the-bound", "past-it", "past-it-below", "near-int64"])
def test_a_bulk_read_reads_time_steps_at_and_past_the_near_bound_alike(
        steps: list[int]) -> None:
    """A bulk read skips its own pass over the time steps only when msgspec found
    each within ``columns.NEAR`` as it decoded (``packed._open_near``); past it, the
    block is opened as before and its sums checked. Either way the same events."""
    times = list(accumulate(steps))
    events: list[Event] = [
        ev.TextDelta(message_id="m", part_id="p", delta=f"d{i}", session_id="s", seq=i + 1,
                     time=t, actor="assistant")
        for i, t in enumerate(times)]
    data = packed.pack(events, "s", 1)
    packed._last.clear()
    _same(packed.unpack(data, "s", 1), events)
    assert_runs_join(packed.unpack_runs(data, "s", 1, ids=False), events, ids=False)
    block, near = packed._open_near(data)
    assert near == all(-NEAR <= s <= NEAR for s in block.times)


def _kind_by_fields(cls: type[Event]) -> tuple[str, Any]:
    """A kind's bare field and blank event as derived from ``msgspec.structs.fields``
    (every annotation evaluated): what ``packed._Kind`` derived before it evaluated
    only the annotations it reads."""
    fields = msgspec.structs.fields(cls)
    body = [f for f in fields if f.name not in packed._ENVELOPE]
    bare = body[0].name if len(body) == 1 and body[0].required and body[0].type is str else ""
    names = {f.name for f in fields}
    ids = {n: "" for n in ("message_id", "part_id") if n in names}
    plain: dict[str, type] = {"session_id": str, "actor": str, "seq": int, "time": int,
                              "v": int, **dict.fromkeys(ids, str)}
    declared = {f.name: f.type for f in fields}
    if any(declared.get(n) is not t for n, t in plain.items()):
        return bare, None
    try:
        return bare, msgspec.convert(ids, cls)
    except msgspec.ValidationError:
        return bare, None


class _OddBody(ev.PartEvent, frozen=True, kw_only=True, tag="test.odd-body"):
    note: str = ""  # one string field, but not required: not a bare kind


class _OddTime(ev.Event, frozen=True, kw_only=True, tag="test.odd-time"):
    time: Annotated[int, msgspec.Meta(ge=0)] = 0  # a constrained envelope field: no blank


@pytest.mark.parametrize("cls", [*ev.EVENT_TYPES, _OddBody, _OddTime], ids=tag_of)
def test_a_kind_reads_its_fields_as_msgspec_declares_them(cls: type[Event]) -> None:
    kind = packed._Kind(cls)
    bare, blank = _kind_by_fields(cls)
    assert kind.bare == bare
    assert (kind.make is None) == (not bare)
    assert kind.blank == blank
    assert type(kind.blank) is type(blank)


@pytest.mark.parametrize("where", ["top", "typed", "typed-nested", "free", "free-nested"])
def test_a_key_that_is_no_string_is_refused_by_the_bulk_read_wherever_it_is(where: str) -> None:
    """Each place a body can hold a map (a typed value, which msgspec's conversion
    checks, or a free-form one, which it does not): the bulk read refuses a key that
    is not a string as the event-by-event read does."""
    e = ev.StepFinished(message_id="m", part_id="p", reason="stop", cost=0.5,
                        tokens=ev.Tokens(input=1, output=2, cache=ev.CacheTokens(read=3)),
                        session_id="s", seq=1, time=1, actor="assistant")
    t = ev.ToolStarted(message_id="m", part_id="p2", input={"a": [{"b": 1}]},
                       metadata={"k": "v"}, session_id="s", seq=2, time=2, actor="assistant")
    cols = msgspec.msgpack.decode(packed.pack([e, t], "s", 1)[1:])
    bodies = cols[_COLUMNS.index("bodies")]
    target = {"top": bodies[0], "typed": bodies[0]["tokens"],
              "typed-nested": bodies[0]["tokens"]["cache"], "free": bodies[1]["input"],
              "free-nested": bodies[1]["input"]["a"][0]}[where]
    target[7] = 1
    data = bytes((packed.FORMAT,)) + msgspec.msgpack.encode(cols)
    packed._last.clear()
    with pytest.raises(EventDecodeError):
        packed.unpack(data, "s", 1)
    _bulk_reads_as_unpack(data)


def test_deltas_whose_kind_row_names_another_default_actor_are_read_as_events() -> None:
    """Found by the damaged-payload fuzz (on the tree before this test too): a flipped
    byte in the default actor of the kind table's text.delta row; unpack gives the
    delta with the actor as written, and the bulk read gave a run, which stands for
    deltas with the kind's own default actor."""
    sid = "019b76da-a801-7005-8c2c-d958d8744d16"
    events: list[Event] = [
        ev.TextAdded(text="", session_id=sid, seq=1, time=1767225600000, actor="assistant",
                     message_id="", part_id="", id="019b76da-a800-7000-b8dd-3dd0579a321c"),
        ev.TextDelta(delta="", session_id=sid, seq=2, time=0, actor="assistant",
                     message_id="", part_id="", id="019b76da-a800-7001-b8dd-3dd0579a321d"),
    ]
    cols = msgspec.msgpack.decode(packed.pack(events, sid, 1)[1:])
    assert cols[3][1] == 0  # the delta carries no flag: a run, were its row not damaged
    cols[0] = [[tag, "`ssistant" if tag == "text.delta" else actor, bare, shape]
               for tag, actor, bare, shape in cols[0]]
    data = bytes((packed.FORMAT,)) + msgspec.msgpack.encode(cols)
    packed._last.clear()
    assert packed.unpack(data, sid, 1)[1].actor == "`ssistant"
    for ids in (True, False):
        items = packed.unpack_runs(data, sid, 1, ids=ids)
        delta = items[1]
        assert not isinstance(delta, Run)
        assert delta.actor == "`ssistant"
