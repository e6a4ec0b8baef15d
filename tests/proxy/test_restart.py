"""A recorder that dies is started again, and the gap is recorded as such: the
calls forwarded while none ran are not in the log, and a note in the proxy's
recording-gaps session (and the ``proxy.recording_gap`` error line) says how
many, when, and how many calls it cut."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx

from engine import events as ev
from engine.proxy.recorder import GAPS_TITLE
from engine.store import open_store
from engine.store.verify import verify
from tests.proxy import scripts
from tests.proxy.servers import Reply, Upstream, running, sse
from tests.proxy.test_kill import _deltas
from tests.proxy.verbs import verb


def _recorders(proxy_pid: int) -> list[int]:
    """The proxy's recorder children (not multiprocessing's resource tracker)."""
    children = [int(c) for task in Path(f"/proc/{proxy_pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    out = []
    for c in children:
        try:
            if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes():
                out.append(c)
        except FileNotFoundError:
            continue
    return out


def _prompts(url: str) -> set[str]:
    return {e.text for e in _deltas(url) if isinstance(e, ev.TextAdded)}


def _gap_notes(url: str) -> list[str]:
    events = _deltas(url)
    titled = {e.session_id for e in events
              if isinstance(e, ev.SessionTitled) and e.title == GAPS_TITLE}
    return [e.text for e in events
            if isinstance(e, ev.TranscriptNoted) and e.session_id in titled]


def _ask(proxy: str, prompt: str) -> httpx.Response:
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": prompt}]}
    return httpx.post(f"{proxy}/v1/messages", json=body, timeout=30)


def test_a_killed_recorder_is_restarted_and_the_gap_recorded(tmp_path: Path) -> None:
    text = " ".join(f"w{i}" for i in range(120))
    chunks = sse(scripts.anthropic_text(text))
    short = sse(scripts.anthropic_text("short answer"))
    upstream = Upstream([Reply(chunks, delay=0.005), *(Reply(short) for _ in range(80))])
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "count"}]}
    asked: list[str] = []
    with running(upstream) as origin, \
            verb("proxy", "--store", url, "--listen", "127.0.0.1:0",
                 "--upstream", f"anthropic={origin}") as (proxy, proc):
        [first] = _recorders(proc.pid)
        received = b""
        killed = False
        with httpx.stream("POST", f"{proxy}/v1/messages", json=body, timeout=30) as got:
            for chunk in got.iter_raw():
                received += chunk
                if received.count(b"text_delta") >= 30 and not killed:
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline and sum(
                            isinstance(e, ev.TextDelta) for e in _deltas(url)) < 10:
                        time.sleep(0.005)
                    os.kill(first, signal.SIGKILL)  # mid-stream: the call is cut
                    killed = True
        assert received == b"".join(chunks)  # the client lost nothing
        # Calls go on, all answered; those before the new recorder takes over are
        # the gap's. The first call after it is ready hands it over.
        deadline = time.monotonic() + 60
        while not _gap_notes(url):
            if time.monotonic() > deadline:
                proc.send_signal(signal.SIGINT)
                raise AssertionError(f"no recorder took over: {proc.communicate(timeout=20)}")
            prompt = f"during {len(asked)}"
            asked.append(prompt)
            answer = _ask(proxy, prompt)
            assert answer.status_code == 200
            assert answer.content == b"".join(short)
            time.sleep(0.2)
        [second] = _recorders(proc.pid)
        assert second != first
        after = _ask(proxy, "after the gap")
        assert after.content == b"".join(short)
        deadline = time.monotonic() + 20
        while "after the gap" not in _prompts(url):  # recorded again
            assert time.monotonic() < deadline, "the new recorder records nothing"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    assert "proxy.recorder_lost" in err
    assert "proxy.recording_gap" in err
    prompts = _prompts(url)
    unrecorded = [p for p in asked if p not in prompts]
    [note] = _gap_notes(url)
    found = re.search(r"(\d+) call\(s\) that started in between were forwarded but "
                      r"not recorded; (\d+) call\(s\) in flight", note)
    assert found, note
    # The note's account is the log's: exactly the calls missing from it.
    assert int(found[1]) == len(unrecorded)
    assert int(found[2]) == 1  # the streamed call the kill cut
    # The calls after the takeover are all there, each once.
    assert asked[-1] in prompts
    store = open_store(url, create=False)
    report = verify(store)
    store.close()
    assert report.ok, report.first


def test_failed_starts_are_retried_and_counted_in_the_gap(tmp_path: Path) -> None:
    """While the store cannot be opened, starts fail and are retried with backoff;
    the gap's account counts them, and the first start that succeeds takes over."""
    from engine.proxy.process import RecorderProcess  # noqa: PLC0415
    from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE  # noqa: PLC0415
    from engine.proxy.routes import ANTHROPIC, Route  # noqa: PLC0415

    db = tmp_path / "p.db"
    url = f"sqlite:///{db}"
    recorder = RecorderProcess(url)
    recorder.start()
    request = (b'{"model": "m", "max_tokens": 5, '
               b'"messages": [{"role": "user", "content": "x"}]}')
    answer = (b'{"id": "m1", "type": "message", "role": "assistant", "model": "m", '
              b'"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", '
              b'"stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}')

    def call(call_id: int) -> None:
        recorder.put((REQUEST, call_id, Route(ANTHROPIC), "POST", "/v1/messages", "", {}))
        recorder.put((BODY, call_id, request))
        recorder.put((RESPONSE, call_id, 200, {"content-type": "application/json"}))
        recorder.put((CHUNK, call_id, answer))
        recorder.put((END, call_id, None))

    try:
        call(1)
        assert recorder.sync(60)
        pid = recorder.pid
        assert pid is not None
        for name in ("p.db", "p.db-wal", "p.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        db.mkdir()  # the store cannot be opened now
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        call_id = 2
        while not recorder._gap or not recorder._gap.restarts:  # a start failed
            assert time.monotonic() < deadline, "no start was tried"
            call(call_id)  # the first of them finds the recorder dead
            call_id += 1
            time.sleep(0.05)
        db.rmdir()  # the next start succeeds
        deadline = time.monotonic() + 90
        while not recorder.gaps:
            assert time.monotonic() < deadline, "no recorder took over"
            call(call_id)
            call_id += 1
            time.sleep(0.05)
        assert recorder.sync(60)
    finally:
        recorder.stop()
    [gap] = recorder.gaps
    assert gap["failed_starts"] >= 1
    assert gap["unrecorded_calls"] >= 1
    store = open_store(url, create=False)
    try:
        notes = [e.text for s in store.sessions() for e in store.read(s.id)
                 if isinstance(e, ev.TranscriptNoted)]
    finally:
        store.close()
    assert len(notes) == 1
    assert f"{gap['unrecorded_calls']} call(s) that started in between" in notes[0]
