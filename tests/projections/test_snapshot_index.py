"""Stored snapshots are caches: ``at(seq)`` from them equals a replay, always.

Properties over realistic sessions (the benchmark's workload, small): snapshots
written by several writers at different spacings (their delta indexes chain into
each other's records), live and after the fact, through forks, and with indexes
or message chunks damaged, swapped or deleted behind the store's back. A damaged
snapshot may cost a replay; it never yields a different state.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore
from engine.store.blocks import BLOCK_MAX
from projections.text import render_messages, render_state
from projections.timetravel import (
    INDEX_NAME,
    Snapshotter,
    at,
    decode_index,
    latest_snapshot,
    message_snapshot_name,
    preview_snapshot_name,
    write_snapshots,
)
from projections.withparts import WithPartsProjection, encode_message

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def recorded(seed: int, events: int) -> tuple[MemoryStore, Session]:
    store = MemoryStore()
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=seed).run(events)
    return store, session


def replays(store: MemoryStore, sid: str) -> list[WithPartsProjection]:
    """The state after each prefix, by replay from the first event."""
    proj = WithPartsProjection(sid)
    out = [WithPartsProjection.thaw(sid, proj.freeze())]
    for e in store.read(sid):
        proj.apply(e)
        out.append(WithPartsProjection.thaw(sid, proj.freeze()))
    return out


def assert_equal_everywhere(store: MemoryStore, sid: str,
                            want: list[WithPartsProjection], *, show: bool = False) -> None:
    for k, expected in enumerate(want):
        got = at(store, sid, k)
        assert got.seq == k
        assert got.messages() == expected.messages(), k
        assert got.to_json() == expected.to_json(), k
        # What `convlog show` prints: restored messages from their stored previews.
        if show:
            assert render_state(at(store, sid, k)) == render_messages(expected.messages()), k


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(40, 250),
       spacings=st.lists(st.integers(1, 60), min_size=1, max_size=3))
def test_at_equals_a_replay_with_snapshots_of_several_writers(
        seed: int, events: int, spacings: list[int]) -> None:
    store, session = recorded(seed, events)
    want = replays(store, session.id)
    for every in spacings:  # later writers overwrite some of the earlier records
        write_snapshots(store, session.id, every=every)
        assert_equal_everywhere(store, session.id, want)


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(40, 300), every=st.integers(1, 40))
def test_a_live_snapshotter_writes_mostly_deltas_that_restore_exactly(
        seed: int, events: int, every: int) -> None:
    store = MemoryStore()
    session = Session.create(store, clock=StepClock(START_MS))
    snapshotter = Snapshotter(store, WithPartsProjection(session.id), every=every)
    session.subscribe(snapshotter)
    Workload(session, seed=seed).run(events)
    want = replays(store, session.id)
    kinds = []
    for seq in range(every, session.version + 1, every):
        found = store.latest_snapshot(session.id, INDEX_NAME, seq)
        assert found is not None
        assert found[0] == seq
        index = decode_index(found[1])
        assert index is not None
        kinds.append(index.base is None)
        restored = latest_snapshot(store, session.id, seq)
        assert restored is not None
        assert restored.seq == seq
        assert restored.messages() == want[seq].messages()
    assert kinds[:1] in ([], [True])  # a writer starts with a full index
    assert_equal_everywhere(store, session.id, want)


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(60, 300), data=st.data())
def test_forks_read_their_parents_snapshots_renamed(seed: int, events: int,
                                                     data: st.DataObject) -> None:
    store, parent = recorded(seed, events)
    write_snapshots(store, parent.id, every=data.draw(st.integers(1, 30)))
    child = parent.fork(at=data.draw(st.integers(0, parent.version)))
    more = Workload(child, seed=seed + 1)
    more._call = 10**6  # provider call ids name one call per session, the parent's included
    more.run(data.draw(st.integers(0, 80)))
    write_snapshots(store, child.id, every=data.draw(st.integers(1, 30)))
    grandchild = child.fork(at=data.draw(st.integers(0, child.version)))
    for s in (child, grandchild):
        assert_equal_everywhere(store, s.id, replays(store, s.id))


# A damage is drawn whole, before the store exists: the snapshot bytes differ between
# runs (message and part ids are random, and chunks are zlib-compressed), so draws that
# depended on their lengths or on id order made hypothesis's data generation flaky.
# Positions are taken modulo what they index, and records are ordered by when their
# message first appears, so the same drawn plan damages the same records every run.
KINDS = ("missing", "bit", "torn", "swap", "garbage", "empty")


class Damage(NamedTuple):
    kind: str
    record: int  # which record, modulo how many there are
    row: int  # which of its rows, modulo how many it has
    at: int  # a byte position or a cut, modulo the bytes' length
    bit: int
    other: int  # which row's bytes a swap puts here, modulo how many there are
    garbage: bytes


DAMAGES = st.builds(Damage, kind=st.sampled_from(KINDS), record=st.integers(0, 2**16),
                    row=st.integers(0, 2**16), at=st.integers(0, 2**16),
                    bit=st.integers(0, 7), other=st.integers(0, 2**16),
                    garbage=st.binary(min_size=1, max_size=39))


def _damaged(d: Damage, data: bytes, everything: list[bytes]) -> bytes:
    if d.kind == "bit" and data:
        i = d.at % len(data)
        return data[:i] + bytes([data[i] ^ (1 << d.bit)]) + data[i + 1:]
    if d.kind == "torn":
        return data[:d.at % (len(data) + 1)]
    if d.kind == "swap":  # another record's bytes
        return everything[d.other % len(everything)]
    if d.kind == "garbage":
        return d.garbage
    return b""


def _in_message_order(keys: list[tuple[str, str]],
                      states: list[WithPartsProjection]) -> list[tuple[str, str]]:
    """The index first, then message records by their message's first appearance."""
    order: dict[str, int] = {}
    for state in states:
        for m in state.messages():
            order.setdefault(message_snapshot_name(m.info.id), len(order))
            order.setdefault(preview_snapshot_name(m.info.id), len(order))
    assert all(name == INDEX_NAME or name in order for _, name in keys)
    return sorted(keys, key=lambda k: -1 if k[1] == INDEX_NAME else order[k[1]])


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(40, 300), every=st.integers(1, 30),
       damages=st.lists(DAMAGES, min_size=1, max_size=6))
def test_damaged_or_missing_snapshots_never_change_a_state(
        seed: int, events: int, every: int, damages: list[Damage]) -> None:
    store, session = recorded(seed, events)
    sid = session.id
    want = replays(store, sid)
    write_snapshots(store, sid, every=every)
    records = store.recorder._snapshots  # behind the store's back, as a disk fault would be
    keys = _in_message_order(list(records), want)
    everything = [data for key in keys for _, data in records[key]]
    for d in damages:
        rows = records[keys[d.record % len(keys)]]
        if not rows:
            continue
        i = d.row % len(rows)
        if d.kind == "missing":
            del rows[i]
        else:
            rows[i] = (rows[i][0], _damaged(d, rows[i][1], everything))
    assert_equal_everywhere(store, sid, want, show=True)


def test_a_version_1_index_from_the_previous_release_still_reads() -> None:
    """Today's stores hold version 1 records: a msgpack map and raw message chunks."""
    store, session = recorded(3, 200)
    sid = session.id
    want = replays(store, sid)
    proj = WithPartsProjection(sid)
    for e in store.read(sid):
        proj.apply(e)
        if e.seq % 50 == 0:
            refs = []
            for m in proj.messages():
                store.put_snapshot(sid, message_snapshot_name(m.info.id), e.seq,
                                   encode_message(m))
                refs.append((m.info.id, e.seq))
            store.put_snapshot(sid, INDEX_NAME, e.seq, msgspec.msgpack.encode({
                "v": 1, "seq": e.seq, "session": sid, "messages": refs,
                "tool_added": proj.tool_added_items()}))
    restored = latest_snapshot(store, sid, 199)
    assert restored is not None
    assert restored.seq == 150
    assert_equal_everywhere(store, sid, want)
    # An unknown version is only a miss.
    store.put_snapshot(sid, INDEX_NAME, 150, msgspec.msgpack.encode({"v": 9, "seq": 150}))
    assert decode_index(store.latest_snapshot(sid, INDEX_NAME, 150)[1]) is None  # type: ignore[index]
    restored = latest_snapshot(store, sid, 199)
    assert restored is None
    assert at(store, sid, 199).messages() == want[199].messages()


def test_deltas_keep_the_index_small() -> None:
    store, session = recorded(5, 3000)
    sid = session.id
    write_snapshots(store, sid, every=50)
    sizes = {True: 0, False: 0}
    for seq, data in store.recorder._snapshots[(sid, INDEX_NAME)]:
        index = decode_index(data)
        assert index is not None
        assert index.seq == seq
        sizes[index.base is None] += 1
    assert sizes[False] > 3 * sizes[True]  # most snapshots write a delta
    # The previous release reads a record as a map and misses on any "v" but 1.
    seen_by_old = msgspec.msgpack.decode(store.recorder._snapshots[(sid, INDEX_NAME)][-1][1])
    assert isinstance(seen_by_old, dict)
    assert seen_by_old["v"] == 2
    with pytest.raises(ValueError, match="outside"):
        at(store, sid, session.version + 1)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), every=st.integers(40, 1500))
def test_no_tail_crosses_a_sealed_block_below_the_block_size(seed: int, every: int) -> None:
    """write_snapshots on a block store also snapshots at each sealed block's end (when
    K is below the block size), so at()'s tail decodes one block; at() still equals a
    replay."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "s.db"))
        session = Session.create(store, clock=StepClock(START_MS))
        Workload(session, seed=seed).run(2600)
        sid, n = session.id, session.version
        ends = store.sealed_ends(sid)
        assert ends
        assert ends == sorted(ends)
        assert ends[-1] <= n
        written = write_snapshots(store, sid, every=every)
        seqs = set(range(every, n + 1, every))
        if every < BLOCK_MAX:
            seqs |= set(ends)
        assert written == len(seqs)
        for seq in range(1, n + 1, 37):
            found = store.latest_snapshot(sid, INDEX_NAME, seq)
            start = found[0] if found is not None else 0
            if every < BLOCK_MAX:
                assert not [e for e in ends if start < e < seq]
            assert at(store, sid, seq).messages() == at(
                store, sid, seq, use_snapshots=False).messages()
        store.close()
