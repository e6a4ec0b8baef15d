"""MemoryStore keeps the global log as runs (one session's consecutive events at
consecutive positions), not a record per event: reads by position, id lookups and the
stored positions give what a record per event would, however sessions interleave."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.store import MemoryStore
from engine.store.base import ANY

SESSIONS = ["018f0000-0000-7000-8000-00000000000a", "018f0000-0000-7000-8000-00000000000b",
            "018f0000-0000-7000-8000-00000000000c"]


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 5)), max_size=12),
       after=st.integers(-2, 40), limit=st.none() | st.integers(1, 10),
       only=st.none() | st.integers(0, 2))
def test_runs_read_as_one_record_per_event(batches: list[tuple[int, int]], after: int,
                                          limit: int | None, only: int | None) -> None:
    store = MemoryStore()
    for sid in SESSIONS:
        store.create_session(sid, created=1)
    log: list[tuple[int, str, str]] = []  # (position, session, event id), the model
    for n, (who, size) in enumerate(batches):
        sid = SESSIONS[who]
        ids = [f"e{n}-{k}" for k in range(size)]
        store.append(sid, [ev.TextAdded(id=i, message_id="m", part_id="p", text="x")
                                for i in ids], ANY)
        log += [(len(log) + k, sid, i) for k, i in enumerate(ids, start=1)]
    assert store.last_position() == len(log)
    # The index's one non-id key (it keeps the hashes inline) is found as no event.
    assert store.find_event("\0") is None
    assert store.find_event("e-none") is None
    for _, sid, eid in log:
        found = store.find_event(eid)
        assert found is not None
        assert found[0] == sid
        assert [e.id for e in store.read(sid, found[1], found[1])] == [eid]
    want = [(p, i) for p, s, i in log
            if p > after and (only is None or s == SESSIONS[only])][:limit]
    got = store.read_all(after, session_id=None if only is None else SESSIONS[only],
                         limit=limit)
    assert [(r.position, r.event.id) for r in got] == want
    for sid in SESSIONS:
        stored = list(store.reader.stored(sid))
        assert [s.position for s in stored] == [p for p, s, _ in log if s == sid]
