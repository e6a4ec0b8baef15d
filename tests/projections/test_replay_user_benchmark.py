"""benchmarks/replay_user.py runs end to end on a small session and prints both paths."""

from __future__ import annotations

import argparse
import importlib.util

from benchmarks import replay_user


def test_the_benchmark_prints_the_user_and_the_bare_path() -> None:
    res = replay_user.run(argparse.Namespace(events=1500, es_events=300, repeat=1))
    assert res["events"] >= 1500
    assert res["user"]["messages"] > 0
    assert res["user"]["at_messages"] > 0
    assert {"user_vs_floor", "bare_vs_floor"} <= set(res["ratios"])
    text = replay_user.render(res)
    assert "user path" in text
    assert "bare path" in text
    assert "floor" in text
    # The peer is the bench extra's: without it the run says nothing about it.
    peer = importlib.util.find_spec("eventsourcing") is not None
    assert ({"user_vs_eventsourcing", "bare_vs_eventsourcing"} <= set(res["ratios"])) is peer
    assert ("vs eventsourcing" in text) is peer
