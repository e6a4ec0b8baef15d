"""benchmarks/viewer.py still runs end to end (tiny size; its figures are never asserted)."""

from __future__ import annotations

import pytest

from benchmarks import viewer


def test_viewer_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert viewer.main(["--events", "600", "--scrubs", "2"]) == 0
    out = capsys.readouterr().out
    for line in ("server: state(seq)", "page: first paint", "page: scrub", "in the DOM"):
        assert line in out
