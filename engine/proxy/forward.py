"""The forwarder: a raw ASGI app that passes each request to its upstream and each
response byte back as it arrives, queueing a copy for the recorder.

Nothing is parsed or decoded on this path: the request body streams to the
upstream as the client sends it, the response is read raw (``aiter_raw``: a
compressed body stays compressed) and every chunk is sent on before the
recorder sees it. Headers pass unchanged except the hop-by-hop ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import httpx

from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE
from engine.proxy.routes import ANTHROPIC, CHAT, GEMINI, RESPONSES, route
from engine.proxy.secrets import safe_headers, safe_query

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

DEFAULT_UPSTREAMS = {
    ANTHROPIC: "https://api.anthropic.com",
    RESPONSES: "https://api.openai.com",
    CHAT: "https://api.openai.com",
    GEMINI: "https://generativelanguage.googleapis.com",
}
# Per --upstream name: the providers it sets.
UPSTREAM_NAMES = {"anthropic": (ANTHROPIC,), "openai": (RESPONSES, CHAT),
                  "gemini": (GEMINI,)}
_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding",
                  b"te", b"trailer", b"upgrade", b"host"})


def _other_provider(headers: list[tuple[bytes, bytes]]) -> str:
    """The upstream of a request that is no model call (``HEAD /``, a model list)."""
    names = {k.lower() for k, _ in headers}
    if b"anthropic-version" in names or b"x-api-key" in names:
        return ANTHROPIC
    if b"x-goog-api-key" in names:
        return GEMINI
    return RESPONSES


class Sink(Protocol):
    """Where the forwarder hands its copies: a :class:`~engine.proxy.recorder.Recorder`
    (a thread) or a :class:`~engine.proxy.process.RecorderProcess`."""

    def put(self, job: tuple[Any, ...]) -> None: ...


class ProxyApp:
    """The ASGI app of ``convlog proxy``."""

    def __init__(self, recorder: Sink | None, upstreams: dict[str, str] | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        self.recorder = recorder
        self.upstreams = {**DEFAULT_UPSTREAMS, **(upstreams or {})}
        self.client = client
        self._ids = itertools.count(1)

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            # No default headers (httpx would add accept-encoding, user-agent...):
            # the upstream gets the client's own, and no decoding (aiter_raw).
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=30.0),
                                            follow_redirects=False, trust_env=False)
            self.client.headers.clear()
        return self.client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method: str = scope["method"]
        path: str = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        path = path.split("?", 1)[0]
        query: str = scope.get("query_string", b"").decode("latin-1")
        headers: list[tuple[bytes, bytes]] = list(scope["headers"])
        found = route(method, scope["path"])
        provider = found.provider if found else _other_provider(headers)
        url = self.upstreams[provider] + path + (f"?{query}" if query else "")
        recorder = self.recorder if found is not None else None
        call_id = next(self._ids)
        body_copy: list[bytes] = []

        async def body() -> AsyncIterator[bytes]:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                if chunk:
                    if recorder is not None:
                        body_copy.append(chunk)
                    yield chunk
                if not message.get("more_body", False):
                    return

        forwarded = [(k, v) for k, v in headers if k.lower() not in _HOP]
        has_body = any(k.lower() in (b"content-length", b"transfer-encoding")
                       for k, _ in headers)
        client = self._client()
        request = client.build_request(method, url, headers=forwarded,
                                       content=body() if has_body else None)
        if recorder is not None:
            safe = safe_headers(headers)
            recorder.put((REQUEST, call_id, found, method, path, safe_query(query), safe))
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            if recorder is not None:
                self._request_done(recorder, call_id, body_copy)
                recorder.put((RESPONSE, call_id, 502, {}))
                recorder.put((END, call_id, f"upstream unreachable: {exc}"))
            await _bad_gateway(send, f"convlog proxy: upstream {provider} unreachable: {exc}")
            return
        try:
            out_headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP]
            if recorder is not None:
                self._request_done(recorder, call_id, body_copy)
                recorder.put((RESPONSE, call_id, response.status_code,
                              safe_headers(response.headers.raw)))
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": out_headers})
            error: str | None = None
            # The client hanging up is told by receive() (the body was read whole by
            # now): then the upstream call is closed, as a direct connection would be.
            gone = asyncio.Event()
            watcher = asyncio.create_task(_watch_disconnect(receive, gone))
            try:
                async for chunk in response.aiter_raw():
                    if gone.is_set():
                        error = "the client disconnected before the answer ended"
                        break
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": True})
                    if recorder is not None:
                        recorder.put((CHUNK, call_id, chunk))
            except httpx.HTTPError as exc:
                error = f"upstream broke the stream: {exc}"
            except OSError as exc:  # the client went away
                error = f"client disconnected: {exc}"
            finally:
                watcher.cancel()
            if recorder is not None:
                recorder.put((END, call_id, error))
            with contextlib.suppress(OSError):  # the client may be gone
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    @staticmethod
    def _request_done(recorder: Sink, call_id: int, body_copy: list[bytes]) -> None:
        # The body is whole once the upstream answered (httpx sent it all first).
        recorder.put((BODY, call_id, b"".join(body_copy)))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.client is not None:
                    await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def _bad_gateway(send: Send, message: str) -> None:
    body = json.dumps({"type": "error", "error": {"type": "proxy_error",
                                                  "message": message}}).encode()
    await send({"type": "http.response.start", "status": 502,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
