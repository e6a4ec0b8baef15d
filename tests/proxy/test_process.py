"""The recorder child and its pipe: jobs framed and read back whole, and an answer
larger than the pipe holds waits in memory (the forwarder never blocks) and is
recorded whole."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.proxy.process import RecorderProcess, frame, unframe
from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE
from engine.proxy.routes import ANTHROPIC, Route
from engine.store import open_store

jobs = st.one_of(
    st.tuples(st.just(CHUNK), st.integers(0, 2**32 - 1), st.binary(max_size=300)),
    st.tuples(st.just(END), st.integers(0, 100), st.none() | st.text(max_size=20)),
)


@given(st.lists(jobs, max_size=12), st.lists(st.integers(1, 64), max_size=12))
@settings(max_examples=100, deadline=None)
def test_jobs_read_back_whole_however_the_pipe_cuts_them(
        sent: list[tuple[Any, ...]], reads: list[int]) -> None:
    data = b"".join(frame(j) for j in sent)
    buffer, got, at = bytearray(), [], 0
    for size in [*reads, len(data)]:
        buffer += data[at:at + size]
        at += size
        got += list(unframe(buffer))
    assert got == sent
    assert not buffer


def test_an_answer_larger_than_the_pipe_is_recorded_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    text = "x" * (3 << 20)  # three times what the pipe holds
    answer = json.dumps({
        "id": "msg_big", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
    request = json.dumps({"model": "m", "max_tokens": 5,
                          "messages": [{"role": "user", "content": "much"}]}).encode()
    recorder = RecorderProcess(url)
    recorder.start()
    waited: list[int] = []

    async def forward() -> None:
        recorder.put((REQUEST, 1, Route(ANTHROPIC), "POST", "/v1/messages", "", {}))
        recorder.put((BODY, 1, request))
        recorder.put((RESPONSE, 1, 200, {"content-type": "application/json"}))
        for i in range(0, len(answer), 1 << 16):
            recorder.put((CHUNK, 1, answer[i:i + (1 << 16)]))
        recorder.put((END, 1, None))
        waited.append(len(recorder._backlog))
        while recorder._backlog:
            await asyncio.sleep(0.01)

    try:
        asyncio.run(asyncio.wait_for(forward(), 60))
        assert recorder.sync(60)
    finally:
        recorder.stop()
    assert waited[0] > 0  # the pipe was full: the rest waited in memory
    store = open_store(url, create=False)
    try:
        recorded = [e for s in store.sessions() for e in store.read(s.id)]
    finally:
        store.close()
    texts = [e.text for e in recorded if isinstance(e, ev.TextAdded)]
    assert texts[-1] == text  # the answer's text part (after the question's)


def test_a_streamed_burst_larger_than_the_pipe_is_recorded_whole_in_order(
        tmp_path: Path) -> None:
    """The child commits in windows: a burst that overfills the pipe (the child
    drains a few pipefuls a window) still reaches the log whole and in order."""
    from tests.proxy import scripts  # noqa: PLC0415
    from tests.proxy.servers import sse  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'p.db'}"
    words = [f"w{i:05d}-{'y' * 600} " for i in range(3_000)]  # about 2 MB of SSE
    stream = b"".join(sse(scripts.anthropic_text("".join(words))))
    request = json.dumps({"model": "m", "max_tokens": 5, "stream": True,
                          "messages": [{"role": "user", "content": "much"}]}).encode()
    recorder = RecorderProcess(url)
    recorder.start()

    async def forward() -> None:
        recorder.put((REQUEST, 1, Route(ANTHROPIC), "POST", "/v1/messages", "", {}))
        recorder.put((BODY, 1, request))
        recorder.put((RESPONSE, 1, 200, {"content-type": "text/event-stream"}))
        for i in range(0, len(stream), 997):  # cut anywhere, as the network does
            recorder.put((CHUNK, 1, stream[i:i + 997]))
        recorder.put((END, 1, None))
        while recorder._backlog:
            await asyncio.sleep(0.01)

    try:
        asyncio.run(asyncio.wait_for(forward(), 120))
        assert recorder.sync(120)
    finally:
        recorder.stop()
    store = open_store(url, create=False)
    try:
        recorded = [e for s in store.sessions() for e in store.read(s.id)]
    finally:
        store.close()
    assert [e.delta for e in recorded if isinstance(e, ev.TextDelta)] == words
    assert isinstance(recorded[-1], ev.MessageCompleted)
