"""CLI start-up benchmark: how long a person waits for ``convlog`` before it works.

Usage (from the repository root)::

    .venv/bin/python benchmarks/cli_start.py
    .venv/bin/python benchmarks/cli_start.py --store sessions.db --session ID --at 500000

Each command runs ``--runs`` times as a whole process (the installed console script,
what a user types); wall time (min and median) and CPU time (min) are printed, with
the ratio to the bare interpreter of the same virtualenv measured in the same run
(``python -c pass``: what no change to convlog can remove). Issue 30, target 3:
``--help`` and ``--version`` <= 150 ms wall on a quiet machine, ``show --at`` mid of a
1M-event session <= 300 ms. An editable install (``make``'s) adds setuptools' import
finder to every start; the ``finder`` row shows what it costs, which a regular
install does not pay.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def measure(argv: list[str], runs: int) -> tuple[float, float, float]:
    """(min wall, median wall, min CPU) in seconds over ``runs`` runs of ``argv``."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), statistics.median(walls), min(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--store", help="a store for the `show --at` row")
    parser.add_argument("--session", help="its session (with --store)")
    parser.add_argument("--at", type=int, help="the seq to show (default: the middle)")
    args = parser.parse_args(argv)
    python, convlog = str(BIN / "python"), str(BIN / "convlog")
    rows: list[tuple[str, list[str]]] = [
        ("interpreter (python -I -c pass)", [python, "-I", "-c", "pass"]),
        ("finder (python -c pass)", [python, "-c", "pass"]),
        ("convlog --version", [convlog, "--version"]),
        ("convlog --help", [convlog, "--help"]),
        ("convlog verify --help", [convlog, "verify", "--help"]),
    ]
    if args.store:
        show = [convlog, "show", args.store]
        if args.session:
            show += ["--session", args.session]
        if args.at is not None:
            show += ["--at", str(args.at)]
        rows.append((f"convlog show --at {args.at}", show))
    base = None
    print(f"{'command':34} {'wall min':>9} {'wall p50':>9} {'cpu min':>8}  vs interpreter")
    for label, command in rows:
        wall, median, cpu = measure(command, args.runs)
        base = base or wall
        print(f"{label:34} {wall * 1000:7.1f}ms {median * 1000:7.1f}ms {cpu * 1000:6.1f}ms"
              f"  {wall / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
