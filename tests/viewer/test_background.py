"""A long session's first state does not wait for its Timeline (issue 30, target 3).

The Timeline of a 1M-event session takes seconds to fold; the first state comes from the
store's stored snapshots while it is built in a thread, and is the same state.
"""

from __future__ import annotations

import threading

import pytest

from engine.session import Session
from engine.store.base import Store
from projections.serve import state as st
from projections.serve.state import Viewer
from projections.timetravel import at, write_snapshots


def test_the_first_state_comes_before_the_timeline(store: Store, session: Session,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        session.user_message(f"message {i}")
    write_snapshots(store, session.id, every=10)
    release = threading.Event()
    built = st._Built.__init__

    def slow(self: st._Built, *args: object, **kw: object) -> None:
        assert release.wait(20)
        built(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(st, "BUILD_INLINE", 0)  # every session is "long"
    monkeypatch.setattr(st._Built, "__init__", slow)
    viewer = Viewer(store)
    last = store.version(session.id)
    for seq in (last, 17, 0, 42):
        got = viewer.state(session.id, seq, start=0, count=64)  # while the build waits
        assert got["messages"] == at(store, session.id, seq, use_snapshots=False).to_json()
        assert got["marks"] is None
    assert viewer._cached(session.id).timeline is None
    release.set()
    assert viewer.wait_built(session.id, 20)
    starts = [e.seq for e in store.read(session.id) if type(e).__name__ == "MessageStarted"]
    again = viewer.state(session.id, 17, start=0, count=64)
    assert again["marks"] == starts
    assert again["messages"] == at(store, session.id, 17, use_snapshots=False).to_json()
    # The store's snapshots answer fast: the marks were gathered, no Timeline folded.
    assert viewer._cached(session.id).timeline is None
    assert viewer._cached(session.id).marks is not None


def test_a_failed_build_leaves_the_stored_snapshots_answering(
        store: Store, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(5):
        session.user_message(f"message {i}")

    def broken(self: st._Built, *args: object) -> None:
        raise RuntimeError("no memory for a Timeline")

    monkeypatch.setattr(st, "BUILD_INLINE", 0)
    monkeypatch.setattr(st._Built, "__init__", broken)
    viewer = Viewer(store)
    assert viewer.wait_built(session.id, 20)  # done, though it failed
    got = viewer.state(session.id, 7, start=0, count=64)
    assert got["messages"] == at(store, session.id, 7, use_snapshots=False).to_json()


def test_a_long_session_whose_snapshots_are_slow_gets_its_timeline(
        store: Store, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored snapshots that do not answer within the probe's budget (none, sparse, or
    written against other views): the Timeline is folded, and states come from it."""
    for i in range(30):
        session.user_message(f"message {i}")
    monkeypatch.setattr(st, "BUILD_INLINE", 0)
    monkeypatch.setattr(st, "SNAPSHOT_PROBE", -1.0)  # no probe is fast enough
    viewer = Viewer(store)
    viewer.state(session.id, 5)
    assert viewer.wait_built(session.id, 20)
    assert viewer._cached(session.id).timeline is not None
    for seq in (0, 17, store.version(session.id)):
        got = viewer.state(session.id, seq, start=0, count=64)
        assert got["messages"] == at(store, session.id, seq, use_snapshots=False).to_json()
