"""Proxy benchmark: the latency ``convlog proxy`` adds to a streamed model call.

Usage (from the repository root)::

    .venv/bin/python benchmarks/proxy.py             # 3 x 240 calls each way, 20 deltas each
    .venv/bin/python benchmarks/proxy.py --repeats 5 --calls 400 --chunks 10
    .venv/bin/python benchmarks/proxy.py --new-connections   # a connection per call

One run, four processes: a local upstream that streams an Anthropic Messages
answer (one text delta every ``--interval`` ms, each stamped with the monotonic
clock at the moment the upstream writes it), ``convlog proxy`` (its forwarder,
and its recorder child writing into a SQLite store) in front of it, and this
client. For each call the client measures:

- **time to first byte**: from sending the request to the first byte of the
  answer;
- **per-chunk delay**: for each delta, the time it arrived minus the time the
  upstream wrote it (CLOCK_MONOTONIC is shared by the processes of a machine).

Made for a noisy shared machine:

- direct and proxied calls are interleaved call by call, in the order
  D P P D D P P D ... (so that whatever load comes hits both alike, and the
  recorder's work after a proxied call falls as often on a proxied call as on a
  direct one);
- the upstream and the client keep the garbage collector out of the way as the
  forwarder does (``engine.proxy.quiet``), so that their pauses do not blur
  the comparison;
- the first ``--warmup`` calls each way (the connections opened, the code paths
  warmed) are excluded from the figures and reported apart;
- each repetition prints p50, p95 and p99 of each side and the added latency
  (proxied minus direct, quantile by quantile), the direct p99 beside it, and
  the load average around it; the last lines give the spread of the added
  figures over the repetitions (min, median, max). The target is at most 1 ms
  added at p99, to the first byte and per chunk;
- each repetition also prints the quantiles of *paired* differences: each
  proxied call minus the direct call next to it (P-D), and, as the method's own
  floor, each direct call minus the direct call next to it (D-D: no proxy in
  it, so its p99 is what neighbouring calls differ by on this machine at that
  load).

By default each side keeps one connection alive across its calls, as the agent
CLIs do (``--new-connections``: one per call). The CPU time of the forwarder and
of the recorder per proxied chunk is printed too.

**The proxy's own time per chunk.** On a loaded machine the end-to-end
quantiles (and their D-D floor) scatter by more than the 1 ms target, whatever
the proxy does. So the proxy runs under :mod:`benchmarks.proxy_stamps`, which
stamps inside the forwarder, for every chunk, the monotonic clock and the
thread's CPU time when the loop starts reading the upstream socket and when the
write of the chunk to the client returns. Printed at the end: p50/p95/p99 of
that wall time (the time the proxy held the chunk), of its CPU part (the
proxy's own work) and of the rest (waiting for a core: the load, not the
proxy), beside the end-to-end figures and the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: benchmarks.proxy_stamps

from benchmarks import proxy_stamps  # noqa: E402

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
    _settle()
    port_out.put(server.sockets[0].getsockname()[1])
    await server.serve_forever()


def _settle() -> None:
    """The benchmark's own processes (upstream, client) kept from collector pauses as
    the forwarder is: noise they would add to both sides alike."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


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


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


QUANTILES = (0.5, 0.95, 0.99)
FIRST_BYTE, PER_CHUNK = 0, 1
Samples = dict[str, tuple[list[float], list[float]]]  # side -> (first bytes, chunks)


def _order(calls: int) -> list[str]:
    """D P P D D P P D ...: each side first as often, and after each side as often."""
    pattern = ("direct", "proxied", "proxied", "direct")
    return [pattern[i % 4] for i in range(2 * calls)]


Call = tuple[str, float, list[float]]  # side, time to first byte, each delta's delay


def _measure(callers: dict[str, Caller], body: bytes, calls: int,
             log: list[Call] | None = None) -> Samples:
    out: Samples = {"direct": ([], []), "proxied": ([], [])}
    for name in _order(calls):
        ttfb, delays = callers[name].call(body)
        out[name][FIRST_BYTE].append(ttfb)
        out[name][PER_CHUNK].extend(delays)
        if log is not None:
            log.append((name, ttfb, delays))
    return out


Pairs = tuple[list[float], list[float]]  # differences: first bytes, chunks


def _pairs(log: list[Call]) -> tuple[Pairs, Pairs]:
    """Differences between neighbouring calls, in the order D P P D D P P D ...:

    - proxied minus direct: each proxied call against the direct call next to it
      (the first P of a group against the D before it, the second against the D
      after it), first byte against first byte and chunk i against chunk i;
    - direct minus direct: the two neighbouring direct calls of consecutive
      groups (the last D of one, the first of the next), the same way. No proxy is
      involved: its quantiles are what the method itself scatters by on this
      machine at that load, the floor under the proxied pairs' figures.
    """
    added: Pairs = ([], [])
    floor: Pairs = ([], [])

    def pair(into: Pairs, later: Call, earlier: Call) -> None:
        into[FIRST_BYTE].append(later[1] - earlier[1])
        into[PER_CHUNK].extend(a - b for a, b in zip(later[2], earlier[2], strict=False))

    for at in range(0, len(log) - 3, 4):
        d0, p1, p2, d3 = log[at:at + 4]
        pair(added, p1, d0)
        pair(added, p2, d3)
        if at + 4 < len(log):
            pair(floor, log[at + 4], d3)
    return added, floor


def _added(samples: Samples, index: int, q: float) -> float:
    return (_percentile(samples["proxied"][index], q)
            - _percentile(samples["direct"][index], q))


def _table(samples: Samples) -> None:
    print(f"{'ms':22}{'direct p50':>11}{'p95':>8}{'p99':>8}{'proxied p50':>13}{'p95':>8}"
          f"{'p99':>8}{'added p50':>11}{'p95':>8}{'p99':>8}")
    for label, index in (("time to first byte", FIRST_BYTE), ("per-chunk delay", PER_CHUNK)):
        direct = [_percentile(samples["direct"][index], q) for q in QUANTILES]
        proxied = [_percentile(samples["proxied"][index], q) for q in QUANTILES]
        added = [_added(samples, index, q) for q in QUANTILES]
        print(f"{label:22}{direct[0]:11.3f}{direct[1]:8.3f}{direct[2]:8.3f}"
              f"{proxied[0]:13.3f}{proxied[1]:8.3f}{proxied[2]:8.3f}"
              f"{added[0]:11.3f}{added[1]:8.3f}{added[2]:8.3f}")


def _paired_table(log: list[Call]) -> tuple[list[float], list[float]]:
    """Print the paired differences' quantiles; return their p99s (first byte, chunk)
    for proxied - direct and direct - direct."""
    added, floor = _pairs(log)
    print(f"{'paired, ms':22}{'P-D p50':>11}{'p95':>8}{'p99':>8}{'D-D p50':>13}{'p95':>8}"
          f"{'p99':>8}")
    p99s: tuple[list[float], list[float]] = ([], [])
    for label, index in (("time to first byte", FIRST_BYTE), ("per-chunk delay", PER_CHUNK)):
        a = [_percentile(added[index], q) for q in QUANTILES]
        f = [_percentile(floor[index], q) for q in QUANTILES]
        p99s[0].append(a[2])
        p99s[1].append(f[2])
        print(f"{label:22}{a[0]:11.3f}{a[1]:8.3f}{a[2]:8.3f}{f[0]:13.3f}{f[1]:8.3f}"
              f"{f[2]:8.3f}")
    return p99s


def _held_table(walls: list[int], cpus: list[int], sizes: list[int]) -> None:
    """The forwarder's own time per chunk (benchmarks/proxy_stamps.py), in us."""
    waits = [w - c for w, c in zip(walls, cpus, strict=True)]
    print(f"\nthe proxy's own time per chunk (upstream read -> client write returned), "
          f"{len(walls)} writes (warm-up included), mean {sum(sizes) / len(sizes):.0f} "
          f"bytes, us:")
    print(f"{'':34}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>9}")
    for label, values in (("held (wall)", walls), ("  its CPU time (the proxy's work)", cpus),
                          ("  waiting for a core", waits)):
        print(f"{label:34}" + "".join(f"{_percentile(values, q) / 1000:8.1f}"
                                      for q in QUANTILES) + f"{max(values) / 1000:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=240, help="measured calls each way, "
                        "per repetition")
    parser.add_argument("--chunks", type=int, default=20, help="deltas per call")
    parser.add_argument("--interval", type=float, default=2.0, help="ms between deltas")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions")
    parser.add_argument("--warmup", type=int, default=5,
                        help="calls each way before the first repetition, not counted")
    parser.add_argument("--new-connections", action="store_true",
                        help="a new connection per call (default: one kept alive per side)")
    args = parser.parse_args()
    _settle()
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    upstream = multiprocessing.Process(target=_upstream, daemon=True,
                                       args=(ports, args.chunks, args.interval / 1000))
    upstream.start()
    port = ports.get(timeout=30)
    mode = "a new connection per call" if args.new_connections else "kept-alive connections"
    print(f"{args.repeats} x {args.calls} calls each way ({mode}), {args.chunks} deltas per "
          f"call, {args.interval} ms apart; {os.cpu_count()} cores")
    repeats: list[Samples] = []
    paired: list[tuple[list[float], list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stamps = str(Path(tmp) / "stamps")
        cmd = [sys.executable, "-m", "benchmarks.proxy_stamps", stamps, "proxy", "--store",
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
        warm = _measure(callers, body, args.warmup)
        print(f"warm-up, not counted ({args.warmup} calls each way; the first opens "
              f"the connections): first byte direct "
              f"{' '.join(f'{v:.2f}' for v in warm['direct'][FIRST_BYTE])} ms, proxied "
              f"{' '.join(f'{v:.2f}' for v in warm['proxied'][FIRST_BYTE])} ms")
        cpu_before = {p: _cpu_seconds(p) for p in [proxy.pid, *recorder_pids]}
        wall = time.monotonic()
        for rep in range(args.repeats):
            load = os.getloadavg()
            log: list[Call] = []
            samples = _measure(callers, body, args.calls, log)
            after = os.getloadavg()
            repeats.append(samples)
            print(f"\nrepetition {rep + 1}: load average {load[0]:.2f} -> {after[0]:.2f} "
                  f"(1 min), {len(samples['proxied'][FIRST_BYTE])} first bytes and "
                  f"{len(samples['proxied'][PER_CHUNK])} chunks each way")
            _table(samples)
            paired.append(_paired_table(log))
        wall = time.monotonic() - wall
        cpu = {p: _cpu_seconds(p) - cpu_before[p] for p in cpu_before}
        for caller in callers.values():
            if caller.sock is not None:
                caller.sock.close()
        proxy.terminate()
        proxy.wait(60)
        held = proxy_stamps.load(stamps)
    upstream.terminate()
    print(f"\nadded over {args.repeats} repetitions, ms: min / median / max "
          f"(direct p99 beside)")
    for label, index in (("time to first byte", FIRST_BYTE), ("per-chunk delay", PER_CHUNK)):
        for q in QUANTILES:
            values = sorted(_added(s, index, q) for s in repeats)
            direct = sorted(_percentile(s["direct"][index], 0.99) for s in repeats)
            print(f"{label + f' p{round(q * 100)}':26}{values[0]:8.3f}"
                  f"{values[len(values) // 2]:8.3f}{values[-1]:8.3f}"
                  + (f"    direct p99 {direct[0]:.3f} / {direct[len(direct) // 2]:.3f} / "
                     f"{direct[-1]:.3f}" if q == 0.99 else ""))
    for label, index in (("time to first byte", FIRST_BYTE), ("per-chunk delay", PER_CHUNK)):
        pd = sorted(p[0][index] for p in paired)
        dd = sorted(p[1][index] for p in paired)
        print(f"{label + ' paired P-D p99':34}{pd[0]:8.3f}{pd[len(pd) // 2]:8.3f}"
              f"{pd[-1]:8.3f}    D-D p99 {dd[0]:.3f} / {dd[len(dd) // 2]:.3f} / "
              f"{dd[-1]:.3f}")
    _held_table(*held)
    chunks = sum(len(s["proxied"][PER_CHUNK]) for s in repeats)
    forwarder = cpu[proxy.pid]
    recorder = sum(cpu[p] for p in recorder_pids)
    print(f"CPU over {wall:.1f} s: forwarder {forwarder:.2f} s "
          f"({forwarder / chunks * 1e6:.0f} us a chunk), recorder and helpers "
          f"{recorder:.2f} s ({recorder / chunks * 1e6:.0f} us a chunk), {chunks} proxied "
          f"chunks")


if __name__ == "__main__":
    main()
