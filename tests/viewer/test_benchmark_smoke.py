"""benchmarks/viewer.py still runs end to end (tiny size; its figures are never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import export
from tests.support.browser import find_chromium, missing_browser_reason
from tests.support.pgserver import IN_CI

ROOT = Path(__file__).resolve().parents[2]


def test_viewer_benchmark_runs() -> None:
    if find_chromium() is None:
        reason = missing_browser_reason()
        if IN_CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    # In its own process, as it is run: it opens Playwright's sync API itself, which
    # refuses to start inside the running loop of this package's browser fixture.
    run = subprocess.run([sys.executable, "benchmarks/viewer.py", "--events", "600",
                          "--scrubs", "2", "--output-lines", "300"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # No request failed, in the servers or here (a verify request used to reach the
    # store after the benchmark had closed it).
    assert "Traceback" not in run.stderr, run.stderr[-4000:]
    out = run.stdout
    for line in ("server: first state", "server: state(seq", "page (now): first paint",
                 "page (now): scrub", "server: hand-over", "server: CPU", "DOM update",
                 "in the DOM", "export --as html", "peak RSS"):
        assert line in out


def test_export_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert export.main(["--deltas", "50", "100", "--tools", "5"]) == 0
    out = capsys.readouterr().out
    for line in ("50 deltas", "100 deltas", "5 tool calls", "MB page", "MB traced"):
        assert line in out
