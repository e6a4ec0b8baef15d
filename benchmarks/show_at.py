"""`convlog show --at` from stored previews, beside the same show through every
message's chunk, in one run (issue 30, target 3).

Usage (from the repository root)::

    .venv/bin/python benchmarks/show_at.py --store sqlite:///copy.db --session ID --at 500000
    .venv/bin/python benchmarks/show_at.py --events 50000     # records a session first

Each path runs in a fresh interpreter, alternating, and prints the child's CPU time
(the machine may be shared): **previews** is what `show` does
(``projections.text.render_state``: untouched restored messages print from the
preview stored beside their chunk); **chunks** is ``render_messages(at(...).messages())``
(every chunk fetched, inflated, decoded and built first). Both texts must be equal.
Give a copy of a big store: snapshots are written to it when it has none.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import hashlib, json, sys, time
t0 = time.process_time()
from engine.store import open_store
from projections.text import render_messages, render_state
from projections.timetravel import at
t1 = time.process_time()
store = open_store(sys.argv[1], create=False, read_only=True)
proj = at(store, sys.argv[2], int(sys.argv[3]))
text = render_state(proj) if sys.argv[4] == "previews" else render_messages(proj.messages())
t2 = time.process_time()
print(json.dumps({"imports": t1 - t0, "show": t2 - t1, "whole": t2,
                  "digest": hashlib.sha256(text.encode()).hexdigest()}))
"""


def child(url: str, sid: str, seq: int, path: str) -> dict[str, float | str]:
    out = subprocess.run([sys.executable, "-c", CHILD, url, sid, str(seq), path], check=True,
                         capture_output=True, text=True, cwd=str(ROOT)).stdout
    got: dict[str, float | str] = json.loads(out.strip().splitlines()[-1])
    return got


def prepare(args: argparse.Namespace, tmp: Path) -> tuple[str, str, int]:
    from benchmarks.workload import record  # noqa: PLC0415 - only when recording
    from engine.store import SQLiteStore  # noqa: PLC0415
    from projections.timetravel import write_snapshots  # noqa: PLC0415

    path = tmp / "show.db"
    with SQLiteStore(str(path), synchronous="NORMAL", durability="batched") as store:
        session, _ = record(store, args.events)
        store.flush()
    store = SQLiteStore(str(path))
    write_snapshots(store, session.id)
    store.close()
    return f"sqlite:///{path}", session.id, args.events // 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store")
    p.add_argument("--session")
    p.add_argument("--at", type=int)
    p.add_argument("--events", type=int, default=50_000)
    p.add_argument("--pairs", type=int, default=6)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convlog-bench-show-") as name:
        if args.store:
            url, sid, seq = args.store, args.session, args.at
        else:
            url, sid, seq = prepare(args, Path(name))
        runs: dict[str, list[dict[str, float | str]]] = {"previews": [], "chunks": []}
        for i in range(args.pairs):
            for path in (("previews", "chunks") if i % 2 == 0 else ("chunks", "previews")):
                runs[path].append(child(url, sid, seq, path))
    if len({r["digest"] for rs in runs.values() for r in rs}) != 1:
        raise AssertionError("the two paths printed different text")
    print(f"show --at {seq}: CPU of each fresh process, {args.pairs} alternating pairs")
    for path, rs in runs.items():
        for key in ("whole", "imports", "show"):
            xs = sorted(float(r[key]) for r in rs)
            print(f"  {path:8} {key:7} median {statistics.median(xs) * 1e3:6.0f} ms"
                  f" (range {xs[0] * 1e3:.0f}-{xs[-1] * 1e3:.0f})")
    ratio = (statistics.median(float(r["show"]) for r in runs["previews"])
             / statistics.median(float(r["show"]) for r in runs["chunks"]))
    print(f"  previews / chunks (the read and the text): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
