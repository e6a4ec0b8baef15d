"""The viewer's door, in a real browser: the host names it answers to, the size of what
it reads, what a fork request must hold, and where the write token may live.

Each test here failed before its fix (see the commit that added it).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser
from starlette.testclient import TestClient

from engine.store.base import Store
from projections.serve.app import create_app
from projections.serve.guard import MAX_BODY, allowed_hosts, host_name
from tests.support.browser import CHROMIUM_ARGS, LOOPBACK, find_chromium, serving
from tests.viewer.conftest import Sessions

TOKEN = "door-token-0123456789"
REBOUND = "rebound.example"  # a name whose DNS answer the attacker turned to 127.0.0.1


@pytest.fixture
def rebinding_browser(browser: Browser) -> Iterator[Browser]:
    """A chromium that resolves ``REBOUND`` to 127.0.0.1, as after a DNS rebinding."""
    other = browser.browser_type.launch(
        executable_path=find_chromium(), args=[
            *CHROMIUM_ARGS, f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"])
    try:
        yield other
    finally:
        other.close()


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def test_a_rebound_name_reads_nothing(rebinding_browser: Browser,
                                      viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with serving(create_app(store)) as base:
        page = rebinding_browser.new_page()
        port = port_of(base)
        # The attacker's page, now same-origin with the viewer, asks for every transcript.
        for path in ("/api/sessions", "/api/search?q=parser", "/"):
            answer = page.goto(f"http://{REBOUND}:{port}{path}")
            assert answer is not None
            assert answer.status == 421, path
            assert s.demo not in (page.content() or "")
        # The names the viewer is bound to still work.
        for name in ("127.0.0.1", "localhost"):
            answer = page.goto(f"http://{name}:{port}/api/sessions")
            assert answer is not None
            assert answer.status == 200
            assert s.demo in page.content()
        page.close()


def test_allowed_host_names() -> None:
    assert allowed_hosts(None) == {"127.0.0.1", "localhost", "::1"}
    assert "10.0.0.5" in allowed_hosts("10.0.0.5")
    assert "fe80::1" in allowed_hosts("fe80::1")
    assert host_name("[::1]:8000") == "::1"
    assert host_name("LocalHost:80") == "localhost"
    assert host_name("example.com") == "example.com"


def test_the_bound_host_and_nothing_else_is_answered(viewer_store: tuple[Store, Sessions]
                                                     ) -> None:
    store, _ = viewer_store
    bound = TestClient(create_app(store, host="192.0.2.7"), base_url="http://192.0.2.7:8000")
    assert bound.get("/api/sessions").status_code == 200
    assert bound.get("/api/sessions", headers={"host": "[::1]:8000"}).status_code == 200
    for host in ("evil.example", "192.0.2.8", "127.0.0.1.evil.example", ""):
        assert bound.get("/api/sessions", headers={"host": host}).status_code == 421, host
    # A write from a page on another origin is refused even with the right name.
    writer = TestClient(create_app(store, allow_writes=True, token=TOKEN), base_url=LOOPBACK)
    answer = writer.post("/api/sessions/x/fork", json={"seq": 1},
                         headers={"authorization": f"Bearer {TOKEN}",
                                  "origin": "http://evil.example"})
    assert answer.status_code == 403


def fetch(page: Any, url: str, body: str) -> dict[str, Any]:
    answer: dict[str, Any] = page.evaluate("""async ([url, body, token]) => {
        const r = await fetch(url, {method: 'POST', body: body,
            headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token}});
        return {status: r.status, body: await r.text()};
    }""", [url, body, TOKEN])
    return answer


def test_a_big_fork_request_is_refused_unread(browser: Browser,
                                              viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    before = {i.id for i in store.sessions()}
    with serving(create_app(store, allow_writes=True, token=TOKEN)) as base:
        page = browser.new_page()
        page.goto(base + "/")
        padding = " " * (MAX_BODY + 1)
        answer = fetch(page, f"/api/sessions/{s.demo}/fork", '{"seq": 3}' + padding)
        assert answer["status"] == 413
        assert "limited" in answer["body"]
        page.close()
    assert {i.id for i in store.sessions()} == before


def test_a_chunked_body_is_cut_off_at_the_limit(viewer_store: tuple[Store, Sessions]) -> None:
    """No Content-Length: the body is counted as it arrives and refused past the limit,
    long before a 100 MB body has been sent (socket buffers hold a few MB at most)."""
    store, s = viewer_store
    with serving(create_app(store, allow_writes=True, token=TOKEN)) as base:
        sock = socket.create_connection(("127.0.0.1", port_of(base)))
        sock.sendall((f"POST /api/sessions/{s.demo}/fork HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        chunk = b"%x\r\n%s\r\n" % (10_000, b" " * 10_000)
        sent, answer = 0, b""
        sock.settimeout(10)
        while sent < 100_000_000:
            ready, _, _ = select.select([sock], [], [], 0)
            if ready:
                answer = sock.recv(4096)
                break
            try:
                sock.sendall(chunk)
            except OSError:  # the server closed the connection: read its answer
                answer = sock.recv(4096)
                break
            sent += 10_000
        sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < 20_000_000


def _paced_upload(port: int, sid: str, framing: str, body: bytes) -> bytes:
    """A client that sends its body at a browser's pace (8 kB pieces, 5 ms apart) and
    reads the answer only after it has sent everything."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    sock.sendall((f"POST /api/sessions/{sid}/fork HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                  f"{framing}\r\n\r\n").encode())
    try:
        for at in range(0, len(body), 8192):
            sock.sendall(body[at:at + 8192])
            time.sleep(0.005)
        return sock.recv(4096)
    except (ConnectionResetError, BrokenPipeError) as exc:  # the 413 was lost
        return repr(exc).encode()
    finally:
        sock.close()


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_client_still_sending_a_too_big_body_reads_the_refusal(
        viewer_store: tuple[Store, Sessions], framing: str) -> None:
    """Closing while the client still sends resets the connection, and the reset throws
    away the unread 413: a browser said "Failed to fetch" (a flaky CI failure of
    test_a_big_fork_request_is_refused_unread). A moderately big body is read and
    dropped first, so the refusal arrives every time. (The chunked case passed before
    the fix too; it holds the same promise on the other path.)"""
    store, s = viewer_store
    payload = b'{"seq": 3}' + b" " * (MAX_BODY * 3)
    if framing == "chunked":
        body = b"".join(b"%x\r\n%s\r\n" % (len(payload[i:i + 8000]), payload[i:i + 8000])
                        for i in range(0, len(payload), 8000)) + b"0\r\n\r\n"
        header = "Transfer-Encoding: chunked"
    else:
        body, header = payload, f"Content-Length: {len(payload)}"
    with serving(create_app(store, allow_writes=True, token=TOKEN)) as base:
        answers = [_paced_upload(port_of(base), s.demo, header, body) for _ in range(3)]
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


@pytest.mark.parametrize("seq", ["true", "false", "1.0", '"3"', "null"])
def test_a_fork_at_a_seq_that_is_not_an_integer_is_refused(
        browser: Browser, viewer_store: tuple[Store, Sessions], seq: str) -> None:
    store, s = viewer_store
    before = {i.id for i in store.sessions()}
    with serving(create_app(store, allow_writes=True, token=TOKEN)) as base:
        page = browser.new_page()
        page.goto(base + "/")
        answer = fetch(page, f"/api/sessions/{s.demo}/fork", '{"seq": ' + seq + "}")
        assert answer["status"] == 400, answer
        assert "seq must be an integer" in answer["body"]
        page.close()
    assert {i.id for i in store.sessions()} == before


def test_the_token_leaves_the_address_bar_and_still_forks(
        browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    before = {i.id for i in store.sessions()}
    with serving(create_app(store, allow_writes=True, token=TOKEN)) as base:
        page = browser.new_page()
        page.goto(f"{base}/?session={s.demo}&seq=12#token={TOKEN}")
        page.wait_for_selector('body[data-shown-seq="12"]')
        page.wait_for_selector("#forkbtn:not([hidden])")

        def leaks() -> list[str]:
            found: list[str] = page.evaluate("""(t) => [location.href,
                ...[...document.querySelectorAll('a[href]')].map(a => a.href)]
                .filter(u => u.includes(t))""", TOKEN)
            return found

        assert leaks() == []
        page.keyboard.press("ArrowRight")  # a seq move rewrites the address
        page.wait_for_selector('body[data-shown-seq="13"]')
        assert leaks() == []
        page.reload()  # the tab keeps it for its own use, out of the address
        page.wait_for_selector('body[data-shown-seq="13"]')
        assert leaks() == []
        page.click("#forkbtn")
        page.wait_for_function("n => document.querySelectorAll('.sess').length > n",
                               arg=len(before))
        assert len({i.id for i in store.sessions()} - before) == 1
        assert leaks() == []
        page.close()
