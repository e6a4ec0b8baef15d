"""What keeps the forwarding path free of pauses that are not its own: nothing is
handed to the recorder before the client's bytes are on their way, the forwarder's
process never touches the store, the forwarding path makes no reference cycles
(so the collector can be kept away from it), the recorder runs as a batch
process, and a named upstream is connected before the first call."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.proxy import forward as fw
from engine.proxy.process import RecorderProcess
from engine.proxy.quiet import YOUNG_THRESHOLD, _may_leave_idle, may_leave_idle
from engine.proxy.recorder import CHUNK, END, REQUEST, RESPONSE
from tests.proxy import scripts
from tests.proxy.clients import ROOT
from tests.proxy.servers import Reply, Upstream, running, sse
from tests.proxy.test_forwarding import ANSWER, BODY, RawUpstream, _chunked_sse, _through
from tests.proxy.verbs import verb

REQUEST_BODY = b'{"model":"m","max_tokens":5,"stream":true,"messages":[]}'
REQUEST_BYTES = (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
                 b"\r\ncontent-length: %d\r\nx-api-key: k\r\n\r\n%s"
                 % (len(REQUEST_BODY), REQUEST_BODY))
RESPONSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"transfer-encoding: chunked\r\n\r\n")
RESPONSE_CHUNKS = [b"%x\r\n%s\r\n" % (len(e), e) for e in ANSWER] + [b"0\r\n\r\n"]


class Wire:
    """A transport that keeps what is written to it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Watching:
    """A sink noting, at each job, how many bytes the upstream and the client had."""

    def __init__(self, client: Wire, upstream: Wire) -> None:
        self.client, self.upstream = client, upstream
        self.jobs: list[tuple[int, int, int]] = []  # (kind, upstream bytes, client bytes)

    def put(self, job: tuple[Any, ...]) -> None:
        self.jobs.append((job[0], sum(map(len, self.upstream.written)),
                          sum(map(len, self.client.written))))


def _exchanges(sink: Any, calls: int) -> tuple[Wire, Wire]:
    """``calls`` whole exchanges through a forwarder on in-memory transports, over one
    kept-alive client connection and one upstream connection."""
    forwarder = fw.Forwarder(sink, {"anthropic": "http://127.0.0.1:9"})
    client_wire, upstream_wire = Wire(), Wire()
    if isinstance(sink, Watching):
        sink.client, sink.upstream = client_wire, upstream_wire
    upstream = fw.Upstream(forwarder, ("127.0.0.1", 9, False))
    upstream.connection_made(upstream_wire)  # type: ignore[arg-type]
    forwarder.release(upstream)
    client = fw.Client(forwarder)
    client.connection_made(client_wire)  # type: ignore[arg-type]
    for _ in range(calls):
        client.data_received(REQUEST_BYTES)
        upstream.data_received(RESPONSE_HEAD + RESPONSE_CHUNKS[0])
        for chunk in RESPONSE_CHUNKS[1:]:
            upstream.data_received(chunk)
        assert client.exchange is None  # over, the connections kept
    return client_wire, upstream_wire


def test_the_recorder_gets_each_copy_after_its_bytes_are_on_their_way() -> None:
    sink = Watching(Wire(), Wire())
    client_wire, upstream_wire = _exchanges(sink, 1)
    request = sum(map(len, upstream_wire.written))
    assert request >= len(REQUEST_BODY)
    kinds = [kind for kind, _, _ in sink.jobs]
    assert kinds[0] == REQUEST
    assert RESPONSE in kinds
    assert kinds[-1] == END
    head = len(RESPONSE_HEAD) + len(RESPONSE_CHUNKS[0])
    for _, sent_up, sent_down in sink.jobs:
        # The whole request was with the upstream, and the response head with the
        # client, before the recorder heard of the call.
        assert sent_up == request
        assert sent_down >= head
    # The i-th chunk's copy is handed over once the client has that chunk.
    chunk_jobs = [down for kind, _, down in sink.jobs if kind == CHUNK]
    assert len(chunk_jobs) == len(RESPONSE_CHUNKS) - 1  # the last one has no payload
    for i, down in enumerate(chunk_jobs):
        assert down >= head + sum(map(len, RESPONSE_CHUNKS[1:i + 1]))
    assert b"".join(client_wire.written) == RESPONSE_HEAD + b"".join(RESPONSE_CHUNKS)


def test_the_forwarding_path_makes_no_reference_cycles() -> None:
    # What lets the forwarder make young collections rare (engine.proxy.quiet): a
    # call leaves no garbage that only the cyclic collector could free.
    class Sink:
        def put(self, job: tuple[Any, ...]) -> None: ...

    _exchanges(Sink(), 2)  # warm: caches and lazy imports made
    gc.collect()
    flags = gc.get_debug()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _exchanges(Sink(), 50)
        found = gc.collect()
        leftovers = [type(o).__name__ for o in gc.garbage[:20]]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()
    # The forwarder, its client, upstream and exchanges point at each other while
    # the connections live; those few objects are the whole of it.
    assert found <= 60, leftovers


def test_the_forwarder_settles_its_heap_after_start_up() -> None:
    code = ("import gc; from engine.proxy.quiet import settle_heap; settle_heap(); "
            "print(gc.get_freeze_count() > 1000, gc.get_threshold()[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", str(YOUNG_THRESHOLD)]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE here")
def test_the_recorder_child_is_an_idle_process(tmp_path: Path) -> None:
    recorder = RecorderProcess(f"sqlite:///{tmp_path / 'p.db'}")
    recorder.start()
    try:
        assert recorder.pid is not None
        expected = os.SCHED_IDLE if _may_leave_idle() else os.SCHED_BATCH
        assert os.sched_getscheduler(recorder.pid) == expected
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the forwarder's is not
    finally:
        recorder.stop()


def test_an_idle_recorder_only_where_it_may_leave_idle_again() -> None:
    """An ordinary user's process (no CAP_SYS_NICE, the default RLIMIT_NICE of 0)
    could never be moved from SCHED_IDLE back to a normal policy: a recorder that
    falls behind could not be given a full share, so it stays a batch process."""
    inf = -1
    assert not may_leave_idle(0, 0, 0, infinity=inf)  # an ordinary user
    assert may_leave_idle(0, 0, 1 << 23, infinity=inf)  # CAP_SYS_NICE
    assert may_leave_idle(20, 0, 0, infinity=inf)  # RLIMIT_NICE allows nice 0
    assert not may_leave_idle(19, 0, 0, infinity=inf)
    assert may_leave_idle(1, 19, 0, infinity=inf)  # a process at nice 19
    assert may_leave_idle(inf, 0, 0, infinity=inf)


def _wait(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_named_upstream_is_connected_before_the_first_call(tmp_path: Path) -> None:
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False))
    with _through(tmp_path, upstream, preconnect=True) as (proxy, recorder, _):
        assert _wait(lambda: upstream.connections == 1)
        assert not upstream.requests
        with httpx.Client() as client:
            for _ in range(2):
                got = client.post(f"{proxy}/v1/messages", json=BODY)
                assert got.content == b"".join(ANSWER)
        assert upstream.connections == 1  # the first call had it ready
        assert recorder.sync()


def test_an_unreachable_named_upstream_is_the_first_calls_502(tmp_path: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    upstream = RawUpstream(lambda head, body: ([], True))
    upstream.url = f"http://127.0.0.1:{port}"
    with _through(tmp_path, upstream, preconnect=True) as (proxy, recorder, _):
        got = httpx.post(f"{proxy}/v1/messages", json=BODY)
        assert got.status_code == 502
        assert "unreachable" in got.json()["error"]["message"]
        assert recorder.sync()


def _open_files(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return found


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
            for c in (task / "children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="no /proc here")
def test_the_forwarders_process_never_opens_the_store(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    upstream = Upstream([Reply(sse(scripts.anthropic_text("on the side")))] * 2)
    with running(upstream) as origin, \
            verb("proxy", "--store", f"sqlite:///{db}", "--listen", "127.0.0.1:0",
                 "--upstream", f"anthropic={origin}") as (proxy, proc):
        for _ in range(2):
            got = httpx.post(f"{proxy}/v1/messages", json=BODY, timeout=30)
            assert got.status_code == 200
        children = _children(proc.pid)  # the recorder (and multiprocessing's helper)
        assert _wait(lambda: any(str(db) in _open_files(c) for c in children))
        assert not any(name.startswith(str(db)) for name in _open_files(proc.pid))


def _no_delay(sock: Any) -> bool:
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def test_every_connection_of_the_proxy_sends_each_write_at_once(tmp_path: Path) -> None:
    # With Nagle's algorithm on, a chunk written while the previous one waited for
    # its ACK stayed in the proxy until the client's delayed ACK (40 ms): the
    # listening socket was made with protocol 0, so asyncio left Nagle on for every
    # connection it accepted. Both sides of the forwarder now turn it off.
    upstream = RawUpstream(lambda head, body: (_chunked_sse(ANSWER), False))
    with _through(tmp_path, upstream) as (proxy, recorder, _), httpx.Client() as client:
        assert client.post(f"{proxy}/v1/messages", json=BODY).status_code == 200
        [forwarder] = recorder.forwarders
        # The forwarder's thread ends the exchange a moment after the client has it.
        assert _wait(lambda: any(forwarder._idle.values()))
        [accepted] = forwarder.clients
        assert _no_delay(accepted.transport.get_extra_info("socket"))
        [[kept]] = forwarder._idle.values()
        assert _no_delay(kept.transport.get_extra_info("socket"))
        assert recorder.sync()


def test_the_listening_socket_says_tcp_so_asyncio_turns_nagle_off() -> None:
    # What the replay server (uvicorn on the same bound socket) relies on.
    import asyncio  # noqa: PLC0415

    from engine.proxy.listen import bind  # noqa: PLC0415

    sock = bind("127.0.0.1", 0)
    seen: list[bool] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(_no_delay(writer.get_extra_info("socket")))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname())
        while not seen:
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert seen == [True]
