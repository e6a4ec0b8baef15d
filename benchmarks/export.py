"""Export benchmark: ``convlog export --as html`` on one long streamed text part.

Usage (from the repository root)::

    .venv/bin/python benchmarks/export.py                          # 20,000 and 100,000 deltas
    .venv/bin/python benchmarks/export.py --deltas 300000

For each size, records a session (a user message, then an assistant message whose
one text part gets ``--deltas`` deltas of about 4 characters) in an in-memory SQLite
store and reports, never asserts (see docs/performance.md, the viewer section):
the page's bytes, the export's CPU seconds (a run without tracing), and its peak
traced memory (``tracemalloc``, a second run). A file that stored a message version
per delta grew with the square of the deltas.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.serve.export import render_html


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


def measure(deltas: int) -> str:
    with open_store("sqlite:///:memory:") as store:
        sid = record(store, deltas)
        t0 = time.process_time()
        size = len(render_html(store, sid).encode())
        cpu = time.process_time() - t0
        tracemalloc.start()
        try:
            render_html(store, sid)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return (f"{deltas:>9,} deltas: {size / 1e6:8.1f} MB page, {cpu:6.2f} s CPU, "
            f"peak {peak / 1e6:8.1f} MB traced")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deltas", type=int, nargs="+", default=[20_000, 100_000])
    args = p.parse_args(argv)
    for n in args.deltas:
        print(measure(n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
