"""engine.store.packed_range: a partial read of a packed payload (``lo..hi``) is
exactly that stretch of the whole payload's events, with runs cut at both ends,
whatever came before it (stored ids, foreign ids, times that repeat, step back or
overflow, other actors and versions); and a store's read of any range in runs
equals its per-event read of that range."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine import events as ev
from engine.errors import EventDecodeError
from engine.events import Event
from engine.session import Session, StepClock
from engine.store import SQLiteStore, packed, packed_range
from engine.store.runs import Run
from tests.store.test_packed import streams
from tests.support.event_strategies import drawn_damage, runs
from tests.support.packed_format_1 import as_format_1
from tests.support.runs_check import assert_runs_join

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check_ranges(run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    session_id, first, events = run
    blob = packed.pack(events, session_id, first)
    if data.draw(st.booleans()):  # format 1 (read whole, its prefix walked)
        blob = as_format_1(blob)
    last = first + len(events) - 1
    for _ in range(3):
        lo = data.draw(st.integers(first - 2, last + 1))
        hi = data.draw(st.integers(lo - 1, last + 2))
        got = packed_range.unpack_runs_range(blob, session_id, first, lo, hi)
        assert_runs_join(got, [e for e in events if lo <= e.seq <= hi])


@SETTINGS
@given(run=streams(), data=st.data())
def test_a_range_of_a_stream_is_that_stretch_of_the_whole(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    _check_ranges(run, data)


@SETTINGS
@given(run=runs(), data=st.data())
def test_a_range_of_any_events_is_that_stretch_of_the_whole(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    _check_ranges(run, data)


def test_a_prefix_with_an_absolute_time_is_walked() -> None:
    """Times whose steps overflow int64 are stored absolute (TIME_ABS): the state at
    ``lo`` is then found by walking the prefix, with the same result."""
    times = [5, 2**63 - 1, -(2**62), 7, 7, 8]
    events: list[Event] = [
        ev.TextDelta(message_id="m", part_id="p", delta=f"d{i}", id=f"foreign-{i}",
                     session_id="s", seq=i + 1, time=t)
        for i, t in enumerate(times)]
    blob = packed.pack(events, "s", 1)
    for lo in range(1, 7):
        for hi in range(lo, 7):
            assert_runs_join(packed_range.unpack_runs_range(blob, "s", 1, lo, hi),
                             events[lo - 1:hi])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(run=runs(max_size=12), data=st.data())
def test_a_damaged_payload_is_refused_with_a_decode_error_or_read(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    session_id, first, events = run
    blob = packed.pack(events, session_id, first)
    if data.draw(st.booleans()):
        blob = as_format_1(blob)
    blob = drawn_damage(data, blob)
    lo = data.draw(st.integers(first, first + len(events) - 1))
    with contextlib.suppress(EventDecodeError):  # never any other error
        for item in packed_range.unpack_runs_range(blob, session_id, first, lo,
                                                   first + len(events)):
            assert isinstance(item, (*ev.EVENT_TYPES, Run))


def test_an_unknown_format_is_a_decode_error() -> None:
    with pytest.raises(EventDecodeError, match="format"):
        packed_range.unpack_runs_range(b"", "s", 1, 1, 1)
    with pytest.raises(EventDecodeError, match="format"):
        packed_range.unpack_runs_range(b"\x03abc", "s", 1, 1, 1)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(300, 3000), batch=st.integers(1, 900),
       cuts=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 3000)),
                     min_size=5, max_size=10))
def test_a_stores_range_in_runs_is_its_range_of_events(
        seed: int, size: int, batch: int, cuts: list[tuple[int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = SQLiteStore(str(Path(tmp) / "a.db"))
        session = Session.create(source, clock=StepClock(START_MS))
        Workload(session, seed=seed).run(size)
        events = list(source.read(session.id))
        source.close()
        store = SQLiteStore(str(Path(tmp) / "b.db"))  # its own block layout
        store.create_session(session.id, created=session.info.created)
        for i in range(0, len(events), batch):
            store.append(session.id, events[i:i + batch], i)
        n = len(events)
        for start, length in cuts:
            lo = start % n + 1
            hi = min(n, lo + length)
            assert_runs_join(list(store.read_runs(session.id, lo, hi)), events[lo - 1:hi])
        store.close()


def _check_event_ranges(run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    session_id, first, events = run
    blob = packed.pack(events, session_id, first)
    if data.draw(st.booleans()):  # format 1 (read whole, its prefix walked)
        blob = as_format_1(blob)
    last = first + len(events) - 1
    for _ in range(3):
        lo = data.draw(st.integers(first - 2, last + 1))
        hi = data.draw(st.integers(lo - 1, last + 2))
        got = packed_range.unpack_events_range(blob, session_id, first, lo, hi)
        assert got == packed.unpack(blob, session_id, first)[
            max(lo - first, 0):max(hi - first + 1, 0)]


@SETTINGS
@given(run=streams(), data=st.data())
def test_events_of_a_range_of_a_stream_are_the_wholes_events_there(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    """unpack_events_range decodes only lo..hi's bodies, and gives exactly the events
    (ids included, no runs) that the whole payload's decode gives there."""
    _check_event_ranges(run, data)


@SETTINGS
@given(run=runs(), data=st.data())
def test_events_of_a_range_of_any_events_are_the_wholes_events_there(
        run: tuple[str, int, list[Event]], data: st.DataObject) -> None:
    _check_event_ranges(run, data)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1100, 2600),
       fork_at=st.integers(0, 10**9), more=st.integers(0, 1500),
       cuts=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 40)),
                     min_size=5, max_size=12))
def test_read_exact_is_read_through_sealed_blocks_and_forks(
        seed: int, size: int, fork_at: int, more: int, cuts: list[tuple[int, int]]) -> None:
    """``SQLStore.read_exact`` (only the bodies of the events asked for) gives what
    ``read`` gives, for stretches inside, across and at the edges of sealed blocks, of
    a session and of a fork of it (its parent's events up to the fork, then its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "a.db"))
        parent = Session.create(store, clock=StepClock(START_MS))
        Workload(parent, seed=seed).run(size)
        child = parent.fork(at=fork_at % (parent.version + 1))
        work = Workload(child, seed=seed + 1)
        work._call = 10**6  # provider call ids name one call per session
        work.run(more)
        assert store.sealed_ends(parent.id)
        for sid in (parent.id, child.id):
            n = store.version(sid)
            if not n:
                continue
            for start, length in cuts:
                lo = start % n + 1
                hi = min(n, lo + length)
                assert list(store.read_exact(sid, lo, hi)) == list(store.read(sid, lo, hi))
            ends = store.sealed_ends(sid)
            for end in ends[:3]:  # the edges of the sealed blocks
                for lo, hi in ((end, end), (end, end + 1), (end + 1, end + 1), (end - 1, end)):
                    if 1 <= lo <= hi <= n:
                        assert list(store.read_exact(sid, lo, hi)) == list(
                            store.read(sid, lo, hi))
        store.close()
