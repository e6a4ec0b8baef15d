"""Previewed snapshot chunks: ``convlog show`` prints a restored message from the
preview stored beside its chunk (projections.text.render_state), never decoding it.

What it prints equals the rendering of a replay at every seq, for a session and a
fork of it; a damaged, truncated or foreign-rendered preview is a miss (the message
is built and rendered); chunks of the release before (format 3 without a preview,
tests/fixtures/snapshots-v3.db) still read, and show still equals a replay on them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workload import START_MS, Workload
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore
from engine.store.base import Store
from projections import snapshot_codec, text, timetravel
from projections.text import render_messages, render_state
from projections.timetravel import at, write_snapshots
from projections.withparts import WithPartsProjection

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots-v3.db"
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _replayed_text(store: Store, sid: str, seq: int) -> str:
    return render_messages(at(store, sid, seq, use_snapshots=False).messages())


class _Decodes:
    """Counts the chunks decoded (a preview printed decodes none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = snapshot_codec.decode_chunk

        def counting(data: bytes, session_id: str | None = None) -> Any:
            self.count += 1
            return real(data, session_id)

        monkeypatch.setattr(timetravel, "decode_chunk", counting)


def _session_and_fork(seed: int, events: int) -> tuple[MemoryStore, str, str]:
    store = MemoryStore()
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=seed).run(events)
    fork = session.fork(at=events // 2)
    more = Workload(fork, seed=seed + 1)
    more._call = 10**6  # provider call ids name one call per session
    more.run(fork.version + events // 3)
    return store, session.id, fork.id


@SETTINGS
@given(seed=st.integers(0, 10**6), events=st.integers(40, 300), every=st.integers(7, 60),
       data=st.data())
def test_show_from_previews_equals_the_render_of_a_replay(
        seed: int, events: int, every: int, data: st.DataObject) -> None:
    store, sid, fork = _session_and_fork(seed, events)
    write_snapshots(store, sid, every=every)
    if data.draw(st.booleans()):
        write_snapshots(store, fork, every=every + 3)
    for owner in (sid, fork):
        last = store.version(owner)
        seqs = [*data.draw(st.lists(st.integers(0, last), max_size=6)), last]
        for seq in seqs:
            assert render_state(at(store, owner, seq)) == _replayed_text(store, owner, seq)


def test_a_restored_state_prints_its_messages_without_decoding_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, sid, fork = _session_and_fork(5, 3000)
    write_snapshots(store, sid, every=500)
    decodes = _Decodes(monkeypatch)
    shown = render_state(at(store, sid, 2500))
    assert shown == _replayed_text(store, sid, 2500)
    assert shown.count("\n") > 40
    assert decodes.count == 0
    # A fork restores its parent's chunks (renamed): their previews print as well.
    assert render_state(at(store, fork, 1500)) == _replayed_text(store, fork, 1500)
    assert decodes.count == 0
    # Past the snapshot, only the messages the tail touches are fetched and decoded.
    fetched: list[int] = []
    real = store.snapshots_at

    def counting(owner: str, names: list[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        fetched.append(sum(".msg/" in n for n, _ in names))
        return real(owner, names)

    monkeypatch.setattr(store, "snapshots_at", counting)
    render_state(at(store, sid, 2520))
    assert 0 < decodes.count < 5
    assert sum(fetched) == 0  # (a message the tail touched loads alone)


def _rows(path: Path, like: str) -> list[tuple[int, str, int, bytes]]:
    with sqlite3.connect(path) as db:
        rows = [(s, n, q, bytes(b)) for s, n, q, b in db.execute(
            "SELECT sid, name, seq, body FROM snapshots WHERE name LIKE ?", (like,))]
    db.close()
    return rows


def _write_rows(path: Path, rows: list[tuple[int, str, int, bytes]]) -> None:
    with sqlite3.connect(path) as db:
        db.executemany("UPDATE snapshots SET body = ? WHERE sid = ? AND name = ? "
                       "AND seq = ?", [(b, s, n, q) for s, n, q, b in rows])
    db.close()


PREVIEWS = "%.preview/%"


def _snapshotted(path: Path, *, seed: int) -> Session:
    """A 1,500-event session at ``path`` with snapshots every 300 events, closed."""
    store = SQLiteStore(str(path), synchronous="OFF", durability="batched")
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=seed).run(1500)
    store.flush()
    write_snapshots(store, session.id, every=300)
    store.close()
    return session


@pytest.mark.parametrize("damage", ["flip", "cut", "grown", "head", "swap"])
def test_a_damaged_preview_is_a_miss_and_show_still_equals_a_replay(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.db"
    session = _snapshotted(path, seed=9)
    rows = _rows(path, PREVIEWS)
    assert len(rows) > 10
    at_ = timetravel._PREVIEW_AT
    damaged = []
    for s, n, q, b in rows:
        if damage == "flip":  # in the text: its digest no longer matches
            bad = b[:-1] + bytes([b[-1] ^ 0x55])
        elif damage == "cut":
            bad = b[:max(at_, len(b) - 3)]
        elif damage == "grown":
            bad = b + b"more"
        elif damage == "head":
            bad = b"\xc1\x03" + b[2:]
        else:  # another message's whole record
            bad = next(o for _, m, _, o in rows if m != n)
        assert timetravel._preview(bad, text.PREVIEW_FINGERPRINT, n.split("/", 1)[1], q) is None
        assert timetravel._preview(b, text.PREVIEW_FINGERPRINT, n.split("/", 1)[1], q)
        damaged.append((s, n, q, bad))
    _write_rows(path, damaged)
    store = SQLiteStore(str(path))
    for seq in (300, 600, 750, 1500):
        assert render_state(at(store, session.id, seq)) == _replayed_text(store, session.id, seq)
    store.close()


def test_a_chunk_whose_preview_is_missing_is_built(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session = _snapshotted(path, seed=10)
    rows = _rows(path, PREVIEWS)
    with sqlite3.connect(path) as db:
        db.executemany("DELETE FROM snapshots WHERE sid = ? AND name = ? AND seq = ?",
                       [(s, n, q) for s, n, q, _ in rows[::2]])
    db.close()
    store = SQLiteStore(str(path))
    for seq in (600, 1200, 1300):
        assert render_state(at(store, session.id, seq)) == _replayed_text(store, session.id, seq)
    store.close()


def test_a_preview_by_another_renderer_is_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    store, sid, _ = _session_and_fork(6, 3000)
    write_snapshots(store, sid, every=500)
    decodes = _Decodes(monkeypatch)
    # As a later release whose rendering changed would see today's previews.
    monkeypatch.setattr(text, "PREVIEW_FINGERPRINT", b"\x00" * 8)
    assert render_state(at(store, sid, 2500)) == _replayed_text(store, sid, 2500)
    assert decodes.count > 10


def test_views_of_another_shape_are_stale_with_their_previews(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A later release whose views changed reads neither today's chunks nor previews:
    the preview's fingerprint covers the views' (as the chunk's does)."""
    store, sid, _ = _session_and_fork(7, 300)
    write_snapshots(store, sid, every=60)
    monkeypatch.setattr(snapshot_codec, "FINGERPRINT", b"\x00" * 8)
    assert text._fingerprint() != text.PREVIEW_FINGERPRINT
    monkeypatch.setattr(text, "PREVIEW_FINGERPRINT", text._fingerprint())
    assert render_state(at(store, sid, 240)) == _replayed_text(store, sid, 240)


def test_the_renderer_s_fingerprint_is_the_same_in_every_process() -> None:
    """It is stored: a string hash seed (a frozenset constant's order) must not move it."""
    code = "from projections.text import PREVIEW_FINGERPRINT as F; print(F.hex())"
    seen = set()
    for seed in ("1", "2", "3"):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed})
        seen.add(out.stdout.strip())
    assert seen == {text.PREVIEW_FINGERPRINT.hex()}


def test_the_renderer_s_fingerprint_follows_its_code() -> None:
    def digest(fn: Any) -> bytes:
        h = hashlib.blake2b(digest_size=8)
        text._code_digest(fn.__code__, h)
        return h.digest()

    def a(x: str) -> str:
        return f"tool {x}"

    def b(x: str) -> str:
        return f"tool  {x}"

    def c(x: str) -> str:
        return x.upper()

    assert len({digest(a), digest(b), digest(c)}) == 3


def test_the_release_before_s_chunks_still_show(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "snapshots-v3.db"
    shutil.copyfile(FIXTURE, path)
    assert _rows(path, "%.msg/%")
    assert not _rows(path, PREVIEWS)  # the release before wrote no previews
    store = SQLiteStore(str(path))
    sids = [s.id for s in store.sessions()]
    assert len(sids) == 2  # a session and a fork of it
    decodes = _Decodes(monkeypatch)
    for sid in sids:
        replayed = WithPartsProjection(sid)
        for e in store.read(sid):
            replayed.apply(e)
            if e.seq % 3 and e.seq != store.version(sid):
                continue
            want = replayed.messages()
            assert render_state(at(store, sid, e.seq)) == render_messages(want), e.seq
            assert at(store, sid, e.seq).messages() == want, e.seq
    assert decodes.count > 100  # the old chunks were read, not replayed around
    # Today's writer adds previewed chunks beside them; both read.
    for sid in sids:
        write_snapshots(store, sid, every=41)
        for seq in range(0, store.version(sid) + 1, 5):
            assert render_state(at(store, sid, seq)) == _replayed_text(store, sid, seq)
    store.close()
