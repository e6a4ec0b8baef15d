"""benchmarks/viewer.py still runs end to end (tiny size; its figures are never asserted)."""

from __future__ import annotations

import pytest

from benchmarks import export, viewer


def test_viewer_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert viewer.main(["--events", "600", "--scrubs", "2"]) == 0
    out = capsys.readouterr().out
    for line in ("server: state(seq)", "page: first paint", "page: scrub", "in the DOM"):
        assert line in out


def test_export_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert export.main(["--deltas", "50", "100", "--tools", "5"]) == 0
    out = capsys.readouterr().out
    for line in ("50 deltas", "100 deltas", "5 tool calls", "MB page", "MB traced"):
        assert line in out
