"""The viewer server's CPU per state answer from stored snapshots, with and without
what it keeps between answers, in one run (issue 28: scrub p95 at 1M events).

Usage (from the repository root)::

    .venv/bin/python benchmarks/viewer_state.py --store /tmp/v1m.db [--session ID]

The store needs stored snapshots (``write_snapshots``; ``benchmarks/viewer.py
--keep`` writes one). For ``--points`` random seqs, each followed by the next seq
(the ``→`` key), it times ``Viewer.state(seq, count=8)`` (a scrub's request) in CPU
time two ways, alternating per seq so load drift hits both alike:

- **before**: a fresh ``timetravel.latest_snapshot`` (index decoded, refs built) and
  the tail read as events (its block decoded whole), as the viewer answered before;
- **now**: the viewer's own path (``Viewer._from_snapshots``: the ``RestoreCache``,
  the tail in runs, the event under the slider decoded alone).

Both answers are compared (they must be equal). Prints p50/p95/max and the ratio.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.store import open_store
from projections.serve.state import Viewer
from projections.timetravel import latest_snapshot
from projections.withparts import WithPartsProjection


class _Before(Viewer):
    """The viewer as it answered before the RestoreCache (kept here as the baseline)."""

    def _from_snapshots(self, sid: str, seq: int) -> WithPartsProjection:
        proj = latest_snapshot(self.store, sid, seq) or WithPartsProjection(sid)
        if proj.seq < seq:
            tail = list(self.store.read(sid, proj.seq + 1, seq))
            proj.apply_all(tail)
            if tail:
                with self._lock:
                    self._events[(sid, seq)] = tail[-1]
        return proj


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--session")
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    store = open_store(f"sqlite:///{args.store}")
    sid = args.session or max(store.sessions(), key=lambda i: store.version(i.id)).id
    last = store.version(sid)
    viewers = {"before": _Before(store, background=False),
               "now": Viewer(store, background=False)}
    for viewer in viewers.values():  # the marks' pass, not timed (no Timeline is folded
        viewer.state(sid, last // 2)  # when the stored snapshots answer, as they do here)
        viewer.wait_built(sid)
        if viewer._cached(sid).timeline is not None:
            print("the stored snapshots are too slow here: a Timeline was built",
                  file=sys.stderr)
            return 1
    rng = random.Random(args.seed)
    times: dict[str, dict[str, list[float]]] = {k: {"scrub": [], "next": []} for k in viewers}
    for i in range(args.points):
        seq = rng.randint(1, last - 1)
        order = list(viewers.items()) if i % 2 else list(viewers.items())[::-1]
        answers = []
        for name, viewer in order:
            for kind, at_seq in (("scrub", seq), ("next", seq + 1)):
                t0 = time.process_time()
                got = viewer.state(sid, at_seq, count=8, marks=False)
                times[name][kind].append(time.process_time() - t0)
                answers.append(got)
        if answers[:2] != answers[2:]:
            print(f"answers differ at seq {seq}", file=sys.stderr)
            return 1
    print(f"session {sid}: {last:,} events; {args.points} random seqs, each then seq+1; "
          "CPU ms per state(seq, count=8)")
    for kind in ("scrub", "next"):
        b, n = times["before"][kind], times["now"][kind]
        print(f"{kind:5}  before p50 {pct(b, .5) * 1e3:6.2f} p95 {pct(b, .95) * 1e3:6.2f} "
              f"max {max(b) * 1e3:6.1f} | now p50 {pct(n, .5) * 1e3:6.2f} "
              f"p95 {pct(n, .95) * 1e3:6.2f} max {max(n) * 1e3:6.1f} | "
              f"now/before p50 {pct(n, .5) / pct(b, .5):.2f}x p95 {pct(n, .95) / pct(b, .95):.2f}x")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
