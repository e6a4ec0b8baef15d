"""The store contract, run against every backend (memory, SQLite, JSONL, PostgreSQL).

The first part is the original contract (sessions, reads, forks, snapshots) on the
shared ``store`` fixture plus every backend through ``any_url``; then the
expected-version x event-id matrix, global positions, subscriptions, durability
modes and persistence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from engine import events as ev
from engine.errors import (
    BadBatch,
    ConcurrencyError,
    DuplicateEventId,
    IllegalTransition,
    PartialDuplicate,
    SessionExists,
    StoreError,
    UnknownSession,
)
from engine.events import Event
from engine.session import Session
from engine.store import (
    ANY,
    NO_STREAM,
    STREAM_EXISTS,
    JSONLStore,
    MemoryStore,
    SQLiteStore,
    Store,
    open_store,
    retry,
)

ROOT = "0190a000-0000-7000-8000-00000000a000"
CHILD = "0190a000-0000-7000-8000-00000000b000"
GRANDCHILD = "0190a000-0000-7000-8000-00000000c000"
MID = "0190a000-0000-7000-8000-00000000d000"


@pytest.fixture
def store(any_url: str) -> Iterator[Store]:
    """Overrides conftest's ``store``: this module runs on all four backends."""
    s = open_store(any_url)
    try:
        yield s
    finally:
        s.close()


def event(session_id: str, seq: int, time: int | None = None) -> Event:
    """A stored event; stores do not judge transitions, so one type is enough."""
    return ev.TextDelta(
        id=f"0190a000-0000-7000-8000-{session_id[-4:]}{seq:08x}", session_id=session_id,
        seq=seq, time=seq * 10 if time is None else time, actor="assistant",
        message_id=MID, part_id="prt_p", delta=f"{session_id[-4:-3]}{seq}",
    )


def fill(store: Store, session_id: str, first: int, last: int) -> list[Event]:
    events = [event(session_id, s) for s in range(first, last + 1)]
    store.append(session_id, events, first - 1)
    return events


def seqs(store: Store, session_id: str, first: int = 1, last: int | None = None) -> list[int]:
    return [e.seq for e in store.read(session_id, first, last)]


# --------------------------------------------------------------------------- sessions


def test_create_and_list_sessions(store: Store) -> None:
    assert store.sessions() == []
    a = store.create_session(CHILD, created=200)
    b = store.create_session(ROOT, created=100)
    assert (a.id, a.created, a.parent, a.fork_seq) == (CHILD, 200, None, None)
    assert [s.id for s in store.sessions()] == [ROOT, CHILD]  # by creation time
    assert store.session_info(ROOT) == b
    assert store.version(ROOT) == 0
    assert list(store.read(ROOT)) == []


def test_session_exists(store: Store) -> None:
    store.create_session(ROOT, created=1)
    with pytest.raises(SessionExists) as info:
        store.create_session(ROOT, created=2)
    assert info.value.session_id == ROOT
    assert store.session_info(ROOT).created == 1
    assert len(store.sessions()) == 1


def test_unknown_session(store: Store) -> None:
    with pytest.raises(UnknownSession) as info:
        store.session_info(ROOT)
    assert info.value.session_id == ROOT
    with pytest.raises(UnknownSession):
        store.version(ROOT)
    with pytest.raises(UnknownSession):
        list(store.read(ROOT))
    with pytest.raises(UnknownSession):
        store.append(ROOT, [event(ROOT, 1)], 0)
    with pytest.raises(UnknownSession):
        Session.open(store, ROOT)


# --------------------------------------------------------------------------- appending


def test_append_with_expected_version(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 3)
    with pytest.raises(ConcurrencyError) as info:
        store.append(ROOT, [event(ROOT, 3 + 100)], 2)  # a new id: a conflicting writer
    err = info.value
    assert (err.session_id, err.expected, err.actual) == (ROOT, 2, 3)
    assert "expected version 2" in str(err)
    with pytest.raises(ConcurrencyError):
        store.append(ROOT, [event(ROOT, 5)], 4)
    assert store.version(ROOT) == 3
    store.append(ROOT, [event(ROOT, 4)], 3)
    assert seqs(store, ROOT) == [1, 2, 3, 4]


def test_seqs_are_gapless(store: Store) -> None:
    store.create_session(ROOT, created=1)
    with pytest.raises(BadBatch, match="seq"):
        store.append(ROOT, [event(ROOT, 1), event(ROOT, 3)], 0)
    with pytest.raises(ValueError, match="seq"):
        store.append(ROOT, [event(ROOT, 2)], 0)
    with pytest.raises(ValueError, match="session"):
        store.append(ROOT, [event(CHILD, 1)], 0)
    assert store.version(ROOT) == 0
    assert list(store.read(ROOT)) == []


def test_empty_append_is_allowed(store: Store) -> None:
    store.create_session(ROOT, created=1)
    store.append(ROOT, [], 0)
    assert store.version(ROOT) == 0


def test_read_ranges(store: Store) -> None:
    store.create_session(ROOT, created=1)
    events = fill(store, ROOT, 1, 6)
    assert list(store.read(ROOT)) == events
    assert seqs(store, ROOT, 2, 4) == [2, 3, 4]
    assert seqs(store, ROOT, 5) == [5, 6]
    assert seqs(store, ROOT, 4, 4) == [4]
    assert seqs(store, ROOT, 5, 3) == []
    assert seqs(store, ROOT, 7) == []
    assert seqs(store, ROOT, 1, 100) == [1, 2, 3, 4, 5, 6]


def test_find_event_and_contains(store: Store) -> None:
    store.create_session(ROOT, created=1)
    store.create_session(CHILD, created=2)
    events = fill(store, ROOT, 1, 3)
    assert store.find_event(events[1].id) == (ROOT, 2)
    assert store.find_event("0190a000-0000-7000-8000-ffffffffffff") is None
    assert store.contains(ROOT, events[2].id) == 3
    assert store.contains(CHILD, events[2].id) is None


def test_seq_at_time(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 3)  # times 10, 20, 30
    assert [store.seq_at_time(ROOT, t) for t in (0, 9, 10, 19, 20, 30, 10**12)] == [
        0, 0, 1, 1, 2, 3, 3]


def test_snapshots(store: Store) -> None:
    store.create_session(ROOT, created=1)
    assert store.latest_snapshot(ROOT, "proj", 100) is None
    store.put_snapshot(ROOT, "proj", 10, b"ten")
    store.put_snapshot(ROOT, "proj", 5, b"five")
    store.put_snapshot(ROOT, "other", 7, b"seven")
    assert store.latest_snapshot(ROOT, "proj", 4) is None
    assert store.latest_snapshot(ROOT, "proj", 5) == (5, b"five")
    assert store.latest_snapshot(ROOT, "proj", 9) == (5, b"five")
    assert store.latest_snapshot(ROOT, "proj", 10**9) == (10, b"ten")
    assert store.latest_snapshot(ROOT, "other", 10**9) == (7, b"seven")
    store.put_snapshot(ROOT, "proj", 10, b"TEN")  # replaced, not duplicated
    assert store.latest_snapshot(ROOT, "proj", 10) == (10, b"TEN")


def test_snapshots_at_reads_exactly_the_pairs_asked(store: Store) -> None:
    """The one-read lookup a restore uses agrees with ``latest_snapshot`` pair by pair:
    a pair not stored at exactly that seq is absent, never the nearest one below, and
    lookups past one read's chunk of pairs are all answered."""
    store.create_session(ROOT, created=1)
    stored = {(f"m/{i % 7}", i): f"body {i}".encode() for i in range(0, 900, 2)}
    for (name, seq), body in stored.items():
        store.put_snapshot(ROOT, name, seq, body)
    wanted = [(f"m/{i % 7}", i) for i in range(900)] + [("absent", 4)]
    found = store.snapshots_at(ROOT, wanted)
    assert found == stored
    for name, seq in wanted[:60]:
        hit = store.latest_snapshot(ROOT, name, seq)
        assert found.get((name, seq)) == (hit[1] if hit and hit[0] == seq else None)
    assert store.snapshots_at(ROOT, []) == {}


# --------------------------------------------------------------------------- forks


def test_fork_reads_parent_prefix_then_own_events(store: Store) -> None:
    store.create_session(ROOT, created=1)
    parent = fill(store, ROOT, 1, 5)
    info = store.create_session(CHILD, created=2, parent=ROOT, fork_seq=3)
    assert (info.parent, info.fork_seq) == (ROOT, 3)
    assert store.version(CHILD) == 3
    assert list(store.read(CHILD)) == parent[:3]

    with pytest.raises(ConcurrencyError):
        store.append(CHILD, [event(CHILD, 1)], 0)
    own = fill(store, CHILD, 4, 5)
    assert store.version(CHILD) == 5
    assert list(store.read(CHILD)) == parent[:3] + own
    assert list(store.read(CHILD, 3, 4)) == [parent[2], own[0]]
    assert list(store.read(CHILD, 4)) == own

    # The parent goes on; the fork does not see it.
    fill(store, ROOT, 6, 7)
    assert store.version(ROOT) == 7
    assert list(store.read(CHILD)) == parent[:3] + own
    assert store.lineage(CHILD) == [(ROOT, 3), (CHILD, None)]
    assert store.contains(CHILD, parent[2].id) == 3
    assert store.contains(CHILD, parent[3].id) is None  # after the fork point
    assert store.contains(ROOT, own[0].id) is None


def test_fork_of_a_fork(store: Store) -> None:
    store.create_session(ROOT, created=1)
    parent = fill(store, ROOT, 1, 4)
    store.create_session(CHILD, created=2, parent=ROOT, fork_seq=2)
    child = fill(store, CHILD, 3, 5)
    store.create_session(GRANDCHILD, created=3, parent=CHILD, fork_seq=4)
    assert store.version(GRANDCHILD) == 4
    assert list(store.read(GRANDCHILD)) == parent[:2] + child[:2]
    grandchild = fill(store, GRANDCHILD, 5, 6)
    assert list(store.read(GRANDCHILD)) == parent[:2] + child[:2] + grandchild
    assert store.lineage(GRANDCHILD) == [(ROOT, 2), (CHILD, 4), (GRANDCHILD, None)]
    # Events of the child after the grandchild's fork point stay invisible.
    assert child[2] not in list(store.read(GRANDCHILD))
    assert store.seq_at_time(GRANDCHILD, 10**12) == 6
    assert store.seq_at_time(GRANDCHILD, 25) == 2  # parent times 10, 20; child's seq 3 at 30


def test_fork_at_zero(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 2)
    store.create_session(CHILD, created=2, parent=ROOT, fork_seq=0)
    assert store.version(CHILD) == 0
    assert list(store.read(CHILD)) == []
    assert seqs(store, CHILD) == []
    fill(store, CHILD, 1, 1)
    assert [e.session_id for e in store.read(CHILD)] == [CHILD]


def test_session_fork_shares_the_prefix(store: Store, session: Session) -> None:
    mid = session.start_message("assistant")
    tool = session.add_tool(mid, "c1", "bash")
    session.start_tool(tool)
    at = session.version
    session.complete_tool(tool, "done")
    session.complete_message(mid)

    fork = session.fork(at=at)
    assert store.session_info(fork.id).parent == session.id
    assert fork.version == at
    assert list(store.read(fork.id)) == list(store.read(session.id, 1, at))
    # The fork's lifecycle is the parent's as of ``at``: the tool is still running.
    with pytest.raises(IllegalTransition) as info:
        fork.complete_message(mid)
    assert info.value.current == "open"
    fork.fail_tool(tool, "cancelled in the fork", kind="cancelled")
    assert fork.version == at + 1
    assert session.version == at + 2  # the parent is untouched
    with pytest.raises(ValueError, match="fork point"):
        session.fork(at=session.version + 1)


# --------------------------------------------------------------------------- URLs


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), MemoryStore)
    sqlite = open_store(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(sqlite, SQLiteStore)
    sqlite.close()
    jsonl = open_store(f"jsonl:///{tmp_path}/j")
    assert isinstance(jsonl, JSONLStore)
    jsonl.close()
    with pytest.raises(StoreError, match="scheme"):
        open_store("mysql://localhost/db")
    with pytest.raises(StoreError, match="unknown option"):
        open_store(f"sqlite:///{tmp_path}/x.db?durabilty=sync")
    with pytest.raises(StoreError, match="durability"):
        open_store(f"sqlite:///{tmp_path}/x.db?durability=eventually")
    with pytest.raises(StoreError):
        open_store("sqlite:///")
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path}/missing/dir/x.db")


# --------------------------------------------------------------------------- SQLite only


def test_sqlite_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "persist.db"
    store = SQLiteStore(str(path))
    session = Session.create(store)
    mid = session.start_message("assistant")
    tool = session.add_tool(mid, "c1", "bash")
    session.start_tool(tool, title="ls")
    store.put_snapshot(session.id, "proj", 2, b"snap")
    events = list(store.read(session.id))
    sid = session.id
    store.close()

    reopened = SQLiteStore(str(path))
    try:
        assert [s.id for s in reopened.sessions()] == [sid]
        assert list(reopened.read(sid)) == events
        assert reopened.version(sid) == 3
        assert reopened.latest_snapshot(sid, "proj", 10) == (2, b"snap")
        again = Session.open(reopened, sid)
        assert again.version == 3
        # The rebuilt lifecycle still knows the tool is running.
        with pytest.raises(IllegalTransition) as info:
            again.start_tool(tool)
        assert info.value.current == "running"
        with pytest.raises(IllegalTransition) as info:
            again.complete_message(mid)
        assert tool.part_id in info.value.reason
        assert again.complete_tool(tool, "files") == 4
        assert again.complete_message(mid) == 5
        assert [e.seq for e in reopened.read(sid)] == [1, 2, 3, 4, 5]
    finally:
        reopened.close()


def test_two_sqlite_writers_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    first, second = SQLiteStore(path), SQLiteStore(path)
    try:
        a = Session.create(first)
        mid = a.start_message("assistant")
        b = Session.open(second, a.id)
        assert b.version == a.version == 1

        a.add_text(mid, "from a")
        with pytest.raises(ConcurrencyError) as info:
            b.add_text(mid, "from b")
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert b.version == 1  # rolled back
        assert [e.seq for e in second.read(a.id)] == [1, 2]

        # The check also holds inside the write transaction (a writer that raced past
        # the first check still loses).
        stale = event(a.id, 2)
        with pytest.raises(ConcurrencyError):
            second._record(a.id, [stale], 1)
        assert second.version(a.id) == 2

        # Reopened, the second writer catches up and wins the next append.
        b = Session.open(second, a.id)
        b.add_text(mid, "from b")
        assert [e.seq for e in first.read(a.id)] == [1, 2, 3]
    finally:
        first.close()
        second.close()


# --------------------------------------------------------------------------- expected versions


def test_stream_states(store: Store) -> None:
    store.create_session(ROOT, created=1)
    with pytest.raises(ConcurrencyError) as info:
        store.append(ROOT, [event(ROOT, 1)], STREAM_EXISTS)
    assert (info.value.expected, info.value.actual) == ("stream_exists", 0)
    assert store.append(ROOT, [event(ROOT, 1)], NO_STREAM).seqs == (1,)
    with pytest.raises(ConcurrencyError) as info:
        store.append(ROOT, [event(ROOT, 2)], NO_STREAM)
    assert (info.value.expected, info.value.actual) == ("no_stream", 1)
    assert "expected version no_stream" in str(info.value)
    assert store.append(ROOT, [event(ROOT, 2)], STREAM_EXISTS).seqs == (2,)
    assert store.append(ROOT, [event(ROOT, 3)], ANY).seqs == (3,)
    assert store.append(ROOT, [event(ROOT, 4)]).seqs == (4,)  # ANY is the default
    assert seqs(store, ROOT) == [1, 2, 3, 4]


def test_store_assigns_seq_and_session(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 2)
    blank = msgspec.structs.replace(event(ROOT, 3), seq=0, session_id="")
    done = store.append(ROOT, [blank, msgspec.structs.replace(event(ROOT, 4), seq=0)])
    assert done.seqs == (3, 4)
    assert [(e.seq, e.session_id) for e in store.read(ROOT, 3)] == [(3, ROOT), (4, ROOT)]


def test_fork_stream_states(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 2)
    store.create_session(CHILD, created=2, parent=ROOT, fork_seq=2)
    with pytest.raises(ConcurrencyError):  # the fork already holds the shared prefix
        store.append(CHILD, [event(CHILD, 3)], NO_STREAM)
    assert store.append(CHILD, [event(CHILD, 3)], STREAM_EXISTS).seqs == (3,)


# --------------------------------------------------------------------------- idempotency matrix


def test_first_append_and_exact_retry(store: Store) -> None:
    store.create_session(ROOT, created=1)
    batch = [event(ROOT, 1), event(ROOT, 2)]
    first = store.append(ROOT, batch, 0)
    assert (first.seqs, first.retried, first.version) == ((1, 2), False, 2)
    again = store.append(ROOT, batch, 0)  # the same expected version: a retry, not a conflict
    assert (again.seqs, again.positions, again.retried) == (first.seqs, first.positions, True)
    assert store.append(ROOT, batch, ANY).positions == first.positions
    assert seqs(store, ROOT) == [1, 2]


def test_retry_after_other_appends_returns_the_originals(store: Store) -> None:
    store.create_session(ROOT, created=1)
    store.create_session(CHILD, created=2)
    batch = [event(ROOT, 1), event(ROOT, 2)]
    first = store.append(ROOT, batch, NO_STREAM)
    fill(store, ROOT, 3, 4)
    fill(store, CHILD, 1, 1)
    again = store.append(ROOT, batch, NO_STREAM)  # stale expectation, but the batch landed
    assert again.retried
    assert again.positions == first.positions
    assert again.seqs == (1, 2)
    assert store.version(ROOT) == 4


def test_conflicting_writer_and_partial_overlap(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 2)
    with pytest.raises(ConcurrencyError):  # new ids at a stale version: a real conflict
        store.append(ROOT, [event(ROOT, 102)], 1)
    with pytest.raises(PartialDuplicate) as info:  # half retry, half new: neither
        store.append(ROOT, [event(ROOT, 2), event(ROOT, 3)], 2)
    assert info.value.stored == (event(ROOT, 2).id,)
    assert info.value.new == (event(ROOT, 3).id,)
    assert "1 event(s) already stored" in str(info.value)
    with pytest.raises(DuplicateEventId, match="same batch"):
        store.append(ROOT, [event(ROOT, 3), event(ROOT, 3)], 2)
    assert store.version(ROOT) == 2


def test_id_of_another_session_is_a_duplicate(store: Store) -> None:
    store.create_session(ROOT, created=1)
    store.create_session(CHILD, created=2)
    taken = fill(store, ROOT, 1, 1)[0]
    stolen = msgspec.structs.replace(taken, session_id=CHILD)
    with pytest.raises(DuplicateEventId) as info:
        store.append(CHILD, [stolen], 0)
    assert f"session {ROOT} seq 1" in str(info.value)
    assert store.version(CHILD) == 0


# --------------------------------------------------------------------------- global positions


def test_global_positions_are_gapless_across_sessions(store: Store) -> None:
    store.create_session(ROOT, created=1)
    store.create_session(CHILD, created=2)
    a = store.append(ROOT, [event(ROOT, 1), event(ROOT, 2)], 0)
    b = store.append(CHILD, [event(CHILD, 1)], 0)
    c = store.append(ROOT, [event(ROOT, 3)], 2)
    assert a.positions + b.positions + c.positions == (1, 2, 3, 4)
    assert store.last_position() == 4
    every = list(store.read_all())
    assert [r.position for r in every] == [1, 2, 3, 4]
    assert [(r.event.session_id, r.event.seq) for r in every] == [
        (ROOT, 1), (ROOT, 2), (CHILD, 1), (ROOT, 3)]
    assert [r.position for r in store.read_all(2)] == [3, 4]
    assert [r.event.seq for r in store.read_all(session_id=ROOT)] == [1, 2, 3]
    assert [r.position for r in store.read_all(limit=2)] == [1, 2]
    with pytest.raises(ConcurrencyError):
        store.append(ROOT, [event(ROOT, 104)], 0)
    assert store.last_position() == 4  # a refused append uses no position


def test_forks_store_only_their_own_events(store: Store) -> None:
    store.create_session(ROOT, created=1)
    fill(store, ROOT, 1, 3)
    store.create_session(CHILD, created=2, parent=ROOT, fork_seq=2)
    fill(store, CHILD, 3, 3)
    assert [(r.event.session_id, r.event.seq) for r in store.read_all()] == [
        (ROOT, 1), (ROOT, 2), (ROOT, 3), (CHILD, 3)]


# --------------------------------------------------------------------------- subscriptions


def test_subscribe_yields_backlog_then_live_events(any_url: str) -> None:
    store = open_store(any_url)
    writer = store if any_url == "memory://" else open_store(any_url)
    try:
        store.create_session(ROOT, created=1)
        fill(store, ROOT, 1, 3)
        got: list[tuple[int, int]] = []

        def append_later() -> None:
            for s in range(4, 9):
                time.sleep(0.01)
                writer.append(ROOT, [event(ROOT, s)], s - 1)

        t = threading.Thread(target=append_later)
        t.start()
        for rec in store.subscribe(0, idle_timeout=2.0, poll=0.01):
            got.append((rec.position, rec.event.seq))
            if rec.event.seq == 8:
                break
        t.join()
        assert got == [(p, p) for p in range(1, 9)]
        # From a position, and for one session only.
        assert [r.position for r in store.subscribe(6, session_id=ROOT, idle_timeout=0.05,
                                                    poll=0.01)] == [7, 8]
    finally:
        if writer is not store:
            writer.close()
        store.close()


# --------------------------------------------------------------------------- durability modes


def test_batched_appends_are_readable_and_flushed(durable_url: str) -> None:
    sep = "&" if "?" in durable_url else "?"
    store = open_store(f"{durable_url}{sep}durability=batched&batch_ms=5000&batch_events=100000")
    try:
        assert store.durability == "batched"
        store.create_session(ROOT, created=1)
        fill(store, ROOT, 1, 5)
        assert seqs(store, ROOT) == [1, 2, 3, 4, 5]  # the writer reads its own window
        store.flush()
        other = open_store(durable_url)
        try:
            assert seqs(other, ROOT) == [1, 2, 3, 4, 5]
        finally:
            other.close()
        fill(store, ROOT, 6, 7)
    finally:
        store.close()  # flushes
    again = open_store(durable_url)
    try:
        assert seqs(again, ROOT) == [1, 2, 3, 4, 5, 6, 7]
    finally:
        again.close()


def test_batched_window_commits_by_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    store = open_store(url, durability="batched", batch_ms=20, batch_events=10**6)
    other = open_store(url)
    try:
        store.create_session(ROOT, created=1)
        fill(store, ROOT, 1, 3)
        deadline = time.monotonic() + 5
        while other.version(ROOT) != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert other.version(ROOT) == 3  # committed by the timer, without flush()
    finally:
        other.close()
        store.close()


def test_a_failed_append_keeps_the_window(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/w.db", durability="batched", batch_ms=10**6)
    try:
        store.create_session(ROOT, created=1)
        fill(store, ROOT, 1, 2)
        with pytest.raises(ConcurrencyError):
            store.append(ROOT, [event(ROOT, 103)], 0)
        fill(store, ROOT, 3, 3)
        store.flush()
        assert seqs(store, ROOT) == [1, 2, 3]
    finally:
        store.close()


# --------------------------------------------------------------------------- retry helper


def test_retry_helper_rereads_and_wins(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    store, rival = open_store(url), open_store(url)
    try:
        store.create_session(ROOT, created=1)
        fill(store, ROOT, 1, 1)
        attempts: list[int] = []

        def write() -> int:
            version = store.version(ROOT)
            attempts.append(version)
            if len(attempts) == 1:  # another writer gets in between our read and append
                rival.append(ROOT, [event(ROOT, 2)], 1)
            done = store.append(ROOT, [event(ROOT, version + 1 + 100)], version)
            return done.seqs[0]

        with pytest.raises(BadBatch):  # the stale event carries a fixed seq: it must be fixed
            retry(write, attempts=3)
        attempts.clear()

        def write_fresh() -> int:
            version = store.version(ROOT)
            attempts.append(version)
            if len(attempts) == 1:
                rival.append(ROOT, [event(ROOT, 3)], 2)
            e = msgspec.structs.replace(event(ROOT, 200 + len(attempts)), seq=0)
            return store.append(ROOT, [e], version).seqs[0]

        assert retry(write_fresh, attempts=3, backoff=0.001) == 4
        assert attempts == [2, 3]
        with pytest.raises(ConcurrencyError):
            retry(lambda: store.append(ROOT, [event(ROOT, 300)], 0), attempts=2, backoff=0)
    finally:
        store.close()
        rival.close()


# --------------------------------------------------------------------------- persistence


def test_reopen_keeps_everything(durable_url: str) -> None:
    store = open_store(durable_url)
    session = Session.create(store)
    mid = session.start_message("assistant")
    tool = session.add_tool(mid, "c1", "bash")
    session.start_tool(tool, title="ls")
    store.put_snapshot(session.id, "proj", 2, b"snap")
    events = list(store.read(session.id))
    fork = session.fork(at=2)
    sid = session.id
    store.close()

    reopened = open_store(durable_url)
    try:
        assert {s.id for s in reopened.sessions()} == {sid, fork.id}
        assert list(reopened.read(sid)) == events
        assert reopened.latest_snapshot(sid, "proj", 10) == (2, b"snap")
        assert reopened.lineage(fork.id) == [(sid, 2), (fork.id, None)]
        again = Session.open(reopened, sid)
        assert again.complete_tool(tool, "files") == 4
        assert [r.position for r in reopened.read_all()] == [1, 2, 3, 4]
    finally:
        reopened.close()


def test_many_events_across_blocks(durable_url: str) -> None:
    """Enough single appends to seal compressed blocks, then reads at every boundary."""
    store = open_store(durable_url)
    try:
        store.create_session(ROOT, created=1)
        store.append(ROOT, [event(ROOT, s) for s in range(1, 301)], 0)  # one big batch
        for s in range(301, 461):
            store.append(ROOT, [event(ROOT, s)], s - 1)  # then a long single-event tail
        store.append(ROOT, [event(ROOT, s) for s in range(461, 1201)], 460)
        expected = list(range(1, 1201))
        assert seqs(store, ROOT) == expected
        for lo, hi in [(1, 1), (511, 514), (300, 302), (455, 470), (1199, 1300)]:
            assert seqs(store, ROOT, lo, hi) == expected[lo - 1:hi]
        assert [r.event.seq for r in store.read_all(1190)] == list(range(1191, 1201))
        assert store.find_event(event(ROOT, 777).id) == (ROOT, 777)
        assert store.seq_at_time(ROOT, 4005) == 400
    finally:
        store.close()
