"""The viewer's verify child ends with the viewer: a server killed by SIGTERM runs
no exit handler, and its child used to wait on its queue for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_SERVER = """
import sys
from engine.store import open_store
from projections.demo import record_demo
from projections.serve import verifying
store = open_store(sys.argv[1])
sid = record_demo(store).info.id
verifying.verify_elsewhere(store, sid, None)
assert verifying._pool is not None
print(*verifying._pool._processes, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split(") ", 1)[1][0] != "Z"


def test_the_verify_child_ends_when_the_server_is_killed(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-c", _SERVER, f"sqlite:///{tmp_path}/v.db"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    [child] = [int(p) for p in server.stdout.readline().split()]
    assert _alive(child)
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the verify child outlived the server"
