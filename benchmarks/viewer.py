"""Viewer benchmark: a 100k-event session in the real page, in Debian chromium.

Usage (from the repository root; needs the dev extra and /usr/bin/chromium)::

    .venv/bin/python benchmarks/viewer.py                  # 100,000 events
    .venv/bin/python benchmarks/viewer.py --events 20000 --scrubs 10

Reports, never asserts (see docs/viewer.md):

1. the server: building the session's Timeline (the first open) and
   ``state(seq)`` at random seqs afterwards (p50/p95);
2. the page: time to first paint of the conversation, cold (the server builds
   the Timeline) and warm (a reload), from navigation to the state on screen;
3. scrub latency: from setting the slider to a random seq to that state on
   screen, and one ``→`` key press; p50/p95 over ``--scrubs`` points;
4. how many messages the page holds in its DOM (the window, not the session).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Page, sync_playwright

from benchmarks.workload import record
from engine.store import open_store
from projections.serve.app import create_app
from projections.serve.state import Viewer
from tests.support.browser import chromium, serving


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def shown(page: Page, seq: int) -> None:
    page.wait_for_selector(f'body[data-shown-seq="{seq}"]', timeout=120_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--scrubs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        t0 = time.perf_counter()
        with open_store(url, durability="batched") as writer:  # group commits: faster setup
            session, _ = record(writer, args.events)
            sid, last = session.id, session.version
            writer.flush()
        store = open_store(url)
        messages = sum(1 for e in store.read(sid) if type(e).__name__ == "MessageStarted")
        print(f"session: {last} events, {messages} messages "
              f"(recorded in {time.perf_counter() - t0:.1f} s)")

        viewer = Viewer(store)
        t0 = time.perf_counter()
        viewer.state(sid, last)
        print(f"server: first state (builds the Timeline): {ms(time.perf_counter() - t0)}")
        lat = []
        for seq in (rng.randint(0, last) for _ in range(200)):
            t0 = time.perf_counter()
            viewer.state(sid, seq)
            lat.append(time.perf_counter() - t0)
        print(f"server: state(seq) at 200 random seqs: p50 {ms(pct(lat, .5))}, "
              f"p95 {ms(pct(lat, .95))}, max {ms(max(lat))}")

        with serving(create_app(store)) as base, sync_playwright() as pw, \
                chromium(pw) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            t0 = time.perf_counter()
            page.goto(f"{base}/?session={sid}&seq={last}")
            shown(page, last)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            page.reload()
            shown(page, last)
            warm = time.perf_counter() - t0
            print(f"page: first paint, cold (server builds its Timeline): {ms(cold)}; "
                  f"warm (reload): {ms(warm)}")
            scrub, keys = [], []
            for seq in (rng.randint(1, last - 1) for _ in range(args.scrubs)):
                t0 = time.perf_counter()
                page.fill("#slider", str(seq))
                shown(page, seq)
                scrub.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                page.keyboard.press("ArrowRight")
                shown(page, seq + 1)
                keys.append(time.perf_counter() - t0)
            print(f"page: scrub to a random seq: p50 {ms(pct(scrub, .5))}, "
                  f"p95 {ms(pct(scrub, .95))}; one → key: p50 {ms(pct(keys, .5))}, "
                  f"p95 {ms(pct(keys, .95))} ({args.scrubs} points)")
            dom = page.evaluate("document.querySelectorAll('#conv .msg').length")
            print(f"page: {dom} messages in the DOM of {messages} "
                  f"(mean {statistics.mean(scrub) * 1000:.1f} ms per scrub)")
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
