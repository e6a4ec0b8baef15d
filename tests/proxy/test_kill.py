"""``kill -9`` of the proxy mid-stream: the client has the upstream's bytes up to the
kill, and every event the store acknowledged before it is still there (the log
verifies)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from engine import events as ev
from engine.store import open_store
from engine.store.verify import verify
from tests.proxy import scripts
from tests.proxy.servers import Reply, Upstream, running, sse
from tests.proxy.verbs import verb


def _deltas(url: str) -> list[ev.Event]:
    store = open_store(url, create=False)
    try:
        return [e for s in store.sessions() for e in store.read(s.id)]
    finally:
        store.close()


def test_kill_9_mid_stream_loses_no_acknowledged_event(tmp_path: Path) -> None:
    text = " ".join(f"w{i}" for i in range(120))
    chunks = sse(scripts.anthropic_text(text))
    upstream = Upstream([Reply(chunks, delay=0.01)])
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "count"}]}
    with running(upstream) as origin, \
            verb("proxy", "--store", url, "--listen", "127.0.0.1:0",
                 "--upstream", f"anthropic={origin}") as (proxy, proc):
        received = b""
        acknowledged: list[ev.Event] = []
        with httpx.stream("POST", f"{proxy}/v1/messages", json=body, timeout=30) as got:
            stream = got.iter_raw()
            try:
                for chunk in stream:
                    received += chunk
                    if received.count(b"text_delta") >= 30 and not acknowledged:
                        # What the store acknowledged so far (read from another process).
                        deadline = time.monotonic() + 10
                        while time.monotonic() < deadline:
                            acknowledged = _deltas(url)
                            if sum(isinstance(e, ev.TextDelta) for e in acknowledged) >= 20:
                                break
                            time.sleep(0.01)
                        os.kill(proc.pid, signal.SIGKILL)
                        proc.wait(10)
            except httpx.HTTPError:
                pass  # the connection died with the proxy
    everything = b"".join(chunks)
    assert sum(isinstance(e, ev.TextDelta) for e in acknowledged) >= 20
    assert received.count(b"text_delta") >= 30
    assert everything.startswith(received)  # the upstream's bytes, unchanged, in order
    assert len(received) < len(everything)  # the kill did cut the stream
    after = _deltas(url)
    assert after[:len(acknowledged)] == acknowledged  # nothing acknowledged was lost
    store = open_store(url, create=False)
    report = verify(store)
    store.close()
    assert report.ok, report.first
    recorded = "".join(e.delta for e in after if isinstance(e, ev.TextDelta))
    assert text.startswith(recorded)


def _recorder_pid(proxy_pid: int) -> int:
    children = [int(c) for task in Path(f"/proc/{proxy_pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    # Beside it, multiprocessing's resource tracker (spawn's helper process).
    found = [c for c in children
             if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert len(found) == 1, children
    return found[0]


def test_kill_9_of_the_recorder_mid_burst(tmp_path: Path) -> None:
    """What docs/proxy.md promises when the recorder child dies while a stream's
    events wait for their grouped commit: the client still gets every byte of this
    call and of the next, the events committed before the kill stay (in order, the
    log verifies), what is recorded of the answer is a prefix of what streamed, and
    the proxy logs that it records no more."""
    text = " ".join(f"w{i}" for i in range(120))
    chunks = sse(scripts.anthropic_text(text))
    second = sse(scripts.anthropic_text("after the recorder died"))
    upstream = Upstream([Reply(chunks, delay=0.005), Reply(second)])
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "count"}]}
    with running(upstream) as origin, \
            verb("proxy", "--store", url, "--listen", "127.0.0.1:0",
                 "--upstream", f"anthropic={origin}") as (proxy, proc):
        recorder = _recorder_pid(proc.pid)
        received = b""
        acknowledged: list[ev.Event] = []
        with httpx.stream("POST", f"{proxy}/v1/messages", json=body, timeout=30) as got:
            for chunk in got.iter_raw():
                received += chunk
                if received.count(b"text_delta") >= 30 and not acknowledged:
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        acknowledged = _deltas(url)
                        if sum(isinstance(e, ev.TextDelta) for e in acknowledged) >= 20:
                            break
                        time.sleep(0.002)
                    os.kill(recorder, signal.SIGKILL)  # mid-burst: chunks keep coming
        # The next call goes through as if nothing happened.
        again = httpx.post(f"{proxy}/v1/messages", json=body, timeout=30)
        assert again.status_code == 200
        assert again.content == b"".join(second)
        assert proc.poll() is None  # the proxy lives on
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert received == b"".join(chunks)  # every byte, unchanged, in order
    assert "proxy.recorder_lost" in err, (err, out)
    after = _deltas(url)
    assert sum(isinstance(e, ev.TextDelta) for e in acknowledged) >= 20
    assert after[:len(acknowledged)] == acknowledged  # nothing committed was lost
    # (The next call is recorded or not, as a new recorder took over before it or
    # not: tests/proxy/test_restart.py holds the gap's account to the log.)
    answer = next(e.message_id for e in after
                  if isinstance(e, ev.MessageStarted) and e.role == "assistant")
    recorded = "".join(e.delta for e in after
                       if isinstance(e, ev.TextDelta) and e.message_id == answer)
    assert text.startswith(recorded)  # no event reordered, none dropped in between
    assert len(recorded) < len(text)  # the kill did cost the rest of the answer
    store = open_store(url, create=False)
    report = verify(store)
    store.close()
    assert report.ok, report.first
