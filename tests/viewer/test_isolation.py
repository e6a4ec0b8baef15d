"""The browser fixture must not leak into tests that run after the viewer's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tests_after_a_browser_test_pass() -> None:
    # One browser test, then the viewer benchmark (Playwright of its own), then tests
    # that call asyncio.run(): in one pytest run, in this order. A browser fixture
    # that outlives tests/viewer leaves Playwright's event loop running here, and
    # asyncio.run() and a second sync Playwright refuse to start.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "tests/viewer/test_browser.py::test_fork_button_is_absent_without_writes",
         "tests/viewer/test_benchmark_smoke.py::test_viewer_benchmark_runs",
         "tests/engine/test_aio.py::test_agent_loop_with_a_live_subscriber",
         "tests/engine/test_aio.py::test_a_broken_async_stream_settles_the_message"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "4 passed" in run.stdout
