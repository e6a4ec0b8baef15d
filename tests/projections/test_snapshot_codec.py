"""Snapshot chunks, format 3 (projections.snapshot_codec), and the stores the previous
release wrote (format 2 chunks, tests/fixtures/snapshots-v2.db).

A chunk reads back as the very view it was written from, renamed for a fork
exactly as the format 2 path renames; a chunk written against other views, of
another shape or damaged is a miss (``StaleChunk``), and ``at(seq)`` then still
equals a replay.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore
from projections import snapshot_codec, timetravel
from projections import views as v
from projections.json import converter
from projections.snapshot_codec import StaleChunk, decode_chunk, encode_chunk, is_chunk
from projections.timetravel import (
    INDEX_NAME,
    at,
    decode_index,
    latest_snapshot,
    message_snapshot_name,
    write_snapshots,
)
from projections.withparts import WithPartsProjection, _rename_session, decode_message

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots-v2.db"
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def states(seed: int, events: int) -> tuple[MemoryStore, Session, list[list[v.WithParts]]]:
    store = MemoryStore()
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=seed).run(events)
    proj = WithPartsProjection(session.id)
    out: list[list[v.WithParts]] = [[]]
    for e in store.read(session.id):
        proj.apply(e)
        out.append(proj.messages())
    return store, session, out


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(30, 400), data=st.data())
def test_a_chunk_reads_back_as_its_message_renamed_like_format_2(
        seed: int, events: int, data: st.DataObject) -> None:
    _, _, history = states(seed, events)
    for seq in sorted(set(data.draw(st.lists(st.integers(0, len(history) - 1), max_size=8)))):
        for m in history[seq]:
            chunk = encode_chunk(m)
            assert is_chunk(chunk)
            back = decode_chunk(chunk)
            assert back == m
            assert converter.unstructure(back) == converter.unstructure(m)
            # A fork's read: the same renaming as format 2's, field for field.
            renamed = decode_chunk(chunk, "fork-id")
            old = converter.structure(
                _rename_session(converter.unstructure(m, v.WithParts), "fork-id"), v.WithParts)
            assert renamed == old


@SETTINGS
@given(seed=st.integers(0, 10**6), cut=st.integers(0, 10**6), flip=st.integers(1, 255))
def test_a_damaged_chunk_is_stale_or_some_well_formed_message(
        seed: int, cut: int, flip: int) -> None:
    _, _, history = states(seed, 120)
    chunk = encode_chunk(history[-1][-1])
    at_byte = cut % len(chunk)
    for damaged in (chunk[:at_byte],
                    chunk[:at_byte] + bytes([chunk[at_byte] ^ flip]) + chunk[at_byte + 1:]):
        try:
            back = decode_chunk(damaged)
        except StaleChunk:
            continue
        assert isinstance(back, v.WithParts)  # (the index's digest catches the rest)


def test_other_views_or_another_shape_are_stale() -> None:
    _, _, history = states(1, 80)
    m = history[-1][0]
    body = msgspec.msgpack.decode(encode_chunk(m))[1]
    with pytest.raises(StaleChunk, match="other views"):
        decode_chunk(msgspec.msgpack.encode([b"12345678", body]))
    with pytest.raises(StaleChunk, match="another shape"):
        decode_chunk(msgspec.msgpack.encode([snapshot_codec.FINGERPRINT, [body[0]]]))
    with pytest.raises(StaleChunk):
        decode_chunk(msgspec.msgpack.encode([snapshot_codec.FINGERPRINT, "text"]))
    with pytest.raises(StaleChunk):
        decode_chunk(b"\x92\xc1")


def test_stale_chunks_cost_a_replay_never_a_state(monkeypatch: pytest.MonkeyPatch) -> None:
    store, session, history = states(2, 400)
    write_snapshots(store, session.id, every=25)
    # Today's chunks as a later release would see them: written against other views.
    monkeypatch.setattr(snapshot_codec, "FINGERPRINT", b"\x00" * 8)
    for seq in range(0, len(history), 7):
        assert at(store, session.id, seq).messages() == history[seq]


def test_stale_chunks_cost_one_replay_not_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the views change shape every stored chunk is stale: a restored state
    rebuilds them all from one replay to its seq (a replay per message was quadratic:
    minutes for ``show --at`` in a 1M-event session)."""
    store, session, history = states(3, 600)
    write_snapshots(store, session.id, every=25)
    monkeypatch.setattr(snapshot_codec, "FINGERPRINT", b"\x00" * 8)
    replays: list[int | None] = []
    real_at = timetravel.at

    def counting_at(*args: Any, **kwargs: Any) -> WithPartsProjection:
        if kwargs.get("use_snapshots") is False:
            replays.append(args[2] if len(args) > 2 else None)
        return real_at(*args, **kwargs)

    monkeypatch.setattr(timetravel, "at", counting_at)
    seq = len(history) - 1
    restored = timetravel.latest_snapshot(store, session.id, seq)
    assert restored is not None
    assert len(restored.messages()) > 2
    assert restored.messages() == history[restored.seq]
    assert replays == [restored.seq]


def _open_fixture(tmp_path: Path) -> tuple[SQLiteStore, list[str]]:
    path = tmp_path / "snapshots-v2.db"
    shutil.copyfile(FIXTURE, path)
    store = SQLiteStore(str(path))
    return store, [s.id for s in store.sessions()]


def test_the_previous_release_s_snapshots_still_answer_at(tmp_path: Path) -> None:
    store, sids = _open_fixture(tmp_path)
    assert len(sids) == 2  # a session and a fork of it
    for sid in sids:
        replayed = WithPartsProjection(sid)
        for e in store.read(sid):
            replayed.apply(e)
            got = at(store, sid, e.seq)
            assert got.seq == e.seq
            assert got.messages() == replayed.messages(), e.seq
        # The records are the previous release's: version 2 indexes over map chunks,
        # each read as it is (a chunk rebuilt by replay would hide a format break).
        found = store.latest_snapshot(sid, INDEX_NAME, store.version(sid))
        assert found is not None
        index = decode_index(found[1])
        assert index is not None
        restored = latest_snapshot(store, sid, found[0])
        assert restored is not None
        want = {m.info.id: m for m in at(store, sid, found[0], use_snapshots=False).messages()}
        owner = sid if index.session == sid else index.session
        for mid, version, _ in index.messages:
            chunk = store.latest_snapshot(owner, message_snapshot_name(mid), version)
            assert chunk is not None
            data = timetravel._unpack(chunk[1])
            assert not is_chunk(data)
            if version == found[0]:
                old = decode_message(data, sid)
                back = converter.structure(old, v.WithParts)
                expected = want[mid]
                if timetravel._lacks_raw(old):  # at() replays these (issue 24: ToolPart.raw)
                    expected = attrs.evolve(expected, parts=[
                        attrs.evolve(p, raw=None) if isinstance(p, v.ToolPart)
                        and not isinstance(p.state, v.ToolStatePending) else p
                        for p in expected.parts])
                assert back == expected
    store.close()


def test_today_s_writer_continues_the_previous_release_s_records(tmp_path: Path) -> None:
    """New format 3 chunks and deltas over old full indexes: at() still equals a replay."""
    store, sids = _open_fixture(tmp_path)
    for sid in sids:
        write_snapshots(store, sid, every=33)
    with sqlite3.connect(tmp_path / "snapshots-v2.db") as db:
        bodies = [bytes(b) for (b,) in db.execute(
            "SELECT body FROM snapshots WHERE name LIKE ?",
            (message_snapshot_name("%"),))]  # (not the previews beside the chunks)
    db.close()
    kinds = {is_chunk(timetravel._unpack(b)) for b in bodies}
    assert kinds == {True, False}  # both formats side by side
    for sid in sids:
        replayed = WithPartsProjection(sid)
        for e in store.read(sid):
            replayed.apply(e)
            assert at(store, sid, e.seq).messages() == replayed.messages(), e.seq
    store.close()
