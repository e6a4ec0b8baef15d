"""``convlog import --follow``: a live session imported as it is written, idempotently,
and a follower killed at any point (``kill -9``) and started again loses and doubles
nothing (issue 23)."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.cli import EXIT_OK
from engine.errors import ConvlogError
from engine.importers.detect import plan_path
from engine.importers.follow import follow, follow_round
from engine.store import MemoryStore, open_store
from engine.store.base import Store
from engine.store.verify import verify
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

SID = "f0110000-0000-4000-8000-000000000001"
ROOT = Path(__file__).resolve().parents[2]


def _session_lines(turns: int) -> list[str]:
    """A Claude Code session: per turn a prompt, a tool call, its result, an answer."""
    out: list[dict[str, Any]] = []
    parent: str | None = None

    def rec(uuid: str, kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent
        n = len(out)
        out.append({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SID,
                    "isSidechain": False, "cwd": "/w", "version": "2.1.230",
                    "timestamp": f"2026-10-01T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                    "message": message, **extra})
        parent = uuid

    for i in range(turns):
        rec(f"u{i}", "user", {"role": "user", "content": f"step {i}"})
        rec(f"c{i}", "assistant", {
            "id": f"msg_c{i}", "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                         "input": {"command": f"echo {i}"}}]})
        rec(f"r{i}", "user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i}"}]})
        rec(f"a{i}", "assistant", {
            "id": f"msg_a{i}", "role": "assistant", "model": "m", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": f"done {i}"}]})
    return [json.dumps(r) + "\n" for r in out]


def _shape(store: Store) -> dict[str, list[Any]]:
    """Each session's messages and parts with their states, and every event id once."""
    out: dict[str, list[Any]] = {}
    for info in store.sessions():
        ids = [e.id for e in store.read(info.id)]
        assert len(ids) == len(set(ids)), "an event written twice"
        out[info.id] = [(m.info.id, m.info.time.completed is not None,
                         [(p.id, getattr(getattr(p, "state", None), "TAG", p.TAG),
                           getattr(p, "text", "")) for p in m.parts])
                        for m in at(store, info.id).messages()]
    return out


def _whole(path: Path) -> dict[str, list[Any]]:
    return _shape(written(plan_path(path)))


def test_each_round_writes_only_what_is_new(tmp_path: Path) -> None:
    lines = _session_lines(6)
    path = tmp_path / f"{SID}.jsonl"
    store = MemoryStore()
    cuts = sorted({0, len(lines), *random.Random(7).sample(range(1, len(lines)), 8)})
    for a, b in itertools.pairwise(cuts):
        with path.open("a") as f:
            f.writelines(lines[a:b])
        follow_round(store, path, "auto", lenient=False)
    assert follow_round(store, path, "auto", lenient=False)[0] == 0  # again: nothing new
    assert _shape(store) == _whole(path)
    assert verify(store).ok


def test_a_line_still_being_written_waits_for_its_end(tmp_path: Path) -> None:
    lines = _session_lines(2)
    path = tmp_path / f"{SID}.jsonl"
    path.write_text("".join(lines[:3]) + lines[3][:20])  # the writer is mid-line
    store = MemoryStore()
    follow(store, path, "auto", interval=0.01, rounds=2, say=lambda _: None)
    assert [s.id for s in store.sessions()] == []  # the round failed: nothing written
    path.write_text("".join(lines))
    follow(store, path, "auto", interval=0.01, rounds=2, say=lambda _: None)
    assert _shape(store) == _whole(path)


def _start(folder: Path, url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from engine.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "import", str(folder), "--follow", "--store", url,
         "--interval", "0.02"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _caught_up(url: str, expected: dict[str, list[Any]], deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with open_store(url, create=False) as store:
                if _shape(store) == expected:
                    return True
        except (ConvlogError, sqlite3.Error):  # not created yet, or busy: look again
            pass
        time.sleep(0.2)
    return False


def test_kill_9_and_restart_lose_and_double_nothing(tmp_path: Path) -> None:
    """The agent writes (half lines too) while the follower is killed with SIGKILL at
    drawn moments and started again; in the end the store holds what one import of the
    finished file holds, each event once, and it verifies."""
    rng = random.Random(23)
    folder = tmp_path / "projects"
    folder.mkdir()
    path = folder / f"{SID}.jsonl"
    lines = _session_lines(25)
    url = f"sqlite:///{tmp_path / 'live.db'}"
    follower = _start(folder, url)
    kills = 0
    try:
        data = "".join(lines)
        at_ = 0
        while at_ < len(data):
            step = rng.randint(1, 900)  # cuts inside lines as often as between them
            with path.open("a") as f:
                f.write(data[at_:at_ + step])
            at_ += step
            time.sleep(rng.uniform(0, 0.05))
            if rng.random() < 0.12:
                follower.send_signal(signal.SIGKILL)
                follower.wait()
                kills += 1
                follower = _start(folder, url)
        assert kills >= 3
        assert _caught_up(url, _whole(path), time.monotonic() + 60)
        follower.send_signal(signal.SIGTERM)  # as a service manager stops it: exit 0
        assert follower.wait(timeout=30) == EXIT_OK
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    with open_store(url, create=False) as store:
        assert verify(store).ok
        [info] = store.sessions()
        history = at(store, info.id).messages()
    tools = [p for m in history for p in m.parts if isinstance(p, v.ToolPart)]
    assert [t.state.TAG for t in tools] == ["completed"] * 25
