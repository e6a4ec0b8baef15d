"""benchmarks/proxy.py still runs and measures what it says (tiny sizes, no timing
asserted): both sides called alike, every call and chunk counted."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections import Counter

from benchmarks.proxy import FIRST_BYTE, PER_CHUNK, Call, _order, _pairs
from tests.proxy.clients import ROOT


def test_the_order_treats_both_sides_alike() -> None:
    order = _order(240)
    assert Counter(order) == {"direct": 240, "proxied": 240}
    # Each side comes after each side as often (what follows a proxied call meets
    # the recorder's work on it).
    pairs = Counter(itertools.pairwise(order))
    assert len(pairs) == 4
    assert max(pairs.values()) - min(pairs.values()) <= 1


def test_the_benchmark_runs_and_counts_every_call() -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/proxy.py", "--calls", "4", "--chunks", "3",
         "--repeats", "2", "--warmup", "1", "--interval", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.count("4 first bytes and 12 chunks each way") == 2
    assert "added over 2 repetitions" in out
    for line in ("time to first byte p99", "per-chunk delay p99"):
        assert line in out
    assert "24 proxied chunks" in out
    assert "time to first byte paired P-D p99" in out
    assert "D-D p99" in out
    # The forwarder's own time per chunk, stamped inside it: each write of what one
    # upstream read brought (1 warm-up and 2 x 4 proxied calls; on a busy machine
    # several deltas may arrive in one read, so at least one write a call).
    found = re.search(r"the proxy's own time per chunk .*?, (\d+) writes", out)
    assert found, out
    assert int(found[1]) >= 9
    for line in ("held (wall)", "its CPU time", "waiting for a core"):
        assert line in out


def test_pairs_set_each_proxied_call_against_its_direct_neighbour() -> None:
    # D P P D D P P D: first bytes 1, 10, 20, 2, 3, 30, 40, 4 (ms); one chunk each.
    values = [1.0, 10.0, 20.0, 2.0, 3.0, 30.0, 40.0, 4.0]
    log: list[Call] = [(side, v, [v / 10]) for side, v in zip(_order(4), values,
                                                                strict=True)]
    added, floor = _pairs(log)
    assert added[FIRST_BYTE] == [10 - 1, 20 - 2, 30 - 3, 40 - 4]
    assert added[PER_CHUNK] == [0.9, 1.8, 2.7, 3.6]
    assert floor[FIRST_BYTE] == [3 - 2]  # the direct calls side by side, no proxy
    assert floor[PER_CHUNK] == [0.3 - 0.2]


def test_the_recorder_benchmark_runs_and_finds_the_same_log_in_one_tree() -> None:
    """benchmarks/proxy_recorder.py: the ids' randomness and the clocks fixed, one
    tree run twice records the same bytes (what its comparison of two trees rests
    on), for both workloads."""
    out = subprocess.run(
        [sys.executable, "benchmarks/proxy_recorder.py", ".", ".", "--calls", "4",
         "--repeats", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[-1] == "same log in every tree"
    digests = re.findall(r"(bench|agent) .* CPU per call +\d+ us .*; (\d+) events, digest "
                         r"([0-9a-f]{16})", out)
    assert [d[0] for d in digests] == ["bench", "bench", "agent", "agent"]
    assert all(int(d[1]) > 0 for d in digests)
