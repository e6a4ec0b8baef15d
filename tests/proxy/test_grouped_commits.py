"""The recorder commits a streamed answer's events in groups (one append per burst):
grouping changes when events are committed, never which events the log holds nor
their order. Any interleaving of two calls' chunks and any commit points give the
log that committing after every job gives."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE, Recorder
from engine.proxy.routes import route
from engine.store import MemoryStore
from tests.proxy import scripts
from tests.proxy.servers import sse

# Fields whose values are made fresh at each run (uuid7s, clocks).
_FRESH = frozenset({"message_id", "part_id", "parent_id", "session_id", "time", "created",
                    "id", "hash", "prev"})

_CALLS = {
    1: ("/v1/messages", {"model": "m", "max_tokens": 9, "stream": True, "tools": [],
                         "messages": [{"role": "user", "content": "alpha"}]},
        sse(scripts.anthropic_text_and_tool())),
    2: ("/v1/responses", {"model": "m", "stream": True, "input": "beta"},
        sse(scripts.responses_text_and_call())),
}


def _jobs(order: list[int]) -> list[tuple[Any, ...]]:
    """Both calls open, their chunks in ``order`` (a call id per chunk), both end."""
    jobs: list[tuple[Any, ...]] = []
    for call_id, (path, body, _) in _CALLS.items():
        jobs += [(REQUEST, call_id, route("POST", path), "POST", path, "", {}),
                 (BODY, call_id, json.dumps(body).encode()),
                 (RESPONSE, call_id, 200, {"content-type": "text/event-stream"})]
    left = {call_id: list(chunks) for call_id, (_, _, chunks) in _CALLS.items()}
    for call_id in order:
        if left[call_id]:
            jobs.append((CHUNK, call_id, left[call_id].pop(0)))
    for call_id, rest in left.items():
        jobs += [(CHUNK, call_id, chunk) for chunk in rest]
        jobs.append((END, call_id, None))
    return jobs


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _FRESH}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _log(jobs: list[tuple[Any, ...]], commit_after: list[bool]) -> list[Any]:
    """The store's events in their global order (fresh ids left out; each named by
    its session's place in creation order)."""
    store = MemoryStore()
    recorder = Recorder("memory://", store=store)
    recorder.open()
    for job, commit in zip(jobs, commit_after, strict=True):
        recorder.handle(job)
        if commit:
            recorder.commit()
    recorder.close()
    assert not recorder.failures
    sessions = {s.id: i for i, s in enumerate(store.sessions())}
    return [(sessions[r.event.session_id], type(r.event).__name__,
             _plain(msgspec.to_builtins(r.event))) for r in store.read_all()]


@settings(max_examples=25, deadline=None)
@given(order=st.lists(st.sampled_from([1, 2]), max_size=30), data=st.data())
def test_grouped_commits_keep_every_event_in_order(order: list[int], data: Any) -> None:
    jobs = _jobs(order)
    grouped = data.draw(st.lists(st.booleans(), min_size=len(jobs), max_size=len(jobs)))
    reference = _log(jobs, [True] * len(jobs))
    assert {session for session, _, _ in reference} == {0, 1}
    assert len(reference) > 20
    assert _log(jobs, grouped) == reference


def test_a_chunk_of_another_call_commits_the_waiting_group_first() -> None:
    jobs = _jobs([1, 1, 1])
    store = MemoryStore()
    recorder = Recorder("memory://", store=store)
    recorder.open()
    for job in jobs[:9]:  # both calls open, three chunks of the first
        recorder.handle(job)
    assert recorder.uncommitted
    before = {s.id: len(list(store.read(s.id))) for s in store.sessions()}
    recorder.handle((CHUNK, 2, _CALLS[2][2][0]))  # the second call's first chunk
    after = {s.id: len(list(store.read(s.id))) for s in store.sessions()}
    assert sum(after.values()) > sum(before.values())  # the first call's group is in
    recorder.close()
