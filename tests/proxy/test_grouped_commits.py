"""The recorder commits a call's events in groups (one append per commit window:
the context message, the settled tool calls of the answer before, the streamed
events, the end of the answer, an error message): grouping changes when events are
committed, never which events the log holds nor their order. Any interleaving of
the calls' jobs and any commit points give the log that committing after every job
gives, across every kind of job: streamed and whole answers, tool results settled
by the next request, an HTTP error, a retry that forks."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy.recorder import BODY, CHUNK, END, GAP, REQUEST, RESPONSE, Recorder
from engine.proxy.routes import route
from engine.store import MemoryStore
from tests.proxy import scripts
from tests.proxy.servers import sse

# Fields whose values are made fresh at each run (uuid7s, clocks).
_FRESH = frozenset({"message_id", "part_id", "parent_id", "session_id", "time", "created",
                    "id", "hash", "prev", "base"})

_CALLS = {
    1: ("/v1/messages", {"model": "m", "max_tokens": 9, "stream": True, "tools": [],
                         "messages": [{"role": "user", "content": "alpha"}]},
        sse(scripts.anthropic_text_and_tool())),
    2: ("/v1/responses", {"model": "m", "stream": True, "input": "beta"},
        sse(scripts.responses_text_and_call())),
}


_SSE = {"content-type": "text/event-stream"}
_JSON = {"content-type": "application/json"}
_ALPHA = {"role": "user", "content": "alpha"}
_ANSWER_1 = {"role": "assistant", "content": [
    {"type": "text", "text": "Reading the file"},
    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "hello.py"}}]}
_WHOLE = {"id": "msg_w", "type": "message", "role": "assistant", "model": "m",
          "content": [{"type": "text", "text": "Whole."}], "stop_reason": "end_turn",
          "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
_ERROR = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}


def _anthropic(*messages: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 9, "stream": True, "tools": [],
            "messages": list(messages)}


# After calls 1 and 2 ended: (path, request, status, headers, response chunks).
_LATER = {
    # Carries call 1 on with its tool's result: settles call 1's tool call.
    3: ("/v1/messages", _anthropic(_ALPHA, _ANSWER_1, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}]}),
        200, _SSE, sse(scripts.anthropic_text("It prints one.", "msg_3"))),
    # Call 1's request again (a retry), refused: a fork with an error message.
    4: ("/v1/messages", _anthropic(_ALPHA), 400, _JSON, [json.dumps(_ERROR).encode()]),
    # Another conversation, answered whole (not streamed), in two reads.
    5: ("/v1/messages", {**_anthropic({"role": "user", "content": "delta"}),
                         "stream": False},
        200, _JSON, [json.dumps(_WHOLE).encode()[:25], json.dumps(_WHOLE).encode()[25:]]),
}


def _call(call_id: int, spec: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    path, body, status, headers, chunks = spec
    return [(REQUEST, call_id, route("POST", path), "POST", path, "", {}),
            (BODY, call_id, json.dumps(body).encode()),
            (RESPONSE, call_id, status, headers),
            *((CHUNK, call_id, chunk) for chunk in chunks),
            (END, call_id, None)]


def _interleaved(calls: dict[int, list[tuple[Any, ...]]],
                 order: list[int]) -> list[tuple[Any, ...]]:
    """The calls' jobs, each call's in its order, taken by ``order`` (a call id per
    job), then what is left, call by call."""
    left = {call_id: list(jobs) for call_id, jobs in calls.items()}
    out = [left[c].pop(0) for c in order if left.get(c)]
    return out + [job for jobs in left.values() for job in jobs]


def _jobs(order: list[int], later: list[int] | None = None) -> list[tuple[Any, ...]]:
    """Calls 1 and 2 open, their chunks in ``order`` (a call id per chunk), both end;
    then calls 3-5 with their jobs in ``later``."""
    jobs: list[tuple[Any, ...]] = []
    for call_id, (path, body, _) in _CALLS.items():
        jobs += [(REQUEST, call_id, route("POST", path), "POST", path, "", {}),
                 (BODY, call_id, json.dumps(body).encode()),
                 (RESPONSE, call_id, 200, _SSE)]
    left = {call_id: list(chunks) for call_id, (_, _, chunks) in _CALLS.items()}
    for call_id in order:
        if left[call_id]:
            jobs.append((CHUNK, call_id, left[call_id].pop(0)))
    for call_id, rest in left.items():
        jobs += [(CHUNK, call_id, chunk) for chunk in rest]
        jobs.append((END, call_id, None))
    if later is not None:
        jobs += _interleaved({c: _call(c, spec) for c, spec in _LATER.items()}, later)
    return jobs


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _FRESH}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _log(jobs: list[tuple[Any, ...]], commit_after: list[bool]) -> list[Any]:
    """The store's events in their global order (fresh ids left out; each named by
    its session's place in that order)."""
    store = MemoryStore()
    recorder = Recorder("memory://", store=store)
    recorder.open()
    for job, commit in zip(jobs, commit_after, strict=True):
        recorder.handle(job)
        if commit:
            recorder.commit()
    recorder.close()
    assert not recorder.failures
    records = list(store.read_all())
    # Each session named by the place of its first event in the global order (its
    # id and creation time are fresh at each run).
    sessions: dict[str, int] = {}
    for r in records:
        sessions.setdefault(r.event.session_id, len(sessions))
    assert len(sessions) == len(store.sessions())  # no session left empty
    return [(sessions[r.event.session_id], type(r.event).__name__,
             _plain(msgspec.to_builtins(r.event))) for r in records]


@settings(max_examples=25, deadline=None)
@given(order=st.lists(st.sampled_from([1, 2]), max_size=30),
       later=st.lists(st.sampled_from([3, 4, 5]), max_size=40), data=st.data())
def test_grouped_commits_keep_every_event_in_order(order: list[int], later: list[int],
                                                   data: Any) -> None:
    jobs = _jobs(order, later)
    # A recording gap's account (a restarted recorder's first job) anywhere after
    # the first calls opened.
    at = data.draw(st.integers(min_value=6, max_value=len(jobs)))
    jobs.insert(at, (GAP, 0, {"since": "t0", "until": "t1", "unrecorded_calls": 2,
                              "cut_calls": 1}))
    grouped = data.draw(st.lists(st.booleans(), min_size=len(jobs), max_size=len(jobs)))
    reference = _log(jobs, [True] * len(jobs))
    # calls 1 and 3, call 2, call 4's fork, call 5's conversation, the gaps
    assert {session for session, _, _ in reference} == {0, 1, 2, 3, 4}
    assert "TranscriptNoted" in [kind for _, kind, _ in reference]
    kinds = [kind for _, kind, _ in reference]
    assert {"ToolCompleted", "MessageCompleted"} <= set(kinds)
    assert any(e.get("error") for _, kind, e in reference if kind == "MessageCompleted")
    assert _log(jobs, grouped) == reference


class _CountingStore(MemoryStore):
    """Counts the appends (store transactions) of events."""

    appends = 0

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self.appends += 1
        return super().append(*args, **kwargs)


def test_a_call_in_one_window_is_one_append() -> None:
    """Context message, settled tool calls, the streamed answer and its end: one
    append when one commit window holds the whole call."""
    store = _CountingStore()
    recorder = Recorder("memory://", store=store)
    recorder.open()
    jobs = _jobs([])
    for job in jobs[:3]:
        recorder.handle(job)  # call 1 opens: nothing is appended yet
    assert store.appends == 0
    for job in [job for job in jobs[6:] if job[1] == 1]:
        recorder.handle(job)
    recorder.commit()
    assert store.appends == 1  # call 1 whole
    for job in [job for job in jobs[3:] if job[1] == 2]:
        recorder.handle(job)
    recorder.commit()
    assert store.appends == 2
    for job in _call(3, _LATER[3]):  # settles call 1's tool, then its own answer
        recorder.handle(job)
    recorder.commit()
    assert store.appends == 3
    recorder.close()
    assert not recorder.failures
    [first] = [s for s in store.sessions() if len(list(store.read(s.id))) > 20]
    kinds = [type(e).__name__ for e in store.read(first.id)]
    assert kinds.count("ToolCompleted") == 1


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
