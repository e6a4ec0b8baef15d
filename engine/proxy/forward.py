"""The forwarder: an HTTP/1.1 reverse proxy on asyncio protocols that passes each
request to its upstream and each response byte back the moment it arrives,
handing a copy to the recorder after the client has it.

Nothing is decoded on this path. The request and the response are forwarded
with their own framing (a chunked body stays chunked, a compressed one stays
compressed); the framing is only scanned to know where a message ends and which
bytes are its body (the recorder's copy). A response chunk is written to the
client inside the callback that read it from the upstream, before anything else
happens to it: the client's bytes wait on nothing but the upstream. Headers pass
unchanged except the hop-by-hop ones and ``host`` (the upstream's). Upstream
connections are kept alive and reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import socket
import ssl
from collections.abc import Coroutine
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from engine.logging import get_logger
from engine.proxy import http1
from engine.proxy.quiet import settle_heap
from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE
from engine.proxy.routes import ANTHROPIC, CHAT, GEMINI, RESPONSES, Route, route
from engine.proxy.secrets import safe_headers, safe_query

DEFAULT_UPSTREAMS = {
    ANTHROPIC: "https://api.anthropic.com",
    RESPONSES: "https://api.openai.com",
    CHAT: "https://api.openai.com",
    GEMINI: "https://generativelanguage.googleapis.com",
}
# Per --upstream name: the providers it sets.
UPSTREAM_NAMES = {"anthropic": (ANTHROPIC,), "openai": (RESPONSES, CHAT),
                  "gemini": (GEMINI,)}
# Hop-by-hop headers (RFC 9110 7.6.1): this connection's, not the message's. The
# transfer coding is the message's here: the body is forwarded with its framing.
_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                  b"upgrade"})
_CONNECT_TIMEOUT = 30.0
_IDLE_PER_ORIGIN = 16
_GRACE = 10.0  # seconds the calls in flight get to end when the proxy stops
# An upstream connection reads into a buffer of its own, up to this much at a time
# (what is queued, in one read). asyncio's default read allocates 256 KiB per read
# (a mapping of fresh pages, unmapped after): 15 us a chunk against 2 here.
_READ_SIZE = 64 * 1024

log = get_logger("convlog.proxy")


class Sink(Protocol):
    """Where the forwarder hands its copies: a :class:`~engine.proxy.recorder.Recorder`
    (a thread) or a :class:`~engine.proxy.process.RecorderProcess`."""

    def put(self, job: tuple[Any, ...]) -> None: ...


def _other_provider(headers: list[tuple[bytes, bytes]]) -> str:
    """The upstream of a request that is no model call (``HEAD /``, a model list)."""
    names = {k for k, _ in headers}
    if b"anthropic-version" in names or b"x-api-key" in names:
        return ANTHROPIC
    if b"x-goog-api-key" in names:
        return GEMINI
    return RESPONSES


class Origin:
    """An upstream origin: where to connect and what its ``host`` header says."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        self.netloc = parts.netloc.rsplit("@", 1)[-1].encode("idna")


class Forwarder:
    """``convlog proxy``'s server: serve it on a bound socket with :meth:`serve` (or
    :meth:`run`, which stops on SIGINT/SIGTERM)."""

    def __init__(self, recorder: Sink | None, upstreams: dict[str, str] | None = None,
                 *, tls: ssl.SSLContext | None = None, preconnect: bool = False) -> None:
        self.recorder = recorder
        self.origins = {p: Origin(u) for p, u in
                        {**DEFAULT_UPSTREAMS, **(upstreams or {})}.items()}
        # The upstreams named on the command line get a connection as the proxy
        # starts, so that the first call does not wait for a connect (or a TLS
        # handshake). The public defaults are not dialled unasked.
        named = {p: self.origins[p] for p in upstreams or {}} if preconnect else {}
        self._preconnect = list({(o.host, o.port, o.tls): o for o in named.values()}
                                .values())
        self._ids = itertools.count(1)
        self._idle: dict[tuple[str, int, bool], list[Upstream]] = {}
        self._ssl = tls  # how https upstreams are checked (default: certifi's roots)
        self._tasks: set[asyncio.Task[None]] = set()
        self.clients: set[Client] = set()
        self.upstream_connections = 0  # opened so far

    # ------------------------------------------------------------------ serving

    async def serve(self, sock: socket.socket, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Client(self), sock=sock)
        for origin in self._preconnect:
            self.spawn(self._warm(origin))
        try:
            await stop.wait()
        finally:
            server.close()
            await self._drain(_GRACE)
            for idle in self._idle.values():
                for upstream in idle:
                    upstream.transport.close()
            self._idle.clear()

    async def _drain(self, grace: float) -> None:
        """Let the calls in flight end (up to ``grace`` seconds), then end the rest as
        stopped and close every connection."""
        deadline = asyncio.get_running_loop().time() + grace
        while any(c.exchange is not None for c in self.clients):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        for client in list(self.clients):
            if client.exchange is not None:
                client.exchange.stopped()
            client.close()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def run(self, sock: socket.socket) -> None:
        """Serve until SIGINT or SIGTERM."""

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            settle_heap()  # the start-up heap out of the collector's way
            await self.serve(sock, stop)

        asyncio.run(main())

    # ------------------------------------------------------------------ upstream connections

    def next_id(self) -> int:
        return next(self._ids)

    def idle(self, origin: Origin) -> Upstream | None:
        idle = self._idle.get((origin.host, origin.port, origin.tls))
        while idle:
            upstream = idle.pop()
            if not upstream.transport.is_closing():
                return upstream
        return None

    async def connect(self, origin: Origin) -> Upstream:
        loop = asyncio.get_running_loop()
        key = (origin.host, origin.port, origin.tls)
        tls = self._tls() if origin.tls else None
        _, upstream = await asyncio.wait_for(loop.create_connection(
            lambda: Upstream(self, key), origin.host, origin.port, ssl=tls,
            server_hostname=origin.host if tls else None), _CONNECT_TIMEOUT)
        self.upstream_connections += 1
        return upstream

    async def _warm(self, origin: Origin) -> None:
        """One idle connection to ``origin`` (a failure is the first call's to report)."""
        try:
            upstream = await self.connect(origin)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            log.info("proxy.preconnect_failed", upstream=f"{origin.host}:{origin.port}",
                     error=str(exc) or type(exc).__name__)
            return
        self.release(upstream)

    def release(self, upstream: Upstream) -> None:
        """A connection whose exchange ended cleanly waits for the next request."""
        idle = self._idle.setdefault(upstream.key, [])
        if len(idle) >= _IDLE_PER_ORIGIN or upstream.transport.is_closing():
            upstream.transport.close()
        else:
            idle.append(upstream)

    def forget(self, upstream: Upstream) -> None:
        idle = self._idle.get(upstream.key)
        if idle and upstream in idle:
            idle.remove(upstream)

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            try:
                import certifi  # noqa: PLC0415 - installed with httpx (the extra)

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                self._ssl = ssl.create_default_context()
            self._ssl.set_alpn_protocols(["http/1.1"])
        return self._ssl


class Client(asyncio.Protocol):
    """One client connection: its requests, one at a time (keep-alive)."""

    def __init__(self, forwarder: Forwarder) -> None:
        self.forwarder = forwarder
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.buffer = bytearray()
        self.exchange: Exchange | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.forwarder.clients.add(self)
        no_delay(transport)

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is not None and not exchange.request_done:
            exchange.request_data(data)
            return
        self.buffer += data
        if exchange is None:
            self.next_request()

    def next_request(self) -> None:
        if self.closed or not self.buffer:
            return
        end = http1.head_end(self.buffer)
        if end < 0:
            if len(self.buffer) > http1.MAX_HEAD:
                self.refuse(431, "the request head is too large")
            return
        raw, rest = bytes(self.buffer[:end]), bytes(self.buffer[end:])
        self.buffer.clear()
        try:
            head = http1.parse_head(raw)
            line = http1.request_line(head)
            framing = http1.body_framing(head, request=True)
        except http1.BadMessage as exc:
            self.refuse(400, str(exc))
            return
        self.exchange = Exchange(self, head, line, framing)
        self.exchange.start(rest)

    def finished(self, keep_alive: bool) -> None:
        """The exchange is over: the next request, or the end of the connection."""
        self.exchange = None
        if not keep_alive or self.transport.is_closing():
            self.close()
            return
        self.transport.resume_reading()
        self.next_request()

    def refuse(self, status: int, message: str) -> None:
        write_error(self.transport, status, message)
        self.close()

    def close(self) -> None:
        self.closed = True
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.forwarder.clients.discard(self)
        if self.exchange is not None:
            self.exchange.client_lost()

    def pause_writing(self) -> None:  # the client reads slower than the upstream sends
        if self.exchange is not None:
            self.exchange.pause_upstream(True)

    def resume_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.pause_upstream(False)


class Upstream(asyncio.BufferedProtocol):
    """One upstream connection, serving one exchange at a time."""

    def __init__(self, forwarder: Forwarder, key: tuple[str, int, bool]) -> None:
        self.forwarder = forwarder
        self.key = key
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.exchange: Exchange | None = None
        self.used = 0  # exchanges served before the current one
        self._read = memoryview(bytearray(_READ_SIZE))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read

    def buffer_updated(self, nbytes: int) -> None:
        # A copy of what was read (the buffer is read into again): the client's
        # write, the framing and the recorder's copy all take bytes.
        self.data_received(self._read[:nbytes].tobytes())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        no_delay(transport)

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # bytes nobody asked for: the connection is not sane
            self.transport.close()
            return
        self.exchange.response_data(data)

    def eof_received(self) -> bool | None:
        return None  # close the transport (connection_lost follows)

    def connection_lost(self, exc: Exception | None) -> None:
        self.forwarder.forget(self)
        if self.exchange is not None:
            self.exchange.upstream_lost(exc)

    def pause_writing(self) -> None:  # the upstream reads the request slower than it comes
        if self.exchange is not None:
            self.exchange.client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.client.transport.resume_reading()


class Exchange:
    """One request and its response."""

    def __init__(self, client: Client, head: http1.Head, line: tuple[str, str, bytes],
                 framing: http1.Framing) -> None:
        method, target, version = line
        self.client = client
        forwarder = client.forwarder
        self.forwarder = forwarder
        self.head = head
        self.method = method
        self.version = version
        self.request_framing = framing
        self.request_done = framing.done
        path, _, query = target.partition("?")
        if path.startswith(("http://", "https://")):  # absolute form
            path = urlsplit(path).path or "/"
        self.path = path
        self.query = query
        self.found: Route | None = route(method, unquote(path))
        provider = self.found.provider if self.found else _other_provider(head.headers)
        self.provider = provider
        self.origin = forwarder.origins[provider]
        self.recorder = forwarder.recorder if self.found is not None else None
        self.call_id = forwarder.next_id()
        self.keep_alive = (version == b"HTTP/1.1"
                           and b"close" not in head.tokens(b"connection"))
        self.body_copy: list[bytes] = []
        self.announced = False  # the recorder has the request
        self.upstream: Upstream | None = None
        self.waiting: list[bytes] = []  # request bytes before the upstream is connected
        self.sent: list[bytes] | None = None  # what a reused connection was sent (a retry)
        self.response_buffer = bytearray()
        self.response: http1.Head | None = None
        self.response_framing: http1.Framing | None = None
        self.status = 0
        self.upstream_reusable = True
        self.answered = False  # the client has response bytes
        self.over = False

    # ------------------------------------------------------------------ the request

    def start(self, rest: bytes) -> None:
        self.waiting.append(self._upstream_head())
        if rest:
            self.request_data(rest)
            if self.over:  # a broken request body: refused
                return
        upstream = self.forwarder.idle(self.origin)
        if upstream is not None:
            self._attach(upstream, reused=True)  # head and body in one write
        else:
            self.forwarder.spawn(self._connect())

    def _upstream_head(self) -> bytes:
        dropped = _HOP | self.head.tokens(b"connection") | {b"host"}
        lines = [self.head.first, b"host: " + self.origin.netloc]
        lines += [line for line, (name, _) in zip(self.head.lines, self.head.headers,
                                                   strict=True) if name not in dropped]
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def request_data(self, data: bytes) -> None:
        if self.request_done:  # the next request, already sent (pipelined)
            self.client.buffer += data
            return
        try:
            payload, used = self.request_framing.feed(data)
        except http1.BadMessage as exc:
            self._fail_request(400, str(exc))
            return
        if used < len(data):
            self.client.buffer += data[used:]
            data = data[:used]
        if self.recorder is not None:
            self.body_copy += payload
        self._to_upstream(data)
        if self.request_framing.done:
            self.request_done = True

    def _to_upstream(self, data: bytes) -> None:
        if not data:
            return
        if self.upstream is None:
            self.waiting.append(data)
            return
        if self.sent is not None:
            self.sent.append(data)
        self.upstream.transport.write(data)

    def _hand_over_request(self) -> None:
        """The recorder's copy of the request, handed over once the answer starts (it
        records a call from its answer on: nothing waits on it before, and it is not
        woken while the client waits for the first byte)."""
        if self.recorder is None or self.announced:
            return
        self.announced = True
        self.recorder.put((REQUEST, self.call_id, self.found, self.method, self.path,
                           safe_query(self.query), safe_headers(self.head.headers)))
        # Whole unless the upstream answered before the client sent it all.
        self.recorder.put((BODY, self.call_id, b"".join(self.body_copy)))
        self.body_copy = []

    async def _connect(self) -> None:
        try:
            upstream = await self.forwarder.connect(self.origin)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            reason = str(exc) or type(exc).__name__
            self._bad_gateway(f"upstream {self.provider} unreachable: {reason}")
            return
        if self.over:  # the client left meanwhile
            self.forwarder.release(upstream)
            return
        self._attach(upstream, reused=False)

    def _attach(self, upstream: Upstream, *, reused: bool) -> None:
        self.upstream = upstream
        upstream.exchange = self
        # A kept-alive connection may have been closed by the upstream just now:
        # what it was sent is kept until the answer starts, to send again once.
        self.sent = list(self.waiting) if reused else None
        data, self.waiting = b"".join(self.waiting), []
        upstream.transport.write(data)

    # ------------------------------------------------------------------ the response

    def response_data(self, data: bytes) -> None:
        framing = self.response_framing
        if framing is None:
            self.response_buffer += data
            parsed = self._response_head()
            framing = self.response_framing
            if parsed is None or framing is None:
                return
            head, data = parsed
            if framing.done:  # no body (HEAD, 204, 304)
                self.client.transport.write(head)
                self._head_passed()
                self._end(None, reusable=not data)
                return
            # The head and the body bytes that came with it in one write.
            self.client.transport.write(head + data)
            self._head_passed()
            if not data:
                return
        else:
            # The client's bytes first: the copy and the framing come after.
            self.client.transport.write(data)
        try:
            payload, used = framing.feed(data)
        except http1.BadMessage as exc:
            self._end(f"upstream sent a broken body: {exc}", reusable=False)
            self.client.close()
            return
        if self.recorder is not None and payload:
            self.recorder.put((CHUNK, self.call_id,
                               payload[0] if len(payload) == 1 else b"".join(payload)))
        if framing.done:
            # Bytes after the end were passed on as a direct connection would; the
            # connection that sent them is not reused.
            self._end(None, reusable=used == len(data) and framing.reusable)

    def _response_head(self) -> tuple[bytes, bytes] | None:
        """Once the response head is whole: (the head for the client, the body bytes
        after it)."""
        buffer = self.response_buffer
        while True:
            end = http1.head_end(buffer)
            if end < 0:
                if len(buffer) > http1.MAX_HEAD:
                    self._bad_gateway("the upstream's response head is too large")
                return None
            raw, rest = bytes(buffer[:end]), bytes(buffer[end:])
            buffer.clear()
            try:
                head = http1.parse_head(raw)
                version, status = http1.status_line(head)
                framing = http1.body_framing(head, request=False, method=self.method,
                                             status=status)
            except http1.BadMessage as exc:
                self._bad_gateway(f"the upstream sent no HTTP answer: {exc}")
                return None
            if 100 <= status < 200 and status != 101:  # 100 Continue: passed on as is
                self.client.transport.write(raw)
                buffer += rest
                continue
            break
        self.sent = None
        self.status = status
        self.upstream_reusable = (version == b"HTTP/1.1"
                                  and b"close" not in head.tokens(b"connection"))
        self.keep_alive = self.keep_alive and framing.reusable  # until close: closed
        self.response = head
        self.response_framing = framing
        dropped = _HOP | head.tokens(b"connection")
        lines = [head.first, *(line for line, (name, _) in zip(head.lines, head.headers,
                                                               strict=True)
                               if name not in dropped)]
        if not self.keep_alive:
            lines.append(b"connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n", rest

    def _head_passed(self) -> None:
        """The client has the response head: the recorder gets the request body (whole
        once the upstream answered) and the response start."""
        self.answered = True
        if self.recorder is not None and self.response is not None:
            self._hand_over_request()
            self.recorder.put((RESPONSE, self.call_id, self.status,
                               safe_headers(self.response.headers)))

    # ------------------------------------------------------------------ the end

    def _end(self, error: str | None, *, reusable: bool) -> None:
        if self.over:
            return
        self.over = True
        if self.recorder is not None and self.announced:
            self.recorder.put((END, self.call_id, error))
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.exchange = None
            upstream.used += 1
            if (reusable and error is None and self.upstream_reusable
                    and self.request_done):
                self.forwarder.release(upstream)
            else:
                upstream.transport.close()
        if error is None:
            self.client.finished(self.keep_alive and self.request_done)

    def upstream_lost(self, exc: Exception | None) -> None:
        if self.over:
            return
        upstream = self.upstream
        if (self.response is None and self.sent is not None and upstream is not None
                and not self.response_buffer):
            # A reused connection the upstream had closed: send it all again, once.
            self.upstream, upstream.exchange = None, None
            self.waiting, self.sent = self.sent, None
            self.forwarder.spawn(self._connect())
            return
        if self.response is None:
            self._bad_gateway(f"upstream {self.provider} closed the connection before "
                              f"answering{f': {exc}' if exc else ''}")
            return
        if isinstance(self.response_framing, http1.UntilClose) and exc is None:
            self._end(None, reusable=False)
            self.client.close()
            return
        self._end(f"upstream broke the stream{f': {exc}' if exc else ''}", reusable=False)
        # The client sees the stream cut, as it would on a direct connection.
        self.client.transport.abort()

    def client_lost(self) -> None:
        if self.over:
            return
        reason = ("the client disconnected before the answer ended" if self.answered
                  else "the client disconnected before the upstream answered")
        self._end(reason, reusable=False)

    def stopped(self) -> None:
        self._end("the proxy stopped before the call ended", reusable=False)

    def pause_upstream(self, paused: bool) -> None:
        if self.upstream is not None:
            if paused:
                self.upstream.transport.pause_reading()
            else:
                self.upstream.transport.resume_reading()

    def _fail_request(self, status: int, message: str) -> None:
        self._end(message, reusable=False)
        if not self.answered:
            write_error(self.client.transport, status, message)
        self.client.close()

    def _bad_gateway(self, message: str) -> None:
        if self.recorder is not None and not self.answered:
            self._hand_over_request()
            self.recorder.put((RESPONSE, self.call_id, 502, {}))
        self._end(message, reusable=False)
        if not self.answered:
            self.answered = True
            write_error(self.client.transport, 502, f"convlog proxy: {message}")
        self.client.close()


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Nagle's algorithm off on a TCP connection: each chunk leaves as it is written.
    asyncio does it only where the socket's protocol number says TCP, which a
    socket made with protocol 0 (and every connection it accepts) does not."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def write_error(transport: asyncio.Transport, status: int, message: str) -> None:
    """A JSON error answer from the proxy itself (the upstream never answered)."""
    body = json.dumps({"type": "error", "error": {"type": "proxy_error",
                                                  "message": message}}).encode()
    reason = {400: b"Bad Request", 431: b"Request Header Fields Too Large",
              502: b"Bad Gateway"}.get(status, b"Error")
    transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                    % (status, reason, len(body), body))
