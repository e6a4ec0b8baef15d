"""PostgreSQL: many writer processes on different sessions at once.

Global positions stay gapless and in commit order, every session's seqs are
gapless and in the order its writer appended, every chain verifies, across
the merges of uncompressed blocks that each session passes through, and a
subscription reads exactly what ``read_all`` does.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.session import Session
from engine.store import open_store
from engine.store.blocks import SEAL_AT
from engine.store.verify import verify

WRITERS = 8
EACH = SEAL_AT + 40  # every session merges its tail at least once


def _text(e: object) -> str:
    assert isinstance(e, ev.TranscriptNoted)
    return e.text

def _sid(w: int) -> str:
    return f"0190a000-0000-7000-8000-0000000c{w:04d}"


def _note(w: int, i: int) -> ev.TranscriptNoted:
    return ev.TranscriptNoted(id=f"0190a000-0000-7000-9000-{w:04d}{i:08d}", time=1 + i,
                              text=f"w{w}-{i}")


def _writer(url: str, w: int, start: Any, out: Any) -> None:
    """Append EACH events to its own session, batches of 1 and 3 mixed."""
    store = open_store(url)
    acked: list[int] = []
    start.wait()
    i = 0
    while i < EACH:
        size = 3 if i % 7 == 0 else 1
        got = store.append(_sid(w), [_note(w, j) for j in range(i, min(i + size, EACH))])
        acked += got.positions
        i += size
    store.close()
    out.put((w, acked))


def test_concurrent_writers_keep_positions_gapless_and_chains_valid(pg_url: str) -> None:
    store = open_store(pg_url)
    for w in range(WRITERS):
        Session.create(store, _sid(w)).create_conversation()  # positions 1..WRITERS
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(pg_url, w, start, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    acked = dict(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    try:
        total = WRITERS * (EACH + 1)
        records = list(store.read_all())
        assert [r.position for r in records] == list(range(1, total + 1))
        assert store.last_position() == total
        # A subscription's backlog (pages of the log with their blocks, across
        # merged and one-event blocks) is read_all, whole or of one session.
        assert list(store.subscribe(0, idle_timeout=0.2, poll=0.05)) == records
        assert list(store.subscribe(5, session_id=_sid(2), idle_timeout=0.2, poll=0.05)) == [
            r for r in records if r.position > 5 and r.event.session_id == _sid(2)]
        records = records[WRITERS:]  # the writers' events
        # Every acknowledged position holds that writer's event, in its order.
        where = {r.position: r.event for r in records}
        for w, positions in acked.items():
            assert positions == sorted(positions)
            assert [_text(where[p]) for p in positions] == [
                f"w{w}-{i}" for i in range(EACH)]
        for w in range(WRITERS):
            events = list(store.read(_sid(w)))[1:]
            assert [e.seq for e in events] == list(range(2, EACH + 2))
            assert [_text(e) for e in events] == [
                f"w{w}-{i}" for i in range(EACH)]
        report = verify(store)
        assert report.ok, report
        # The writers really overlapped: positions of different writers interleave.
        owners = [int(_text(r.event).split("-")[0][1:]) for r in records]
        assert sum(a != b for a, b in itertools.pairwise(owners)) > WRITERS
    finally:
        store.close()


# --------------------------------------------------------------------------- readers
# Positions are placed after the commit, by whichever writer holds the placement
# lock: a reader must still never see position p + 1 before p (it would read past p
# and skip it for good), and a subscriber must receive every position once, in
# order. Writers on threads (one connection each: the server runs them
# concurrently) with batch sizes drawn by hypothesis; readers poll read_all after
# what they last saw, and a subscriber follows, all while the writers run; a staller
# holds the placement lock for drawn pauses, so that appends take both paths
# (placed in their own transaction, or pending and settled after their commit).

STRESS_WRITERS = 4


def _stress_writer(url: str, w: int, sizes: list[int], *, go: threading.Event,
                   acked: dict[int, list[int]], errors: list[str]) -> None:
    try:
        store = open_store(url)
        try:
            go.wait()
            i = 0
            for size in sizes:
                got = store.append(_sid(w), [_note(w, i + j) for j in range(size)])
                acked[w] += got.positions
                i += size
        finally:
            store.close()
    except Exception as exc:
        errors.append(f"writer {w}: {exc!r}")


def _staller(url: str, done: threading.Event, pauses: list[float]) -> None:
    """Holds the placement lock now and then, as a placement under way does: the
    writers that meet it commit pending rows and settle them afterwards."""
    import psycopg  # noqa: PLC0415 - optional extra

    from engine.store.postgres import PLACE_LOCK  # noqa: PLC0415 - needs psycopg

    with psycopg.connect(url.split("&durability", maxsplit=1)[0], autocommit=True) as db:
        for pause in itertools.cycle(pauses):
            if done.is_set():
                return
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s), pg_sleep(%s)", (PLACE_LOCK, pause))


def _poller(url: str, done: threading.Event, seen: list[int], errors: list[str]) -> None:
    store = open_store(url)
    try:
        while True:
            finished = done.is_set()  # before the read: a last pass after the writers
            for record in store.read_all(after=seen[-1] if seen else 0):
                expected = (seen[-1] if seen else 0) + 1
                if record.position != expected:
                    errors.append(f"read position {record.position} after {expected - 1}")
                    return
                seen.append(record.position)
            if finished:
                return
    finally:
        store.close()


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.lists(st.integers(1, 4), min_size=20, max_size=60),
                      min_size=STRESS_WRITERS, max_size=STRESS_WRITERS),
       durability=st.sampled_from(["sync", "batched"]),
       pauses=st.lists(st.sampled_from([0.0, 0.0005, 0.002, 0.01]), min_size=1, max_size=6))
def test_readers_never_see_a_position_before_a_smaller_one(
        pg_url: str, sizes: list[list[int]], durability: str, pauses: list[float]) -> None:
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(pg_url, autocommit=True) as db:  # each example: an empty store
        db.execute("DROP TABLE IF EXISTS convlog_meta, convlog_sessions, convlog_blocks, "
                   "convlog_log, convlog_ids, convlog_snapshots, convlog_position, "
                   "convlog_pending")
    url = f"{pg_url}&durability={durability}"
    store = open_store(url)
    for w in range(STRESS_WRITERS):
        Session.create(store, _sid(w)).create_conversation()  # positions 1..STRESS_WRITERS
    go, done = threading.Event(), threading.Event()
    errors: list[str] = []
    acked: dict[int, list[int]] = {w: [] for w in range(STRESS_WRITERS)}
    seen: list[list[int]] = [[], []]
    subscribed: list[int] = []

    def subscriber() -> None:
        follower = open_store(url)
        try:
            for record in follower.subscribe(0, idle_timeout=5.0, poll=0.5,
                                             stop=lambda: done.is_set() and bool(
                                                 subscribed and subscribed[-1] >= total)):
                subscribed.append(record.position)
                if subscribed[-1] >= total:
                    return
        finally:
            follower.close()

    total = STRESS_WRITERS + sum(map(sum, sizes))
    threads = [threading.Thread(target=_stress_writer, args=(url, w, sizes[w]),
                                kwargs={"go": go, "acked": acked, "errors": errors})
               for w in range(STRESS_WRITERS)]
    readers = [threading.Thread(target=_poller, args=(url, done, seen[k], errors))
               for k in range(2)] + [threading.Thread(target=subscriber),
                                     threading.Thread(target=_staller, args=(url, done, pauses))]
    for t in threads + readers:
        t.start()
    go.set()
    for t in threads:
        t.join(timeout=120)
    done.set()
    for t in readers:
        t.join(timeout=60)
    try:
        assert not errors, errors
        assert all(not t.is_alive() for t in threads + readers)
        everything = list(range(1, total + 1))
        assert seen[0] == everything
        assert seen[1] == everything
        assert subscribed == everything
        assert sorted(p for w in acked for p in acked[w]) == everything[STRESS_WRITERS:]
        records = list(store.read_all())
        where = {r.position: r.event for r in records}
        for w in range(STRESS_WRITERS):  # each writer's events at its acked positions
            assert acked[w] == sorted(acked[w])
            assert [_text(where[p]) for p in acked[w]] == [
                f"w{w}-{i}" for i in range(sum(sizes[w]))]
        assert store.last_position() == total
        assert verify(store).ok
    finally:
        store.close()
