"""The viewer's door: which host names it answers to, and how big a request may be.

A page on any other origin cannot read the viewer's answers (the browser's same-origin
rule), but a name that resolves first to the attacker's server and then to 127.0.0.1
(DNS rebinding) makes that page same-origin with the viewer. The browser still sends
that name in the ``Host`` header, so the viewer answers only the names it is bound to:
the loopback names and the ``--host`` given. A request whose ``Origin`` names another
host is refused too (a cross-site write).

Bodies are kept up to ``max_body`` bytes and no further: a bigger declared length is
refused without keeping any of it, and a chunked body is cut off when it passes the
limit. A refused body of at most ``DRAIN_LIMIT`` bytes is read and thrown away before
the answer, for a reason of TCP's: closing a connection whose peer is still sending
resets it, and the reset discards the 413 the client has not read yet, so a browser
would report a network failure instead of the refusal. Bigger bodies are not read.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_BODY = 64 * 1024  # the fork request is a few bytes; nothing the viewer takes is large
DRAIN_LIMIT = 1024 * 1024  # a refused body this small is read (and dropped) before the 413
DRAIN_SECONDS = 2.0  # ... unless its sender is slower than this


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or an origin's netloc, lower-cased, without the
    port; an IPv6 address loses its brackets. '' when it cannot be parsed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else ""
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(bound: str | None) -> frozenset[str]:
    """The loopback names plus ``bound`` (the ``--host`` given), normalised."""
    extra = {host_name(f"[{bound}]" if bound and ":" in bound else bound or "")} - {""}
    return LOOPBACK_NAMES | extra


class TooLarge(Exception):
    """The body passed the limit while it was read."""


class Guard:
    """ASGI middleware: refuses other host names (421) and bodies over ``max_body`` (413)."""

    def __init__(self, app: ASGIApp, *, hosts: Iterable[str], max_body: int = MAX_BODY) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        host = host_name(headers.get("host", ""))
        if host not in self.hosts:
            await _refuse(send, 421, f"this viewer does not answer to the host name {host!r}")
            return
        origin = headers.get("origin")
        if origin is not None and origin != "null" and \
                host_name(urlsplit(origin).netloc) not in self.hosts:
            await _refuse(send, 403, "requests from another origin are refused")
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            if declared.isdigit() and int(declared) <= DRAIN_LIMIT:
                await _drain(receive, DRAIN_LIMIT)
            await _refuse(send, 413, f"request bodies are limited to {self.max_body} bytes")
            return
        await self._limited(scope, receive, send)

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except TooLarge:
            if not started:
                await _drain(receive, DRAIN_LIMIT - seen)
                await _refuse(send, 413, f"request bodies are limited to {self.max_body} bytes")


async def _drain(receive: Receive, budget: int) -> None:
    """Read and drop the rest of a refused body: at most ``budget`` bytes and
    ``DRAIN_SECONDS``, so the 413 reaches a client that is still sending (see the
    module's docstring). Nothing read is kept."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while budget > 0:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            message = await asyncio.wait_for(receive(), left)
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return  # the client went away
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(send: Send, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
