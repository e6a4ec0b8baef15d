"""Recording edge cases: non-streamed answers, a store that fails under the proxy,
and ``convlog serve`` showing what the proxy records while it records it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anthropic
import httpx
from starlette.testclient import TestClient

from engine.errors import StoreError
from engine.events import Event
from engine.proxy.errors import message_error
from engine.store import MemoryStore, open_store
from projections import views as v
from projections.render import anthropic as render_anthropic
from projections.serve.app import create_app
from projections.withparts import WithPartsProjection
from tests.proxy import scripts
from tests.proxy.harness import rig
from tests.proxy.servers import Reply, SettlingRecorder, Upstream, proxying, running, sse
from tests.support.browser import LOOPBACK

WHOLE = {"id": "msg_w", "type": "message", "role": "assistant", "model": "claude-x",
         "content": [{"type": "text", "text": "Whole answer."},
                     {"type": "tool_use", "id": "toolu_w", "name": "read",
                      "input": {"path": "a.py"}}],
         "stop_reason": "tool_use", "stop_sequence": None,
         "usage": {"input_tokens": 9, "output_tokens": 4}}


def test_a_non_streamed_answer_is_recorded_as_its_stream(tmp_path: Path) -> None:
    text = json.dumps(WHOLE).encode()
    reply = Reply([text[:20], text[20:]], headers=(("content-type", "application/json"),))
    with rig(tmp_path, [reply]) as r:
        client = anthropic.Anthropic(base_url=r.proxy_url, api_key="k", max_retries=0)
        got = client.messages.create(model="claude-x", max_tokens=9,
                                     messages=[{"role": "user", "content": "read a.py"}])
        views = r.views()
    [view] = views.values()
    [answer] = [m for m in view.messages() if m.info.role == "assistant"]
    assert render_anthropic.response(answer)["content"] == got.to_dict()["content"]
    [tool] = [p for p in answer.parts if isinstance(p, v.ToolPart)]
    assert tool.state.input == {"path": "a.py"}


class _FailingStore(MemoryStore):
    """A store that refuses every append after the first ``ok`` ones."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    def append(self, session_id: str, events: Iterable[Event], *args: Any,
               **kwargs: Any) -> Any:
        if self.ok <= 0:
            raise StoreError("the store is down")
        self.ok -= 1
        return super().append(session_id, events, *args, **kwargs)


def test_a_failing_store_never_breaks_the_client(tmp_path: Path) -> None:
    chunks = sse(scripts.anthropic_text("the client gets every word of this"))
    # Every append is refused (the call's context and answer are committed in
    # groups, so perhaps the whole call in one append).
    store = _FailingStore(ok=0)
    recorder = SettlingRecorder("memory://", store=store)
    recorder.start()
    try:
        with running(Upstream([Reply(chunks)])) as origin, \
                proxying(recorder, {"anthropic": origin}) as proxy:
            got = httpx.post(f"{proxy}/v1/messages",
                             json={"model": "m", "max_tokens": 9, "stream": True,
                                   "messages": [{"role": "user", "content": "hi"}]})
        assert recorder.sync()
    finally:
        recorder.stop()
    assert got.status_code == 200
    assert got.content == b"".join(chunks)
    assert recorder.failures
    assert "the store is down" in recorder.failures[0]


def test_serve_shows_proxied_sessions_live(tmp_path: Path) -> None:
    replies = [Reply(sse(scripts.anthropic_text("first", msg_id="m1"))),
               Reply(sse(scripts.anthropic_text("second", msg_id="m2")))]
    with rig(tmp_path, replies) as r:
        body = {"model": "m", "max_tokens": 9, "stream": True,
                "messages": [{"role": "user", "content": "one"}]}
        httpx.post(f"{r.proxy_url}/v1/messages", json=body)
        r.recorder.sync()
        viewer_store = open_store(r.store_url, create=False)
        with TestClient(create_app(viewer_store), base_url=LOOPBACK) as viewer:
            [listed] = viewer.get("/api/sessions").json()
            httpx.post(f"{r.proxy_url}/v1/messages", json={**body, "messages": [
                {"role": "user", "content": "another conversation"}]})
            r.recorder.sync()
            assert len(viewer.get("/api/sessions").json()) == 2  # seen without a restart
        state = WithPartsProjection.replay(viewer_store, listed["id"])
        viewer_store.close()
    assert [p.text for m in state.messages() for p in m.parts
            if isinstance(p, v.TextPart) and m.info.role == "assistant"] == ["first"]


def test_http_errors_map_to_typed_kinds() -> None:
    assert message_error(401, {"error": {"message": "bad key"}}).kind == "auth"
    assert message_error(429, "slow down").retryable is True
    assert message_error(400, {"error": {"message": "maximum context length"}}).kind == \
        "context_overflow"
    assert message_error(500, [{"error": {"message": "boom"}}]).message == "boom"


def test_a_provider_error_event_is_recorded_not_a_recording_failure(tmp_path: Path) -> None:
    good = sse(scripts.anthropic_text("half of it"))
    error = sse([{"type": "error", "error": {"type": "overloaded_error",
                                             "message": "Overloaded"}}])
    chunks = [*good[:4], *error]
    with rig(tmp_path, [Reply(chunks)]) as r:
        got = httpx.post(f"{r.proxy_url}/v1/messages",
                         json={"model": "m", "max_tokens": 9, "stream": True,
                               "messages": [{"role": "user", "content": "hi"}]})
        views = r.views()
        assert r.recorder.failures == []
    assert got.content == b"".join(chunks)
    [view] = views.values()
    [answer] = [m for m in view.messages() if m.info.role == "assistant"]
    info = answer.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert "Overloaded" in info.error.message
    assert [p.text for p in answer.parts if isinstance(p, v.TextPart)] == ["half of "]


def test_a_client_that_hangs_up_mid_stream_leaves_a_settled_answer(tmp_path: Path) -> None:
    chunks = sse(scripts.anthropic_text(" ".join(f"w{i}" for i in range(60))))
    with rig(tmp_path, [Reply(chunks, delay=0.02)]) as r:
        with httpx.stream("POST", f"{r.proxy_url}/v1/messages",
                          json={"model": "m", "max_tokens": 9, "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}) as got:
            for n, _ in enumerate(got.iter_raw()):
                if n == 5:
                    break  # the client goes away
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            views = r.views()
            [view] = views.values()
            [answer] = [m for m in view.messages() if m.info.role == "assistant"]
            if answer.info.time.completed is not None:
                break
            time.sleep(0.1)
    info = answer.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None  # settled: aborted, what streamed kept
    assert info.error.kind == "aborted"
