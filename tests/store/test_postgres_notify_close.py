"""Closing a PostgreSQL store ends the subscriptions running on it in other threads,
cleanly: no psycopg error escapes their thread, and a waiting one does not sleep on
until its fallback re-read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from engine import events as ev
from engine.store import open_store, pg_notify
from engine.store.base import Record
from engine.store.postgres import PostgresStore

SID = "0190a000-0000-7000-8000-00000000c001"


def _note(i: int) -> ev.TranscriptNoted:
    return ev.TranscriptNoted(id=f"0190a000-0000-7000-9000-c{i:011d}", time=1, text=f"n-{i}")


@pytest.fixture
def writer(pg_url: str) -> Iterator[PostgresStore]:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    store.create_session(SID, created=0)
    yield store
    store.close()


class Subscription:
    """A subscription drained on a thread; what it got and what ended it."""

    def __init__(self, store: PostgresStore) -> None:
        self.got: list[Record] = []
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(store,), daemon=True)
        self.thread.start()

    def _run(self, store: PostgresStore) -> None:
        try:
            for rec in store.subscribe(poll=3600.0):
                self.got.append(rec)
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended.set()


def test_closing_the_store_ends_a_waiting_subscription(writer: PostgresStore,
                                                        pg_url: str) -> None:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    writer.append(SID, [_note(0)])
    sub = Subscription(store)
    deadline = time.monotonic() + 20
    while not sub.got and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r.position for r in sub.got] == [1]
    time.sleep(0.3)  # waiting on its listener now (the fallback is an hour away)
    store.close()
    assert sub.ended.wait(5), "the subscription slept on after its store closed"
    assert sub.error is None, f"the subscription's thread raised {sub.error!r}"


def test_a_commit_after_the_close_wakes_no_read_on_the_closed_connection(
        writer: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The close lands while the subscriber waits; the next commit's NOTIFY wakes it
    before it looks at the store again: its read on the closed connection ends it."""
    monkeypatch.setattr(pg_notify, "CLOSED_CHECK", 3600.0,  # only the NOTIFY wakes it
                        raising=False)
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    sub = Subscription(store)
    time.sleep(0.5)
    store.close()
    writer.append(SID, [_note(1)])
    assert sub.ended.wait(20), "the subscription never ended"
    assert sub.error is None, f"the subscription's thread raised {sub.error!r}"
