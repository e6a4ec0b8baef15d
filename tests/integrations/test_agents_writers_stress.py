"""Many writers at once, drawn by hypothesis: every item lands exactly once, in each
writer's order, whatever the interleaving (threads in one process, and processes)."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agents import set_tracing_disabled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import SQLiteStore
from projections.integrations.openai_agents import ConvlogSession

set_tracing_disabled(True)
ROOT = Path(__file__).resolve().parents[2]


class JitteryStore(SQLiteStore):
    """A real SQLiteStore that pauses a moment after answering a version or a read,
    so that other writers slip in where a catch-up or an open is most fragile."""

    def __init__(self, path: str, seed: int) -> None:
        super().__init__(path)
        self._random = random.Random(seed)

    def _pause(self) -> None:
        if self._random.random() < 0.5:
            time.sleep(self._random.uniform(0, 0.002))

    def version(self, *args: Any, **kwargs: Any) -> Any:
        answer = super().version(*args, **kwargs)
        self._pause()
        return answer


def check(items: list[Any], batches: dict[str, list[int]]) -> None:
    got = [i["content"] for i in items]
    assert len(got) == len(set(got))  # exactly once
    for name, sizes in batches.items():
        want = [f"{name}-{k}" for k in range(sum(sizes))]
        assert [c for c in got if c.startswith(f"{name}-")] == want
    assert len(got) == sum(sum(s) for s in batches.values())


WRITERS = st.dictionaries(st.sampled_from("abcd"), st.lists(st.integers(1, 3), min_size=1,
                                                            max_size=5), min_size=2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writers=WRITERS, seed=st.integers(0, 2**16), shared=st.booleans())
def test_threads_writing_at_once_each_land_exactly_once_in_order(
        tmp_path_factory: Any, writers: dict[str, list[int]], seed: int, shared: bool) -> None:
    """Writers in threads, each with its own object and store handle (or all sharing
    one object): batches of items, started together."""
    path = str(tmp_path_factory.mktemp("stress") / "s.db")
    one = ConvlogSession(JitteryStore(path, seed), "stress") if shared else None
    start = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def writer(name: str, sizes: list[int], k: int) -> None:
        try:
            session = one or ConvlogSession(JitteryStore(path, seed + k), "stress")
            start.wait()
            n = 0
            for size in sizes:
                batch = [{"role": "user", "content": f"{name}-{n + j}"} for j in range(size)]
                asyncio.run(session.add_items(batch))  # type: ignore[arg-type]
                n += size
        except BaseException as exc:  # a dying thread must fail the test, not vanish
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name, sizes, k))
               for k, (name, sizes) in enumerate(writers.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check(asyncio.run(ConvlogSession(SQLiteStore(path), "stress").get_items()), writers)


WRITER = """
import asyncio, pathlib, sys, threading, time
from engine.store import SQLiteStore
from projections.integrations.openai_agents import ConvlogSession
path, name, barrier, count = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4])
(barrier / name).touch()
while len(list(barrier.iterdir())) < 2:
    time.sleep(0.001)
def write(thread):
    session = ConvlogSession(SQLiteStore(path), "processes")
    for i in range(count):
        asyncio.run(session.add_items([{"role": "user", "content": f"{name}{thread}-{i}"}]))
threads = [threading.Thread(target=write, args=(t,)) for t in range(2)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_processes_with_threads_each_land_exactly_once_in_order(tmp_path: Path) -> None:
    """Two processes, two writer threads in each, starting together on a new id."""
    path = str(tmp_path / "p.db")
    barrier = tmp_path / "ready"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, path, name, str(barrier), "6"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for name in ("p", "q")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        # A writer thread that raised prints its traceback, and the process still
        # exits 0: its stderr must be clean too.
        assert p.returncode == 0, err
        assert "Traceback" not in err, err
    items = asyncio.run(ConvlogSession(SQLiteStore(path), "processes").get_items())
    check(items, {f"{n}{t}": [6] for n in "pq" for t in range(2)})
