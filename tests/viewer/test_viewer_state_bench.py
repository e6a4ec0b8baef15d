"""benchmarks/viewer_state.py still runs and still compares its two paths' answers
(a tiny store, no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import viewer_state
from benchmarks.workload import START_MS, Workload
from engine.session import Session, StepClock
from engine.store import SQLiteStore
from projections.serve import state
from projections.timetravel import write_snapshots


def test_viewer_state_benchmark_runs_and_its_paths_agree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "BUILD_INLINE", 0)  # a "long" session: no Timeline folded
    path = tmp_path / "s.db"
    store = SQLiteStore(str(path))
    session = Session.create(store, clock=StepClock(START_MS))
    Workload(session, seed=4).run(1500)
    write_snapshots(store, session.id, every=100)
    store.close()
    assert viewer_state.main(["--store", str(path), "--points", "6"]) == 0
    out = capsys.readouterr().out
    assert "now/before" in out
    assert f"{session.version:,} events" in out
