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
