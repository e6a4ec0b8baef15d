"""The import benchmark still runs on tiny files (speed is measured by running it, not here)."""

from __future__ import annotations

import pytest

from benchmarks import importers


def test_import_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    results = importers.main(["--mb", "0.2"])  # the doubling check runs by default
    assert set(results) == {"claude-code", "codex", "claude-code-tools", "codex-tools"}
    assert all(r["x_json_loads"] > 0 and r["x2_cpu_ratio"] > 0 for r in results.values())
    assert all(r["events"] > 0 for r in results.values())
    out = capsys.readouterr().out
    assert "MB/s" in out
    assert out.count("twice the file") == 4
