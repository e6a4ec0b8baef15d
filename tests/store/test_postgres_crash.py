"""PostgreSQL: the server crashes while durable appends run.

An append commits without waiting for its WAL flush (its events and their
placement) and ends in one commit that flushes (see ``_APPEND_SQL`` in
``engine/store/postgres.py``); a durable reader waits for that flush before it
returns rows. So after a crash and recovery, every append a ``sync`` store
acknowledged is there at the position it was given, every event a ``sync`` reader
returned is still there, and an append cut while it waited for the placement lock
is gone whole; the store verifies. Committed events without positions (left by a
writer of the release before, between its two calls) are placed by the next open.

The server runs with a WAL writer that sleeps 10 s: a commit that does not flush
itself stays in the server's buffers, where the crash (an immediate shutdown)
loses it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from engine import events as ev
from engine.errors import StoreError
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from engine.store.verify import verify
from tests.support.pgserver import IN_CI, PgServer, find_bin

psycopg = pytest.importorskip("psycopg") if not IN_CI else __import__("psycopg")


@pytest.fixture
def crashable() -> Iterator[PgServer]:
    bindir = find_bin()
    if bindir is None:
        if IN_CI:
            pytest.fail("CI=true but PostgreSQL server binaries were not found")
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found")
    server = PgServer(bindir, settings={"wal_writer_delay": "10s"}).start()
    try:
        yield server
    finally:
        server.stop()


def _sid(w: int) -> str:
    return f"0190a000-0000-7000-8000-0000000d{w:04d}"


def _note(w: int, i: int) -> ev.TranscriptNoted:
    return ev.TranscriptNoted(id=f"0190a000-0000-7000-9000-{w:04d}{i:08d}", time=1 + i,
                              text=f"w{w}-{i}")


def _staller(url: str, done: threading.Event) -> None:
    """Holds the placement lock now and then: appends that meet it go pending."""
    from engine.store.postgres import PLACE_LOCK  # noqa: PLC0415 - needs psycopg

    try:
        with psycopg.connect(url, autocommit=True) as db:
            for pause in itertools.cycle((0.0, 0.002, 0.0005)):
                if done.is_set():
                    return
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(%s), pg_sleep(%s)",
                               (PLACE_LOCK, pause))
    except psycopg.Error:
        return  # the server went away


def _recovered(server: PgServer) -> Store:
    server.restart()
    return open_store(server.url())


def test_acknowledged_sync_appends_survive_a_server_crash(crashable: PgServer) -> None:
    url = crashable.url()
    writers = 3
    setup = open_store(url)
    for w in range(writers):
        Session.create(setup, _sid(w)).create_conversation()
    setup.close()
    acked: dict[str, int] = {}  # event id -> the position its append returned
    done = threading.Event()

    def writer(w: int) -> None:
        store = open_store(url)
        for i in itertools.count():
            event = _note(w, i)
            try:
                got = store.append(_sid(w), [event])
            except StoreError:
                return  # the server went away mid-append: not acknowledged
            acked[event.id] = got.positions[0]

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    threads.append(threading.Thread(target=_staller, args=(url, done)))
    for t in threads:
        t.start()
    time.sleep(1.0)
    crashable.crash()
    done.set()
    for t in threads:
        t.join(timeout=30)
    assert len(acked) > 20  # both paths ran many times before the crash

    store = _recovered(crashable)
    placed = {r.event.id: r.position for r in store.read_all()}
    lost = [(i, p, placed.get(i)) for i, p in acked.items() if placed.get(i) != p]
    assert not lost, f"acknowledged appends lost or moved (id, given, now): {lost[:3]}"
    assert sorted(placed.values()) == list(range(1, len(placed) + 1))
    assert verify(store).ok


def test_what_a_sync_reader_returned_survives_a_server_crash(crashable: PgServer) -> None:
    """A batched writer's commits are not flushed; a durable reader that returns
    them has waited for their flush first."""
    url = crashable.url()
    writer = open_store(f"{url}?durability=batched")
    Session.create(writer, _sid(0)).create_conversation()
    for i in range(30):
        writer.append(_sid(0), [_note(0, i)])
    reader = open_store(url)
    seen = [(r.position, r.event.id) for r in reader.read_all()]
    assert len(seen) == 31
    crashable.crash()

    store = _recovered(crashable)
    got = [(r.position, r.event.id) for r in store.read_all()]
    assert got[:31] == seen


def test_an_append_waiting_for_the_placement_lock_when_the_server_crashes(
        crashable: PgServer) -> None:
    """The placement lock is held elsewhere, so the append waits inside its
    transaction, its events written; the server crashes then. The append is not
    acknowledged; after recovery its events are gone whole, the store verifies,
    and appending them again puts them at the next positions."""
    from engine.store.postgres import PLACE_LOCK  # noqa: PLC0415 - needs psycopg

    url = crashable.url()
    store = open_store(url)
    Session.create(store, _sid(0)).create_conversation()  # position 1
    store.append(_sid(0), [_note(0, 0)])
    holder = psycopg.connect(url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (PLACE_LOCK,))
    outcome: list[object] = []

    def cut() -> None:
        try:
            outcome.append(store.append(_sid(0), [_note(0, 1), _note(0, 2)]))
        except StoreError as exc:
            outcome.append(exc)

    t = threading.Thread(target=cut)
    t.start()
    with psycopg.connect(url, autocommit=True) as db:  # wait until it waits for the lock
        for _ in range(500):
            row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = "
                             "'advisory' AND query LIKE 'CALL convlog_append%%'").fetchone()
            if row is not None and row[0] == 1:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the append never waited for the placement lock")
    crashable.crash()
    t.join(timeout=30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], StoreError)
    holder.close()

    after = _recovered(crashable)
    assert [r.event.id for r in after.read_all()][1:] == [_note(0, 0).id]
    assert verify(after).ok
    got = after.append(_sid(0), [_note(0, 1), _note(0, 2)])
    assert list(got.positions) == [3, 4]
    assert [r.event.id for r in after.read_all()][1:] == [_note(0, i).id for i in range(3)]
    assert verify(after).ok


def test_an_older_clients_unplaced_append_is_placed_on_open(crashable: PgServer) -> None:
    """The release before committed a contended append with a pending row and
    placed it in a second call; a writer of that release killed (or a server crash)
    between the two leaves committed events without positions. The next open
    places them, before any later append's."""
    url = crashable.url()
    store = open_store(url)
    Session.create(store, _sid(0)).create_conversation()  # position 1
    store.append(_sid(0), [_note(0, 0), _note(0, 1)])  # positions 2, 3
    store.close()
    with psycopg.connect(url, autocommit=True) as db:  # as if never placed
        db.execute("DELETE FROM convlog_log WHERE position > 1")
        db.execute("UPDATE convlog_position SET last = 1")
        db.execute("INSERT INTO convlog_pending VALUES (7, nextval('convlog_pending_qid'), 0, "
                   "(SELECT sid FROM convlog_sessions), 2, 2)")

    after = open_store(url)
    assert [(r.position, r.event.id) for r in after.read_all()][1:] == [
        (2, _note(0, 0).id), (3, _note(0, 1).id)]
    assert list(after.append(_sid(0), [_note(0, 2)]).positions) == [4]
    assert verify(after).ok
