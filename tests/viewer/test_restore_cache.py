"""The viewer's fast path to a state from stored snapshots (``Viewer._from_snapshots``:
the :class:`RestoreCache` of decoded indexes and message views kept between answers,
the tail read in runs, the event under the slider decoded alone) gives exactly what a
replay from the first event gives, at any seq, in any order, again and again: across
sealed block boundaries, on a fork reading its parent's snapshots, and after a writer
puts a new snapshot at a seq the cache has already read.

A cache is only a cache: a failure here is a state that differs from the log."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine.session import Session, StepClock
from engine.store import SQLiteStore
from projections.restore_cache import RestoreCache
from projections.serve.state import Viewer
from projections.timetravel import at, write_snapshots


def _check(viewer: Viewer, store: SQLiteStore, sid: str, seq: int) -> None:
    got = viewer._from_snapshots(sid, seq)
    want = at(store, sid, seq, use_snapshots=False)
    assert got.seq == seq
    assert got.to_json() == want.to_json(), seq
    event = viewer._event(sid, seq)
    assert event == (next(iter(store.read(sid, seq, seq))) if seq else None), seq


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1100, 2400),
       every=st.integers(30, 900), fork_at=st.integers(0, 10**9), more=st.integers(0, 1200),
       seqs=st.lists(st.tuples(st.booleans(), st.integers(0, 10**9)), min_size=8, max_size=24))
def test_states_through_the_cache_equal_a_replay(  # noqa: PLR0917
        seed: int, size: int, every: int, fork_at: int, more: int,
        seqs: list[tuple[bool, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "s.db"))
        parent = Session.create(store, clock=StepClock(START_MS))
        Workload(parent, seed=seed).run(size)
        write_snapshots(store, parent.id, every=every)
        child = parent.fork(at=fork_at % (parent.version + 1))
        work = Workload(child, seed=seed + 1)
        work._call = 10**6  # provider call ids name one call per session
        work.run(more)
        write_snapshots(store, child.id, every=every * 2)
        ends = store.sealed_ends(parent.id)
        assert ends  # the tails cross sealed blocks' edges below
        viewer = Viewer(store, background=False)
        picks: list[tuple[str, int]] = []
        for in_child, k in seqs:
            sid = child.id if in_child else parent.id
            n = store.version(sid)
            picks.append((sid, k % (n + 1)))
        # Each seq, the next one (the → key) and the edges of a sealed block; some twice.
        # (a block may end at the session's last seq: the edge's +1 is then capped)
        last = store.version(parent.id)
        edges = [(parent.id, min(e + d, last)) for e in ends[:2] for d in (-1, 0, 1)]
        for sid, seq in picks + edges:
            for again in (seq, min(seq + 1, store.version(sid)), seq):
                _check(viewer, store, sid, again)
        indexes, _ = viewer._restore.sizes()
        assert indexes  # the cache was used: its hits were checked above
        # Every message of a state, through the cache's views and a prefetch of the rest.
        for sid, seq in picks[:3]:
            assert viewer._from_snapshots(sid, seq).messages() == at(
                store, sid, seq, use_snapshots=False).messages()
        store.close()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(5, 60), second=st.integers(5, 60))
def test_a_snapshot_written_again_is_read_again(seed: int, first: int, second: int) -> None:
    """A later writer may put other records at seqs the cache has read (other spacings,
    other deltas): an index is kept only with the very bytes it was decoded from."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "s.db"))
        session = Session.create(store, clock=StepClock(START_MS))
        Workload(session, seed=seed).run(400)
        sid, n = session.id, session.version
        write_snapshots(store, sid, every=first)
        cache = RestoreCache()
        for seq in range(0, n + 1, 7):
            assert at(store, sid, seq, cache=cache).to_json() == at(
                store, sid, seq, use_snapshots=False).to_json()
        write_snapshots(store, sid, every=second)  # overwrites some of those records
        for seq in range(0, n + 1, 7):
            assert at(store, sid, seq, cache=cache).to_json() == at(
                store, sid, seq, use_snapshots=False).to_json()
            assert at(store, sid, seq, cache=cache).messages() == at(
                store, sid, seq, use_snapshots=False).messages()
        store.close()
