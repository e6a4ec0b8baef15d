"""PostgreSQL: many writer processes on different sessions at once.

Global positions stay gapless and in commit order, every session's seqs are
gapless and in the order its writer appended, every chain verifies, across
the merges of uncompressed blocks that each session passes through, and a
subscription reads exactly what ``read_all`` does.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
from typing import Any

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
