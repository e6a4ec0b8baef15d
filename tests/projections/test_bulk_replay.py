"""Bulk replay (projections.bulk, SQLStore.read_runs): the WithParts state it
folds equals, byte for byte in its JSON, the state of the per-event replay and of
the projection kept live while recording, for whole stores, for reads cut at any
seq, for stores holding only a prefix, and through a fork."""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine.errors import StoreError
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore
from engine.store.base import Store
from engine.store.runs import Run
from projections.bulk import collector_paused, read_bulk
from projections.timetravel import Timeline, at
from projections.withparts import WithPartsProjection

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def state(proj: WithPartsProjection) -> tuple[int, bytes]:
    return proj.seq, msgspec.json.encode(proj.to_json())


def per_event(store: SQLiteStore, session_id: str, last: int | None = None) -> tuple[int, bytes]:
    return state(WithPartsProjection(session_id).apply_all(store.read(session_id, 1, last)))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(200, 2500),
       cuts=st.lists(st.integers(0, 10**9), min_size=4, max_size=8),
       batch=st.integers(1, 700), fork_at=st.integers(0, 10**9))
def test_bulk_replay_is_the_per_event_replay_and_the_live_state(
        seed: int, size: int, cuts: list[int], batch: int, fork_at: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "s.db"))
        session = Session.create(store, clock=StepClock(START_MS))
        live = WithPartsProjection(session.id)
        session.subscribe(live)
        Workload(session, seed=seed).run(size)
        sid, n = session.id, session.version
        assert any(type(x) is Run for x in store.read_runs(sid))  # the bulk path ran

        whole = state(WithPartsProjection.replay(store, sid))
        assert whole == per_event(store, sid) == state(live)

        # Reads cut at any seq: a run never goes past the cut.
        timeline = Timeline(store, sid, every=97)
        for cut in (c % (n + 1) for c in cuts):
            want = per_event(store, sid, cut)
            assert state(WithPartsProjection.replay(store, sid, cut)) == want
            assert state(at(store, sid, cut, use_snapshots=False)) == want
            assert state(timeline.at(cut)) == want

        # A store that holds only a prefix (its own block layout: appended in batches).
        cut = cuts[0] % (n + 1)
        events = list(store.read(sid, 1, cut))
        prefix = SQLiteStore(str(Path(tmp) / "prefix.db"))
        prefix.create_session(sid, created=session.info.created)
        for i in range(0, len(events), batch):
            prefix.append(sid, events[i:i + batch], i)
        assert state(WithPartsProjection.replay(prefix, sid)) == per_event(store, sid, cut)
        prefix.close()

        # A fork reads its parent's blocks up to the fork point, then its own.
        fork = session.fork(at=fork_at % (n + 1))
        fork.user_message("and now for something else")
        assert state(WithPartsProjection.replay(store, fork.id)) == per_event(store, fork.id)
        store.close()


def test_a_store_without_bulk_reads_gives_events() -> None:
    store = MemoryStore()
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=1).run(500)
    items = list(read_bulk(store, session.id))
    assert items == list(store.read(session.id))
    assert state(WithPartsProjection.replay(store, session.id)) == state(
        WithPartsProjection(session.id).apply_all(items))


class _Watched:
    """A store whose bulk read notes whether the collector runs meanwhile, and can fail."""

    def __init__(self, store: SQLiteStore, fail: bool = False) -> None:
        self.store, self.fail = store, fail
        self.seen: list[bool] = []

    def read(self, session_id: str, first: int = 1, last: int | None = None) -> Any:
        return self.store.read(session_id, first, last)

    def read_runs(self, session_id: str, first: int = 1, last: int | None = None, *,
                  ids: bool = True) -> Iterator[Any]:
        for item in self.store.read_runs(session_id, first, last, ids=ids):
            self.seen.append(gc.isenabled())
            yield item
        if self.fail:
            raise StoreError("the disk went away")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_pauses_for_a_bulk_replay_and_comes_back_as_it_was(
        tmp_path: Path, enabled: bool) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=2).run(300)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        watched = _Watched(store)
        replayed = WithPartsProjection.replay(cast(Store, watched), session.id)
        assert watched.seen
        assert not any(watched.seen)
        assert gc.isenabled() is enabled
        assert state(replayed) == per_event(store, session.id)
        failing = _Watched(store, fail=True)
        with pytest.raises(StoreError):
            WithPartsProjection.replay(cast(Store, failing), session.id)
        assert failing.seen
        assert not any(failing.seen)
        assert gc.isenabled() is enabled  # back on the way out of a failure too
        with collector_paused():  # nested: only the outermost turns it back
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    store.close()


def test_a_state_built_with_the_collector_paused_leaves_in_the_oldest_generation() -> None:
    """Leaving the pause moves what was built to the oldest generation without a
    collection, so the collector does not walk the new state twice (once to move it
    out of the youngest generation, again out of the middle one); objects the program
    froze itself stay frozen."""
    was = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            state = [[i] for i in range(1000)]  # tracked objects, made while paused
        young = {id(o) for o in gc.get_objects(0)} | {id(o) for o in gc.get_objects(1)}
        assert not any(id(x) in young for x in state)
        assert any(x is state for x in gc.get_objects(2))
        gc.freeze()  # the program's own frozen objects
        frozen = gc.get_freeze_count()
        try:
            with collector_paused():
                more = [[1]]
            assert gc.get_freeze_count() == frozen
            assert gc.isenabled()
            assert more
        finally:
            gc.unfreeze()
        gc.disable()
        with collector_paused():  # off before: left off, and nothing collected
            kept = [[1]]
        assert not gc.isenabled()
        assert any(x is kept for x in gc.get_objects(0))
    finally:
        (gc.enable if was else gc.disable)()


def test_messages_builds_many_views_with_the_collector_paused(tmp_path: Path) -> None:
    """After a replay, messages() builds a view for every message and part (all new,
    none garbage): no collection walks them meanwhile, and the collector is back on
    after. A live reader's messages(), with only the one message an event touched to
    rebuild, leaves the collector running (its young garbage is collected as ever)."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    session = Session.create(store, clock=StepClock(START_MS))
    live = WithPartsProjection(session.id)
    session.subscribe(live)
    Workload(session, seed=3).run(6000)
    was = gc.isenabled()
    starts: list[int] = []
    enabled_inside: list[bool] = []

    def counted(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            starts.append(info["generation"])

    def watched_build(proj: WithPartsProjection) -> None:
        build = proj._build_all

        def noting(*args: Any) -> Any:
            enabled_inside.append(gc.isenabled())
            return build(*args)
        proj._build_all = noting  # type: ignore[method-assign,assignment]

    gc.enable()
    gc.callbacks.append(counted)
    try:
        replayed = WithPartsProjection.replay(store, session.id)
        assert len(replayed._msgs) >= 16  # enough views for the pause (_MANY_VIEWS)
        watched_build(replayed)
        starts.clear()
        views = replayed.messages()
        assert enabled_inside == [False]
        assert not starts  # several gen-0 collections without the pause
        assert gc.isenabled()
        live.messages()
        session.user_message("one more")  # touches one message
        watched_build(live)
        live.messages()
        assert enabled_inside == [False, True]
        assert len(views) == len(replayed._msgs)
    finally:
        gc.callbacks.remove(counted)
        (gc.enable if was else gc.disable)()
    store.close()
