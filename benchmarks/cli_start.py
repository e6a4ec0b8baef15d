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

Bytecode: a regular install compiles the package (pip writes ``.pyc`` files), and
an editable one writes them on the first run, unless ``PYTHONDONTWRITEBYTECODE`` is
set: then every start compiles each module it imports from source (about 0.35 s
CPU of ``show``'s start on the shared machine, more than all the rest of its
imports). So this script first compiles the tree (``compileall``, what an install
does) and says whether the variable is set; ``--no-compile`` measures without.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


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
    parser.add_argument("--no-compile", action="store_true",
                        help="do not compile the tree to bytecode first (as an install does)")
    args = parser.parse_args(argv)
    if not args.no_compile:
        for package in ("engine", "projections"):
            compileall.compile_dir(ROOT / package, quiet=1)
        compileall.compile_file(ROOT / "convlog.py", quiet=1)
    unset = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "unset"
    print(f"bytecode: {'not compiled first' if args.no_compile else 'compiled first'}; "
          f"PYTHONDONTWRITEBYTECODE {unset}")
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
