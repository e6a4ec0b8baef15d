"""Test servers on 127.0.0.1: a scripted upstream, any ASGI app run by uvicorn in a
thread (the replay server), and the proxy's forwarder in a thread."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import uvicorn

from engine.proxy.forward import Forwarder, Sink
from engine.proxy.listen import bind
from engine.proxy.recorder import Recorder

JSON = dict[str, Any]


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", server_header=False,
                            date_header=False, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class SettlingRecorder(Recorder):
    """The recorder thread, whose :meth:`sync` first waits until the forwarders it is
    given have handed over every call in flight: the client has a response's last
    bytes a moment before the forwarder hands the recorder their copy."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.forwarders: list[Forwarder] = []

    def sync(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(c.exchange is None for f in self.forwarders for c in list(f.clients)):
                    break
            except RuntimeError:  # the set changed while read: read it again
                continue
            time.sleep(0.005)
        return super().sync(max(0.1, deadline - time.monotonic()))


@contextmanager
def proxying(recorder: Sink | None, origins: dict[str, str], *,
             tls: ssl.SSLContext | None = None, preconnect: bool = False) -> Iterator[str]:
    """``convlog proxy``'s forwarder on a free loopback port (its own thread and event
    loop); yield its base URL."""
    sock = bind("127.0.0.1", 0)
    box: dict[str, Any] = {}
    ready = threading.Event()
    forwarder = Forwarder(recorder, origins, tls=tls, preconnect=preconnect)
    if isinstance(recorder, SettlingRecorder):
        recorder.forwarders.append(forwarder)

    async def main() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await forwarder.serve(sock, box["stop"])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the proxy did not start")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(20)
        sock.close()


@attrs.define
class Reply:
    """One scripted answer: a status, headers and the body's chunks (sent one by one,
    ``delay`` seconds apart)."""

    chunks: Sequence[bytes]
    status: int = 200
    headers: Sequence[tuple[str, str]] = (("content-type", "text/event-stream"),)
    delay: float = 0.0


@attrs.define
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Upstream:
    """A scripted model API: answers the n-th request with ``replies[n]``; logs each."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.seen: list[Seen] = []

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any
                       ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append(Seen(scope["method"], scope["path"],
                              scope["query_string"].decode(), headers, body))
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        index = len(self.seen) - 1
        reply = self.replies[min(index, len(self.replies) - 1)]
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": [(k.encode(), v.encode()) for k, v in reply.headers]})
        for chunk in reply.chunks:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def sse(events: Sequence[JSON], *, named: bool = True) -> list[bytes]:
    """SSE chunks, one per event (``event:`` lines when ``named``)."""
    out = []
    for e in events:
        data = json.dumps(e)
        out.append((f"event: {e['type']}\ndata: {data}\n\n" if named else
                    f"data: {data}\n\n").encode())
    return out
