"""Reading never changes a store's bytes, even one a crash left mid-WAL (issue 27
item 9).

A writer killed with SIGKILL leaves its committed rows in ``-wal``; a read command
that opened the file read-write checkpointed them into the main file when it closed
(and removed the WAL), so reading changed the file. The read commands now open
SQLite read-only (``mode=ro``): the WAL is read, never checkpointed. Each read verb
runs on such a crashed store, and the main file and the WAL must hash the same
before and after (``-shm`` is SQLite's shared-memory index of the WAL, rebuilt by
any reader, and holds no data). The reads must see the WAL's rows too.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_run import run_cli

CHILD = """
import os, signal, sys
from engine.session import Session
from engine.store import open_store
s = Session.create(open_store(sys.argv[1]))
text = s.add_text(s.start_message("assistant"))
for i in range(300):
    s.text_delta(text, f"word{i} ")
print(s.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

READS = [
    ["show", "{path}"],
    ["show", "{path}", "--session", "{sid}", "--at", "3"],
    ["show", "{path}", "--session", "{sid}", "--as", "events"],
    ["verify", "{path}"],
    ["verify", "--fast", "{path}"],
    ["anchor", "{path}"],
    ["sessions", "{path}"],
    ["export", "{path}", "--session", "{sid}"],
    ["tail", "{path}"],
    ["diff", "{path}", "--session", "{sid}", "1", "5"],
]


def _hashes(db: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(db.parent.glob(db.name + "*")) if not p.name.endswith("-shm")}


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("crashed") / "c.db"
    done = subprocess.run([sys.executable, "-c", CHILD, f"sqlite:///{db}"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    assert Path(f"{db}-wal").stat().st_size > 0  # the rows are in the WAL
    return db, done.stdout.strip()


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a[:2]) for a in READS])
def test_a_read_leaves_a_crashed_store_s_bytes_alone(crashed: tuple[Path, str],
                                                    argv: list[str]) -> None:
    db, sid = crashed
    before = _hashes(db)
    assert f"{db.name}-wal" in before
    done = run_cli([a.format(path=db, sid=sid) for a in argv])
    done.assert_clean()
    assert done.code == 0, done.err
    assert _hashes(db) == before


def test_reads_see_the_wal_s_rows(crashed: tuple[Path, str]) -> None:
    db, sid = crashed
    done = run_cli(["verify", str(db)])
    assert f"{sid} seq 302 head" in done.out, done.out  # message, part, 300 deltas
