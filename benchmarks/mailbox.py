"""Mailbox benchmark: sends/s and pending-read latency, 100 agents in one project.

Usage (from the repository root)::

    .venv/bin/python benchmarks/mailbox.py                      # SQLite, 100 agents
    .venv/bin/python benchmarks/mailbox.py --store postgresql://...   # a PostgreSQL store
    .venv/bin/python benchmarks/mailbox.py --agents 20 --messages 200 --json

What is measured, on a fresh store:

1. sequential sends/s: one writer sends ``--messages`` messages, each from a random
   agent to another (token check, the seed's checks, one appended event each);
2. concurrent sends/s: ``--threads`` writers, each with its own store connection
   and ``Mailbox``, racing on the same log (a lost race catches up and retries);
3. pending-read latency: every agent calls ``get_pending_messages`` once
   (fetch + one ``mail.delivered`` event per message), median and p95 in ms;
4. open: how long a new ``Mailbox`` takes to fold the whole log.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import logging as cl_logging
from engine.store import open_store
from projections.mailbox import Mailbox


def _setup(url: str, agents: list[str]) -> None:
    store = open_store(url)
    try:
        mb = Mailbox(store, "bench")
        mb.create_project("/work/bench")
        for a in agents:
            mb.register_agent(a)
            mb.assign(a)
    finally:
        store.close()


def run(url: str, *, agents: int, messages: int, threads: int, seed: int = 7) -> dict[str, Any]:
    names = [f"agent-{i:03d}" for i in range(agents)]
    _setup(url, names)
    rng = random.Random(seed)
    store = open_store(url)
    out: dict[str, Any] = {"agents": agents, "messages": messages, "threads": threads}
    try:
        mb = Mailbox(store, "bench")
        tokens = {a: mb.authenticate(a) for a in names}
        pairs = [rng.sample(names, 2) for _ in range(messages)]
        t0 = time.perf_counter()
        for sender, receiver in pairs:
            mb.send(tokens[sender], receiver, f"{sender} -> {receiver}: status update")
        out["sequential_sends_per_s"] = round(messages / (time.perf_counter() - t0), 1)

        def writer(index: int, count: int) -> None:
            own = open_store(url)
            try:
                box = Mailbox(own, "bench")
                for n in range(count):
                    sender, receiver = pairs[(index * count + n) % len(pairs)]
                    box.send(tokens[sender], receiver, f"concurrent {index}:{n}")
            finally:
                own.close()

        each = max(1, messages // threads)
        workers = [threading.Thread(target=writer, args=(i, each)) for i in range(threads)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        out["concurrent_sends_per_s"] = round(each * threads / (time.perf_counter() - t0), 1)

        latencies = []
        fetched = 0
        for a in names:
            t0 = time.perf_counter()
            fetched += len(mb.pending(tokens[a]))
            latencies.append((time.perf_counter() - t0) * 1000)
        assert fetched == messages + each * threads  # every message, exactly once
        latencies.sort()
        out["pending_ms_median"] = round(statistics.median(latencies), 3)
        out["pending_ms_p95"] = round(latencies[int(0.95 * (len(latencies) - 1))], 3)
        t0 = time.perf_counter()
        Mailbox(store, "bench")
        out["open_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["log_events"] = store.version(mb.log.session.id)
    finally:
        store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store URL (default: a fresh SQLite file)")
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cl_logging.configure("error")  # lost races are expected here, not worth a warning each
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{tmp}/mailbox.db"
        result = run(url, agents=args.agents, messages=args.messages, threads=args.threads)
    result["store"] = url.split(":", 1)[0]
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
