"""Writers opening one new SQLite file at the same moment all get a store (each in
its own process here, as web workers do); none fails with "database is locked" while
another sets the file up (WAL mode takes an exclusive lock without SQLite's busy
handler)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPEN = """
import sys, time
from engine.store import SQLiteStore
start = float(sys.argv[2])
while time.time() < start:
    pass
SQLiteStore(sys.argv[1]).close()
"""
ROOT = Path(__file__).resolve().parents[2]


def test_processes_opening_a_new_file_at_once_all_get_the_store(tmp_path: Path) -> None:
    for round_ in range(6):
        path = tmp_path / f"new-{round_}.db"
        start = time.time() + 1.0  # after every child has imported convlog
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(path), repr(start)],
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
