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
