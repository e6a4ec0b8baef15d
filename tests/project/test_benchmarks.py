"""The benchmarks still run and still check their own results (tiny sizes, no timing).

Speed is measured by running them (``make bench``), never asserted here; these
runs only keep the scripts working as the engine changes: each one checks that
convlog's result equals its baseline's before printing a ratio.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import conversation, integrations, packed, show_at, streaming
from benchmarks import verify as verify_bench

ROOT = Path(__file__).resolve().parents[2]


def test_streaming_benchmark_runs_and_agrees_with_the_sdks(
        capsys: pytest.CaptureFixture[str]) -> None:
    streaming.main(["--deltas", "400", "--repeat", "1"])
    out = capsys.readouterr().out
    for title in ("Anthropic, long blocks", "Anthropic, short blocks",
                  "OpenAI Chat Completions", "OpenAI Responses"):
        assert title in out
    assert len(re.findall(r"ratio \d+\.\d+x", out)) == 4 * len(streaming.CONFIGS)


def test_conversation_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    conversation.main(["--entries", "200", "--repeat", "1"])
    assert "ratio to convlog's checkpoint bytes" in capsys.readouterr().out


def test_replay_benchmark_runs() -> None:
    # In its own process, as it is run: it collects garbage before every timed round,
    # and in this test process's heap (thousands of tests' objects) those collections
    # took three minutes of a CI run for a benchmark that takes five seconds alone.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.replay", "--events", "3000", "--repeat", "1",
         "--points", "3", "--materialize", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "memory" in done.stdout
    assert "replay == live projection: ok" in done.stdout


def test_show_at_benchmark_runs_and_both_reads_print_the_same(
        capsys: pytest.CaptureFixture[str]) -> None:
    show_at.main(["--events", "3000", "--pairs", "1"])
    assert "previews / chunks" in capsys.readouterr().out


def test_integrations_benchmark_runs_and_agrees_with_sqlite_session(
        capsys: pytest.CaptureFixture[str]) -> None:
    integrations.main(["--turns", "20", "--events", "50", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "sqlite_session" in out
    assert len(re.findall(r"ratio \d+\.\d+x", out)) == 2  # the client and the Agents run
    assert "message_list_json" in out  # pydantic-ai's history, checked equal to convlog's


def test_packed_benchmark_runs_and_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    assert packed.main(["--events", "1500", "--turns", "4", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "round trips: exact" in out
    assert re.search(r"unpack \d+\.\d+ us/event", out)


def test_verify_benchmark_runs_and_its_format_study_round_trips(
        capsys: pytest.CaptureFixture[str]) -> None:
    verify_bench.main(["--events", "1500", "--repeat", "1"])
    out = capsys.readouterr().out
    assert len(re.findall(r"verify --fast \(content proven\) \d+\.\d+M/s", out)) == 2
    assert re.search(r"canonical kept: \d+\.\d+ B/event", out)


def test_ingest_same_bytes_runs_and_agrees_with_itself(
        capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path  # noqa: PLC0415

    from benchmarks import ingest_same_bytes  # noqa: PLC0415

    root = Path(ingest_same_bytes.__file__).resolve().parent.parent
    assert ingest_same_bytes.main([str(root), "--examples", "6"]) == 0
    assert "same events, bytes, hashes" in capsys.readouterr().out
