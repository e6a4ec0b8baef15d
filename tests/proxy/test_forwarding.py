"""The forwarder on the wire, against an upstream written on raw sockets: connections
kept alive and reused on both sides, an upstream that closed a kept-alive
connection, chunked request bodies, an unreachable or breaking upstream."""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from engine import events as ev
from engine.proxy.context import full_requests
from engine.store import open_store
from tests.proxy import scripts
from tests.proxy.servers import SettlingRecorder, proxying, sse

# (request head, request body) -> (the bytes to answer, close the connection after)
Answer = Callable[[bytes, bytes], tuple[list[bytes], bool]]


def _read_request(conn: socket.socket, buffered: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(head, body, what follows) of the next request, or None at the end."""
    data = buffered
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return None
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = {k.strip().lower(): v.strip() for k, _, v in
             (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    if b"chunked" in lines.get(b"transfer-encoding", b""):
        while not rest.endswith(b"0\r\n\r\n"):
            rest += conn.recv(65536)
        body, i = b"", 0
        while True:
            j = rest.index(b"\r\n", i)
            size = int(rest[i:j], 16)
            if size == 0:
                return head, body, b""
            body += rest[j + 2:j + 2 + size]
            i = j + 2 + size + 2
    length = int(lines.get(b"content-length", b"0"))
    while len(rest) < length:
        rest += conn.recv(65536)
    return head, rest[:length], rest[length:]


class RawUpstream:
    """Answers each request with ``answer``; counts connections and logs requests."""

    def __init__(self, answer: Answer, per_connection: int = 0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        # Answer this many requests on a connection, then close it on the next one
        # unanswered (an upstream whose keep-alive timeout ran out just then).
        self.per_connection = per_connection
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):  # the proxy refused the certificate
                conn.close()
                return
        buffered, served = b"", 0
        with conn:
            while True:
                got = _read_request(conn, buffered)
                if got is None:
                    return
                head, body, buffered = got
                if self.per_connection and served == self.per_connection:
                    return
                served += 1
                self.requests.append((head, body))
                out, close = self.answer(head, body)
                for piece in out:
                    conn.sendall(piece)
                if close:
                    return


def _chunked_sse(events: list[bytes]) -> list[bytes]:
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    return [head, *(b"%x\r\n%s\r\n" % (len(e), e) for e in events), b"0\r\n\r\n"]


ANSWER = sse(scripts.anthropic_text("kept alive"))
BODY = {"model": "m", "max_tokens": 5, "stream": True,
        "messages": [{"role": "user", "content": "hi"}]}


def _recorded_deltas(url: str) -> list[str]:
    store = open_store(url, create=False)
    try:
        return [e.delta for s in store.sessions() for e in store.read(s.id)
                if isinstance(e, ev.TextDelta)]
    finally:
        store.close()


@contextmanager
def _through(tmp_path: Path, upstream: RawUpstream, tls: ssl.SSLContext | None = None,
             *, preconnect: bool = False) -> Iterator[tuple[str, SettlingRecorder, str]]:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    recorder = SettlingRecorder(url)
    recorder.start()
    try:
        with proxying(recorder, {"anthropic": upstream.url}, tls=tls,
                      preconnect=preconnect) as proxy:
            yield proxy, recorder, url
    finally:
        recorder.sync()
        recorder.stop()
        upstream.sock.close()


def test_connections_are_kept_alive_and_reused_on_both_sides(tmp_path: Path) -> None:
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False))
    with _through(tmp_path, upstream) as (proxy, recorder, _), httpx.Client() as client:
        for _ in range(3):
            got = client.post(f"{proxy}/v1/messages", json=BODY)
            assert got.content == b"".join(ANSWER)
        assert upstream.connections == 1
        assert recorder.sync()
        assert recorder.calls == 3
    # The upstream got the client's head with its own host, and no hop-by-hop header.
    head = upstream.requests[0][0].lower()
    assert f"host: {upstream.url.split('//')[1]}".encode() in head
    assert b"connection:" not in head


def test_an_upstream_that_closed_a_kept_alive_connection_is_asked_again(
        tmp_path: Path) -> None:
    # Closes a connection when its second request comes, unanswered: the proxy's
    # kept-alive connection died under the request, which goes out again on a new one.
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False),
                           per_connection=1)
    with _through(tmp_path, upstream) as (proxy, recorder, url), httpx.Client() as client:
        for _ in range(3):
            assert client.post(f"{proxy}/v1/messages", json=BODY).content == b"".join(ANSWER)
        assert recorder.sync()
    assert len(upstream.requests) == 3
    assert upstream.connections == 3
    texts = _recorded_deltas(url)
    assert "".join(texts) == "kept alive" * 3


def test_a_chunked_request_body_passes_through_and_is_recorded(tmp_path: Path) -> None:
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False))
    payload = json.dumps({**BODY, "system": "chunked " * 500}).encode()

    def pieces() -> Iterator[bytes]:
        for i in range(0, len(payload), 1000):
            yield payload[i:i + 1000]

    with _through(tmp_path, upstream) as (proxy, recorder, url):
        got = httpx.post(f"{proxy}/v1/messages", content=pieces(),
                         headers={"content-type": "application/json"})
        assert got.content == b"".join(ANSWER)
        assert b"transfer-encoding: chunked" in upstream.requests[0][0].lower()
        assert upstream.requests[0][1] == payload
        assert recorder.sync()
    store = open_store(url, create=False)
    try:
        [session] = store.sessions()
        [record] = full_requests(list(store.read(session.id))).values()
    finally:
        store.close()
    assert record["request"]["system"] == "chunked " * 500


def test_an_unreachable_upstream_is_a_502_and_a_recorded_error(tmp_path: Path) -> None:
    upstream = RawUpstream(lambda head, body: ([], True))
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        upstream.url = f"http://127.0.0.1:{free.getsockname()[1]}"
    with _through(tmp_path, upstream) as (proxy, recorder, url):
        got = httpx.post(f"{proxy}/v1/messages", json=BODY)
        assert got.status_code == 502
        assert "unreachable" in got.json()["error"]["message"]
        assert recorder.sync()
    store = open_store(url, create=False)
    try:
        errors = [e.error for s in store.sessions() for e in store.read(s.id)
                  if isinstance(e, ev.MessageCompleted) and e.error is not None]
    finally:
        store.close()
    assert [e.status_code for e in errors] == [502]


def test_an_upstream_that_breaks_mid_stream_cuts_the_client_too(tmp_path: Path) -> None:
    whole = _chunked_sse(ANSWER)
    upstream = RawUpstream(lambda head, body: (whole[:3], True))  # head and two events
    with _through(tmp_path, upstream) as (proxy, recorder, url):
        received = b""
        try:
            with httpx.stream("POST", f"{proxy}/v1/messages", json=BODY) as got:
                for chunk in got.iter_raw():
                    received += chunk
            broken = False
        except httpx.RemoteProtocolError:
            broken = True
        assert broken  # as on a direct connection: the answer did not end
        assert received == ANSWER[0] + ANSWER[1]
        assert recorder.sync()
    store = open_store(url, create=False)
    try:
        ended = [e for s in store.sessions() for e in store.read(s.id)
                 if isinstance(e, ev.MessageCompleted) and e.error is not None]
    finally:
        store.close()
    assert ended
    assert "upstream broke the stream" in ended[-1].error.message  # type: ignore[union-attr]


def test_a_length_framed_answer_and_the_next_request_on_one_connection(
        tmp_path: Path) -> None:
    whole = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                        "model": "m", "content": [{"type": "text", "text": "whole"}],
                        "stop_reason": "end_turn", "stop_sequence": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
    answer = [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d"
              b"\r\n\r\n" % len(whole), whole[:10], whole[10:]]
    upstream = RawUpstream(lambda head, body: (answer, False))
    with _through(tmp_path, upstream) as (proxy, _, _url), \
            socket.create_connection(("127.0.0.1", int(proxy.rsplit(":", 1)[1]))) as sock:
        request = json.dumps({**BODY, "stream": False}).encode()
        raw = (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
               % (len(request), request))
        sock.sendall(raw + raw)  # two requests at once (pipelined)
        got = b""
        while got.count(whole) < 2:
            more = sock.recv(65536)
            assert more
            got += more
    first, second = got.split(whole)[:2]
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length" in first
    assert second.startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(upstream.requests) == 2


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made by the openssl command)."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("the openssl command is missing in CI")
        pytest.skip("the openssl command is missing")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True,
                   capture_output=True, timeout=60)
    return cert, key


def test_an_https_upstream_is_reached_with_its_certificate_checked(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False), tls=server)
    trusting = ssl.create_default_context(cafile=str(cert))
    with _through(tmp_path, upstream, tls=trusting) as (proxy, _rec, _), \
            httpx.Client() as client:
        for _ in range(2):
            assert client.post(f"{proxy}/v1/messages", json=BODY).content == b"".join(ANSWER)
        assert upstream.connections == 1  # kept alive over TLS too
    # With the default roots the self-signed upstream is refused: the check is on.
    other = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False), tls=server)
    with _through(tmp_path, other) as (proxy, _, _url):
        got = httpx.post(f"{proxy}/v1/messages", json=BODY)
    assert got.status_code == 502
    assert "CERTIFICATE_VERIFY_FAILED" in got.json()["error"]["message"]


def test_an_answer_that_ends_when_the_upstream_closes(tmp_path: Path) -> None:
    """No length and no chunks (an HTTP/1.0-style answer): the body is what comes
    until the upstream closes, and the client's connection closes after it too."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    upstream = RawUpstream(lambda head_, body: ([head, *ANSWER], True))
    with _through(tmp_path, upstream) as (proxy, recorder, url), httpx.Client() as client:
        got = client.post(f"{proxy}/v1/messages", json=BODY)
        assert got.content == b"".join(ANSWER)
        assert got.headers["connection"] == "close"
        assert client.post(f"{proxy}/v1/messages", json=BODY).content == b"".join(ANSWER)
        assert recorder.sync()
    assert upstream.connections == 2  # not reused: its end was the answer's end
    texts = _recorded_deltas(url)
    assert "".join(texts) == "kept alive" * 2
