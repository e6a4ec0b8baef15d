"""Proxy benchmark: the latency ``convlog proxy`` adds to a streamed model call.

Usage (from the repository root)::

    .venv/bin/python benchmarks/proxy.py                 # 20 calls x 200 chunks each way
    .venv/bin/python benchmarks/proxy.py --calls 5 --chunks 100

One run, three processes: a local upstream that streams an Anthropic Messages
answer (one text delta every ``--interval`` ms, each stamped with the
monotonic clock at the moment the upstream writes it), ``convlog proxy``
recording into a SQLite store in front of it, and this client. Calls alternate
between the upstream directly and through the proxy, so both see the same
machine load. For each call the client measures:

- **time to first byte**: from sending the request to the first byte of the
  answer;
- **per-chunk delay**: for each delta, the time it arrived minus the time the
  upstream wrote it (CLOCK_MONOTONIC is shared by the processes of a machine).

It prints p50 and p99 of each, direct and proxied, and the difference (what the
proxy adds). The target is an added p99 of at most 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _event(kind: str, data: dict[str, object]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def _serve(port_out: multiprocessing.Queue[int], chunks: int, interval: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return  # the client closed the connection
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")

            def send(data: bytes) -> None:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))

            send(_event("message_start", {"type": "message_start", "message": {
                "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
                "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}) +
                _event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
            await writer.drain()
            for _ in range(chunks):
                await asyncio.sleep(interval)
                stamp = time.monotonic_ns()
                send(_event("content_block_delta", {
                    "type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": f"<{stamp}>"}}))
                await writer.drain()
            send(_event("content_block_stop", {"type": "content_block_stop", "index": 0}) +
                 _event("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": "end_turn"},
                                          "usage": {"output_tokens": chunks}}) +
                 _event("message_stop", {"type": "message_stop"}))
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port_out.put(server.sockets[0].getsockname()[1])
    await server.serve_forever()


def _upstream(port_out: multiprocessing.Queue[int], chunks: int, interval: float) -> None:
    asyncio.run(_serve(port_out, chunks, interval))


def _call(port: int, body: bytes, prefix: str) -> tuple[float, list[float]]:
    """(time to first byte, each delta's delay), in ms, over a raw keep-alive-free socket."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = (f"POST {prefix}/v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n"
               f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
               "connection: close\r\n\r\n").encode() + body
    start = time.monotonic_ns()
    sock.sendall(request)
    first: int | None = None
    delays: list[float] = []
    pending = b""
    while True:
        data = sock.recv(65536)
        now = time.monotonic_ns()
        if not data:
            break
        if first is None:
            first = now
        pending += data
        while b"<" in pending and b">" in pending[pending.index(b"<"):]:
            at = pending.index(b"<")
            end = pending.index(b">", at)
            delays.append((now - int(pending[at + 1:end])) / 1e6)
            pending = pending[end + 1:]
        if b"message_stop" in pending:
            break
    sock.close()
    return ((first or start) - start) / 1e6, delays


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="calls each way")
    parser.add_argument("--chunks", type=int, default=200, help="deltas per call")
    parser.add_argument("--interval", type=float, default=2.0, help="ms between deltas")
    args = parser.parse_args()
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    upstream = multiprocessing.Process(target=_upstream, daemon=True,
                                       args=(ports, args.chunks, args.interval / 1000))
    upstream.start()
    port = ports.get(timeout=30)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "engine", "proxy", "--store",
             f"sqlite:///{Path(tmp) / 'bench.db'}", "--listen", "127.0.0.1:0",
             "--upstream", f"anthropic=http://127.0.0.1:{port}"]
        proxy = subprocess.Popen(
            cmd,
            cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ})
        assert proxy.stdout is not None
        proxy_port = int(proxy.stdout.readline().rsplit(":", 1)[1].split()[0].rstrip("/"))
        body = json.dumps({"model": "bench", "max_tokens": 10, "stream": True,
                           "messages": [{"role": "user", "content": "go"}]}).encode()
        results: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []),
                                                               "proxied": ([], [])}
        _call(proxy_port, body, "")  # warm up both paths
        _call(port, body, "")
        for _ in range(args.calls):
            for name, target in (("direct", port), ("proxied", proxy_port)):
                ttfb, delays = _call(target, body, "")
                results[name][0].append(ttfb)
                results[name][1].extend(delays)
        proxy.terminate()
        proxy.wait(30)
    upstream.terminate()
    print(f"{args.calls} calls each way, {args.chunks} deltas per call, "
          f"{args.interval} ms apart")
    print(f"{'':24}{'direct':>10}{'proxied':>10}{'added':>10}")
    for label, index in (("time to first byte", 0), ("per-chunk delay", 1)):
        for q in (0.5, 0.99):
            direct = _percentile(results["direct"][index], q)
            proxied = _percentile(results["proxied"][index], q)
            print(f"{label + f' p{int(q * 100)}':24}{direct:10.3f}{proxied:10.3f}"
                  f"{proxied - direct:10.3f}  ms")


if __name__ == "__main__":
    main()
