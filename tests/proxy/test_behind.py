"""A recorder that falls behind never affects the traffic and loses nothing
silently: the copies wait in memory up to a limit, then a recording gap begins;
once the recorder has caught up, each call the gap cut is ended in the log with
the gap's error, the calls it missed are counted, and a note in the proxy's
recording-gaps session (and the ``proxy.recording_gap`` error line) says so.
An idle recorder (``SCHED_IDLE``) is made a batch process while it is behind, so
that a busy machine cannot starve it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from engine import events as ev
from engine.proxy import process
from engine.proxy.process import BEHIND_ERROR, RecorderProcess
from engine.proxy.recorder import BODY, CHUNK, END, GAPS_TITLE, REQUEST, RESPONSE
from engine.proxy.routes import ANTHROPIC, Route
from engine.store import open_store
from engine.store.verify import verify
from tests.proxy import scripts
from tests.proxy.servers import sse

IDLE = getattr(os, "SCHED_IDLE", None)


def _start(recorder: RecorderProcess, call: int, prompt: str) -> None:
    request = json.dumps({"model": "m", "max_tokens": 5, "stream": True,
                          "messages": [{"role": "user", "content": prompt}]}).encode()
    recorder.put((REQUEST, call, Route(ANTHROPIC), "POST", "/v1/messages", "", {}))
    recorder.put((BODY, call, request))
    recorder.put((RESPONSE, call, 200, {"content-type": "text/event-stream"}))


def _events(url: str) -> list[Any]:
    store = open_store(url, create=False)
    try:
        return [e for s in store.sessions() for e in store.read(s.id)]
    finally:
        store.close()


def test_a_recorder_behind_past_the_limit_makes_a_recorded_gap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "BACKLOG_LIMIT", 256 << 10)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    stream = b"".join(sse(scripts.anthropic_text(" ".join(f"w{i}" for i in range(400)))))
    short = b"".join(sse(scripts.anthropic_text("short answer")))
    filler = b": " + b"x" * 4000 + b"\n\n"  # an SSE comment: nothing to record
    recorder = RecorderProcess(url)
    recorder.start()
    pid = recorder.pid
    assert pid is not None
    policies: list[int] = []
    idle_child = IDLE is not None and os.sched_getscheduler(pid) == IDLE
    cut = stream.index(b"\n\n", 100) + 2  # the first events, whole

    async def forward() -> None:
        _start(recorder, 1, "cut by the gap")
        recorder.put((CHUNK, 1, stream[:cut]))
        os.kill(pid, signal.SIGSTOP)  # the recorder gets no CPU
        try:
            while not recorder.gaps and recorder._behind is None:
                recorder.put((CHUNK, 1, filler))  # the pipe fills, then the backlog
            policies.append(os.sched_getscheduler(pid))
            recorder.put((CHUNK, 1, stream[cut:]))  # dropped: past the limit
            recorder.put((END, 1, None))
            _start(recorder, 2, "missed by the gap")  # never handed over
            recorder.put((CHUNK, 2, short))
            recorder.put((END, 2, None))
            assert recorder._waiting <= process.BACKLOG_LIMIT  # memory stays bounded
        finally:
            os.kill(pid, signal.SIGCONT)
        while recorder._backlog or recorder._behind is not None:
            await asyncio.sleep(0.01)
        policies.append(os.sched_getscheduler(pid))
        _start(recorder, 3, "after the gap")
        recorder.put((CHUNK, 3, short))
        recorder.put((END, 3, None))

    try:
        asyncio.run(asyncio.wait_for(forward(), 120))
        assert recorder.sync(60)
    finally:
        recorder.stop()
    [account] = recorder.gaps
    assert account["reason"] == "behind"
    assert (account["unrecorded_calls"], account["cut_calls"]) == (1, 1)
    events = _events(url)
    prompts = {e.text for e in events if isinstance(e, ev.TextAdded)}
    assert "cut by the gap" in prompts
    assert "missed by the gap" not in prompts
    assert "after the gap" in prompts
    # The cut answer ends with the gap's error; the answer after it is whole.
    [aborted] = [e for e in events if BEHIND_ERROR in repr(e)]
    assert not isinstance(aborted, ev.TranscriptNoted)  # the call's own end, not the note
    assert [e for e in events if isinstance(e, ev.TextDelta)][-1].delta.endswith("answer")
    titled = {e.session_id for e in events
              if isinstance(e, ev.SessionTitled) and e.title == GAPS_TITLE}
    [note] = [e.text for e in events
              if isinstance(e, ev.TranscriptNoted) and e.session_id in titled]
    assert "fell behind" in note
    assert "1 call(s) that started in between were forwarded but not recorded" in note
    assert "1 call(s) in flight" in note
    store = open_store(url, create=False)
    try:
        report = verify(store)
    finally:
        store.close()
    assert report.ok, report.first
    if idle_child:  # behind: a batch process; caught up: idle again
        assert policies == [os.SCHED_BATCH, IDLE]
    else:  # a batch process throughout (it could not leave idle again)
        assert policies[0] == policies[1]
