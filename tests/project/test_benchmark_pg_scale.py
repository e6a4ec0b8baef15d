"""benchmarks/pg_scale.py still runs and checks its own results (tiny sizes, no timing):
every replayed session equals what its writer appended, every subscriber got every
position once and in order, or it exits 1."""

from __future__ import annotations

import pytest

from benchmarks import pg_scale


def test_pg_scale_benchmark_runs_and_checks_replay(pg_url: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = pg_scale.main(["--url", pg_url, "--writers", "3", "--events", "15",
                          "--sessions", "4", "--per-session", "10", "--subscribers", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ratio sync: 3 writers / 1 writer" in out
    assert "ratio batched: 3 writers / 1 writer" in out
    assert "events=40 " in out
    assert "subscribers=2 following every session" in out
    assert "subscribers=4 following one session each" in out


def test_pg_scale_exits_1_when_a_replayed_session_differs(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = pg_scale.digest
    monkeypatch.setattr(pg_scale, "check_replay", lambda url, digests: [
        name for name, want in digests.items() if real([]) != want])
    assert pg_scale.main(["--url", pg_url, "--writers", "2", "--events", "5", "--sessions",
                          "2", "--per-session", "3", "--subscribers", "1"]) == 1
