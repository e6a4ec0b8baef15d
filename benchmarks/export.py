"""Export benchmark: ``convlog export --as html`` on one long stream, and on one
message with many tool calls.

Usage (from the repository root)::

    .venv/bin/python benchmarks/export.py                   # both workloads, default sizes
    .venv/bin/python benchmarks/export.py --deltas 300000 --tools
    .venv/bin/python benchmarks/export.py --deltas --tools 200 1000 3000

Two workloads, each recorded in an in-memory SQLite store:

- ``--deltas``: a user message, then an assistant message whose one text part gets
  that many deltas of about 4 characters. A file that stored a message version per
  delta grew with the square of the deltas.
- ``--tools``: one assistant message (an agent's step loop) with that many tool calls,
  each added, streamed its input in a few deltas, made ready, run and completed with
  an output of about 3 KB, and a short streamed text part before each call. A file
  that stored the whole message at each event that is not a delta grew with the
  square of the calls.

For each size it reports, never asserts (see docs/performance.md, the viewer
section): the page's bytes, the export's CPU seconds (a run without tracing), and
its peak traced memory (``tracemalloc``, a second run).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.serve.export import render_html

OUTPUT_LINE = "drwxr-xr-x  2 user group  4096 Nov 24 12:00 some/directory/name\n"


def record(store: Store, deltas: int) -> str:
    s = Session.create(store)
    s.user_message("write a long answer")
    m = s.start_message("assistant")
    ref = s.add_text(m)
    for i in range(deltas):
        s.text_delta(ref, f"w{i % 100} ")
    s.end_part(ref)
    s.complete_message(m)
    return s.id


def record_tools(store: Store, calls: int) -> str:
    """One assistant message with ``calls`` tool calls, a text part before each."""
    s = Session.create(store)
    s.user_message("fix the build")
    m = s.start_message("assistant")
    s.start_step(m)
    for i in range(calls):
        text = s.add_text(m)
        for word in ("Now ", "I ", "list ", f"dir{i}."):
            s.text_delta(text, word)
        s.end_part(text)
        tool = s.add_tool(m, f"call_{i}", "bash")
        for fragment in ('{"command": ', f'"ls -l dir{i}"', "}"):
            s.tool_input_delta(tool, fragment)
        s.tool_input_ready(tool, {"command": f"ls -l dir{i}"})
        s.start_tool(tool)
        s.complete_tool(tool, f"total {i}\n" + OUTPUT_LINE * 48)  # about 3 KB
    s.finish_step(m, "stop")
    s.complete_message(m)
    return s.id


def measure(what: str, n: int, make: Callable[[Store, int], str]) -> str:
    with open_store("sqlite:///:memory:") as store:
        sid = make(store, n)
        events = store.version(sid)
        t0 = time.process_time()
        size = len(render_html(store, sid).encode())
        cpu = time.process_time() - t0
        tracemalloc.start()
        try:
            render_html(store, sid)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return (f"{n:>9,} {what} ({events:,} events): {size / 1e6:8.1f} MB page, "
            f"{cpu:6.2f} s CPU, peak {peak / 1e6:8.1f} MB traced")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deltas", type=int, nargs="*",
                   help="deltas of the stream workload (default 20,000 and 100,000; "
                        "given with no number: skip it)")
    p.add_argument("--tools", type=int, nargs="*",
                   help="tool calls of the one-message workload (default 200, 1,000 and "
                        "3,000; given with no number: skip it)")
    args = p.parse_args(argv)
    deltas = [20_000, 100_000] if args.deltas is None else args.deltas
    tools = [200, 1_000, 3_000] if args.tools is None else args.tools
    for n in deltas:
        print(measure("deltas", n, record), flush=True)
    for n in tools:
        print(measure("tool calls", n, record_tools), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
