"""The mailbox benchmark still runs and checks its own count (tiny sizes, no timing)."""

from __future__ import annotations

import json

import pytest

from benchmarks import mailbox


def test_mailbox_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert mailbox.main(["--agents", "5", "--messages", "20", "--threads", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agents"] == 5
    assert out["log_events"] > 20
