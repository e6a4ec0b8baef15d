"""The import benchmark still runs on tiny files (speed is measured by running it, not here)."""

from __future__ import annotations

import pytest

from benchmarks import importers


def test_import_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    results = importers.main(["--mb", "0.2"])
    assert set(results) == {"claude-code", "codex"}
    assert all(r["events"] > 0 for r in results.values())
    assert "MB/s" in capsys.readouterr().out
