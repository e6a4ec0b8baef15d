"""Proxy benchmark: the latency ``convlog proxy`` adds to a streamed model call.

Usage (from the repository root)::

    .venv/bin/python benchmarks/proxy.py                 # 20 calls x 200 chunks each way
    .venv/bin/python benchmarks/proxy.py --calls 5 --chunks 100
    .venv/bin/python benchmarks/proxy.py --new-connections   # a connection per call

One run, four processes: a local upstream that streams an Anthropic Messages
answer (one text delta every ``--interval`` ms, each stamped with the monotonic
clock at the moment the upstream writes it), ``convlog proxy`` (its forwarder,
and its recorder child writing into a SQLite store) in front of it, and this
client. Calls alternate between the upstream directly and through the proxy, so
both see the same machine load; by default each side keeps one connection
alive across its calls, as the agent CLIs do (``--new-connections``: one per
call). For each call the client measures:

- **time to first byte**: from sending the request to the first byte of the
  answer;
- **per-chunk delay**: for each delta, the time it arrived minus the time the
  upstream wrote it (CLOCK_MONOTONIC is shared by the processes of a machine).

It prints p50 and p99 of each, direct and proxied, and the difference (what the
proxy adds; the target is at most 1 ms at p99), the CPU time of the forwarder
and of the recorder, and the load average before and after the run (on a
shared machine the tail is the scheduler's: read the figures with the load).
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
TICK = os.sysconf("SC_CLK_TCK")


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


class Caller:
    """Calls one target, over one kept-alive connection (or a new one per call)."""

    def __init__(self, port: int, *, fresh: bool) -> None:
        self.port = port
        self.fresh = fresh
        self.sock: socket.socket | None = None

    def call(self, body: bytes) -> tuple[float, list[float]]:
        """(time to first byte, each delta's delay), in ms."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = self.sock
        request = (f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                   f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
                   f"{'connection: close' if self.fresh else 'x-bench: 1'}\r\n\r\n"
                   ).encode() + body
        start = time.monotonic_ns()
        sock.sendall(request)
        first: int | None = None
        delays: list[float] = []
        pending = b""
        while True:
            data = sock.recv(65536)
            now = time.monotonic_ns()
            if not data:
                raise RuntimeError("the connection closed mid-answer")
            if first is None:
                first = now
            pending += data
            while b"<" in pending and b">" in pending[pending.index(b"<"):]:
                at = pending.index(b"<")
                end = pending.index(b">", at)
                delays.append((now - int(pending[at + 1:end])) / 1e6)
                pending = pending[end + 1:]
            if b"message_stop" in pending and pending.endswith(b"\r\n0\r\n\r\n"):
                break
        if self.fresh:
            sock.close()
            self.sock = None
        return (first - start) / 1e6, delays


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(c) for c in text]
    return found


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="calls each way")
    parser.add_argument("--chunks", type=int, default=200, help="deltas per call")
    parser.add_argument("--interval", type=float, default=2.0, help="ms between deltas")
    parser.add_argument("--new-connections", action="store_true",
                        help="a new connection per call (default: one kept alive per side)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    upstream = multiprocessing.Process(target=_upstream, daemon=True,
                                       args=(ports, args.chunks, args.interval / 1000))
    upstream.start()
    port = ports.get(timeout=30)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "engine", "proxy", "--store",
               f"sqlite:///{Path(tmp) / 'bench.db'}", "--listen", "127.0.0.1:0",
               "--upstream", f"anthropic=http://127.0.0.1:{port}"]
        proxy = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                 env={**os.environ})
        assert proxy.stdout is not None
        proxy_port = int(proxy.stdout.readline().rsplit(":", 1)[1].split()[0].rstrip("/"))
        recorder_pids = _children(proxy.pid)
        body = json.dumps({"model": "bench", "max_tokens": 10, "stream": True,
                           "messages": [{"role": "user", "content": "go"}]}).encode()
        callers = {"direct": Caller(port, fresh=args.new_connections),
                   "proxied": Caller(proxy_port, fresh=args.new_connections)}
        results: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []),
                                                               "proxied": ([], [])}
        for caller in callers.values():  # warm up both paths
            caller.call(body)
        cpu_before = {p: _cpu_seconds(p) for p in [proxy.pid, *recorder_pids]}
        wall = time.monotonic()
        for _ in range(args.calls):
            for name, caller in callers.items():
                ttfb, delays = caller.call(body)
                results[name][0].append(ttfb)
                results[name][1].extend(delays)
        wall = time.monotonic() - wall
        cpu = {p: _cpu_seconds(p) - cpu_before[p] for p in cpu_before}
        for caller in callers.values():
            if caller.sock is not None:
                caller.sock.close()
        proxy.terminate()
        proxy.wait(60)
    upstream.terminate()
    load_after = os.getloadavg()
    mode = "a new connection per call" if args.new_connections else "kept-alive connections"
    print(f"{args.calls} calls each way ({mode}), {args.chunks} deltas per call, "
          f"{args.interval} ms apart; {os.cpu_count()} cores")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} (1, 5 min)")
    print(f"{'':24}{'direct':>10}{'proxied':>10}{'added':>10}")
    for label, index in (("time to first byte", 0), ("per-chunk delay", 1)):
        for q in (0.5, 0.99):
            direct = _percentile(results["direct"][index], q)
            proxied = _percentile(results["proxied"][index], q)
            print(f"{label + f' p{int(q * 100)}':24}{direct:10.3f}{proxied:10.3f}"
                  f"{proxied - direct:10.3f}  ms")
    chunks = len(results["proxied"][1])
    forwarder = cpu[proxy.pid]
    recorder = sum(cpu[p] for p in recorder_pids)
    print(f"CPU over {wall:.1f} s: forwarder {forwarder:.2f} s "
          f"({forwarder / chunks * 1e6:.0f} us a chunk), recorder {recorder:.2f} s "
          f"({recorder / chunks * 1e6:.0f} us a chunk), {chunks} proxied chunks")


if __name__ == "__main__":
    main()
