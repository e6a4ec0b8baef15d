"""Crash safety: a writer killed with SIGKILL at random moments never costs an
acknowledged event (sync) or more than the open window (batched), and never
leaves a log that fails ``verify``.

Each round starts a child that streams text deltas into one session and prints
every acknowledged seq; the parent kills it after a random delay, reopens the
store, verifies it and checks the acknowledged seqs against what is stored.
Rounds continue the same session, so later rounds start from a killed writer's
leftovers. Bounded: a few seconds per backend.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.store import open_store
from engine.store.verify import verify

CHILD = Path(__file__).resolve().parents[1] / "support" / "crash_child.py"
SID = "0190a000-0000-7000-8000-0000000c0001"
ROUNDS = 8
BUDGET_S = 6.0


def _run_round(url: str, rng: random.Random) -> list[int]:
    """Start a writer, kill it after a random time, return the seqs it acknowledged."""
    proc = subprocess.Popen([sys.executable, str(CHILD), "crash", url, SID],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    acked: list[int] = []
    buf = b""
    # Wait for the first acknowledgement (the child's start-up), then a random time.
    deadline = time.monotonic() + 20
    kill_at: float | None = None
    fd = proc.stdout.fileno()
    while True:
        now = time.monotonic()
        if kill_at is not None and now >= kill_at:
            break
        if now > deadline:
            break
        ready, _, _ = select.select([fd], [], [], 0.005)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            acked += [int(x) for x in lines if x]
            if acked and kill_at is None:
                kill_at = time.monotonic() + rng.uniform(0.0, 0.25)
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    # Lines that reached the pipe before the kill were acknowledged too.
    buf += rest
    acked += [int(x) for x in buf.split(b"\n")[:-1] if x]
    assert acked, f"the writer never acknowledged an append: {err.decode()[-2000:]}"
    return acked


def _settle(url: str) -> None:
    """Wait until the killed writer's PostgreSQL backend has finished its statement.

    A server backend finishes the statement it was running when its client died (and,
    in autocommit, commits it) before it notices the closed socket: checking earlier
    races with that commit (the head read before it, the positions after it).
    """
    if not url.startswith("postgresql"):
        return
    import psycopg  # noqa: PLC0415 - only for the PostgreSQL variant

    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND state = 'active'").fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.01)
        raise AssertionError("the killed writer's backend is still running after 30 s")


def _check(url: str, acked: list[int], *, may_lose: int) -> int:
    _settle(url)
    store = open_store(url)
    try:
        report = verify(store)
        assert report.ok, report.first
        version = store.version(SID)
        stored = [e.seq for e in store.read(SID)]
        assert stored == list(range(1, version + 1))  # a valid prefix, gapless
        assert max(acked) - version <= may_lose, (max(acked), version)
        assert [p.position for p in store.read_all()] == list(range(1, version + 1))
        return version
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["sync", "batched"])
def test_sigkill_never_loses_an_acknowledged_event(durable_url: str, mode: str) -> None:
    # Batched PostgreSQL is the server's asynchronous commit: every append still
    # commits, so a killed client loses nothing even in that mode.
    client_commits = durable_url.startswith("postgresql")
    sep = "&" if "?" in durable_url else "?"
    window = 16
    url = (durable_url if mode == "sync"
           else f"{durable_url}{sep}durability=batched&batch_events={window}&batch_ms=100000")
    rng = random.Random(durable_url + mode)
    start = time.monotonic()
    rounds = 0
    last = 0
    while rounds < ROUNDS and (rounds < 3 or time.monotonic() - start < BUDGET_S):
        acked = _run_round(url, rng)
        # sync: every acknowledged seq is stored. batched: at most the open window is lost.
        version = _check(url, acked, may_lose=0 if mode == "sync" or client_commits else window)
        assert version >= last
        last = version
        rounds += 1
    assert rounds >= 3
    assert last > 0
