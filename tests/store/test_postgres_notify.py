"""PostgreSQL subscribers: NOTIFY wakes them, and a missed notification loses nothing.

The fallback re-read (``poll``) is set far beyond the tests' deadlines where a
test asserts a wakeup, so only a notification can deliver the event in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import events as ev
from engine.store import open_store
from engine.store.base import Record
from engine.store.pg_notify import Announcement, Listener, parse, wakes
from engine.store.postgres import PostgresStore, connect

SID_A = "0190a000-0000-7000-8000-00000000a001"
SID_B = "0190a000-0000-7000-8000-00000000b001"


def _text(e: object) -> str:
    assert isinstance(e, ev.TranscriptNoted)
    return e.text

def _note(i: int, who: str = "w") -> ev.TranscriptNoted:
    return ev.TranscriptNoted(id=f"0190a000-0000-7000-9000-{who[:1]}{i:011d}", time=1,
                              text=f"{who}-{i}")


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    store.create_session(SID_A, created=0)
    store.create_session(SID_B, created=0)
    yield store
    store.close()


class Follower:
    """A subscription drained on a thread, with what it received and when."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        self.store = open_store(url)
        self.got: list[Record] = []
        self.arrived = threading.Event()
        self.want = 0
        self._stop = threading.Event()
        self.kwargs = kwargs
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for rec in self.store.subscribe(stop=self._stop.is_set, **self.kwargs):
            self.got.append(rec)
            if len(self.got) >= self.want:
                self.arrived.set()

    def expect(self, n: int) -> None:
        self.want = n
        self.arrived.clear()
        if len(self.got) >= n:
            self.arrived.set()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=30)
        self.store.close()


def test_a_notification_wakes_a_subscriber_long_before_the_fallback(
        pg: PostgresStore, pg_url: str) -> None:
    follower = Follower(pg_url, poll=3600.0)
    follower.expect(1)
    follower.thread.start()
    try:
        time.sleep(0.3)  # the subscriber is waiting on its listener now
        for i in range(3):
            follower.expect(i + 1)
            pg.append(SID_A, [_note(i)])
            assert follower.arrived.wait(20), "no wakeup: the NOTIFY did not reach it"
        assert [r.position for r in follower.got] == [1, 2, 3]
        assert [_text(r.event) for r in follower.got
                ] == ["w-0", "w-1", "w-2"]
    finally:
        follower.expect(10**9)
        pg.append(SID_B, [_note(99, "b")])  # wakes it so that it sees stop()
        follower.close()


def test_a_session_subscriber_is_woken_by_its_session_only(pg: PostgresStore,
                                                             pg_url: str) -> None:
    follower = Follower(pg_url, session_id=SID_A, poll=3600.0)
    follower.expect(1)
    follower.thread.start()
    try:
        time.sleep(0.3)
        for i in range(5):
            pg.append(SID_B, [_note(i, "b")])
        pg.append(SID_A, [_note(0, "a")])
        assert follower.arrived.wait(20)
        assert [(r.position, r.event.session_id) for r in follower.got] == [(6, SID_A)]
    finally:
        follower.expect(10**9)
        pg.append(SID_A, [_note(1, "a")])
        follower.close()


def test_missed_notifications_lose_nothing(pg: PostgresStore, pg_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every notification is swallowed before the subscriber sees it: the fallback
    re-read by position still delivers every event, once, in order."""
    real = psycopg.Connection.notifies

    def deaf(self: psycopg.Connection[Any], **kwargs: Any) -> Iterator[Any]:
        for _ in real(self, **kwargs):
            pass  # received and dropped
        return iter(())

    monkeypatch.setattr(psycopg.Connection, "notifies", deaf)
    writer = threading.Thread(target=lambda: [
        pg.append(SID_A if i % 2 else SID_B, [_note(i)]) for i in range(40)])
    got: list[Record] = []
    writer.start()
    for rec in open_store(pg_url).subscribe(idle_timeout=1.5, poll=0.05):
        got.append(rec)
        if len(got) == 40:
            break
    writer.join()
    assert [r.position for r in got] == list(range(1, 41))
    assert sorted(_text(r.event) for r in got) == sorted(
        f"w-{i}" for i in range(40))


def test_a_dropped_listener_is_reopened_and_nothing_is_lost(pg: PostgresStore) -> None:
    listener = Listener(lambda: connect(pg.dsn))
    try:
        first = listener._conn
        assert first is not None
        with connect(pg.dsn) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first.info.backend_pid,))
        listener.wait(0, None, 0.5)  # the dead connection raises inside: replaced
        assert listener.reopened == 1
        assert listener._conn is not None
        assert listener._conn is not first
        pg.append(SID_A, [_note(0)])
        start = time.monotonic()
        listener.wait(0, None, 30.0)
        assert time.monotonic() - start < 20  # the new connection listens
    finally:
        listener.close()


def test_the_payload_names_the_committed_range_and_session(pg: PostgresStore) -> None:
    with connect(pg.dsn) as conn:
        conn.execute("LISTEN convlog")
        pg.append(SID_B, [_note(0), _note(1), _note(2)])
        notes = list(conn.notifies(timeout=10, stop_after=1))
    assert [parse(n.payload) for n in notes] == [Announcement(1, 3, pg.recorder._sid(SID_B))]


@given(first=st.integers(1, 100), size=st.integers(0, 5), after=st.integers(0, 110),
       sid=st.integers(1, 3), mine=st.none() | st.integers(1, 3),
       old=st.booleans())
def test_a_subscriber_sleeps_only_through_what_it_does_not_need(  # noqa: PLR0917
        first: int, size: int, after: int, sid: int, mine: int | None,
        old: bool) -> None:
    """Whatever the payload (old or new form), a commit holding a position the
    subscriber has not read, of a session it follows, always wakes it."""
    last = first + size
    payload = str(last) if old else f"{first} {last} {sid}"
    note = parse(payload)
    needed = last > after and (mine is None or old or sid == mine)
    assert wakes(note, after, mine) == needed
    assert wakes(parse("not ours"), after, mine)  # unreadable: read to be safe
