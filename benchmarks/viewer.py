"""Viewer benchmark: a 100k-event session in the real page, in Debian chromium.

Usage (from the repository root; needs the dev extra and /usr/bin/chromium)::

    .venv/bin/python benchmarks/viewer.py                  # 100,000 events
    .venv/bin/python benchmarks/viewer.py --events 1000000 # the issue's 1M target
    .venv/bin/python benchmarks/viewer.py --events 20000 --scrubs 10

The session is ``benchmarks/workload.py``'s, plus one tool call whose output
has ``--output-lines`` lines (50,000 by default). Reports, never asserts (see
docs/viewer.md):

1. the server: building the session's Timeline (the first open), then at
   ``--points`` random seqs the bare ``at(seq)`` (``Viewer.projection``) and
   the whole ``state(seq)`` answer (window, event, JSON); p50/p95/max;
2. the page: time to first paint of the conversation, cold (the server builds
   the Timeline) and warm (a reload), from navigation to the state on screen;
3. scrub latency: from setting the slider to a random seq to that state on
   screen, and one ``→`` key press; p50/p95 over ``--scrubs`` points;
4. how many messages the page holds in its DOM (the window, not the session),
   and the long output: its state on screen and lines in the DOM.
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
from engine.session import Session
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


def long_output(session: Session, lines: int) -> int:
    """One more turn whose tool prints ``lines`` lines; the seq of its completion."""
    m = session.start_message("assistant")
    tool = session.add_tool(m, "call_build_log", "bash")
    session.tool_input_ready(tool, {"command": "make -k all"})
    session.start_tool(tool)
    seq = session.complete_tool(tool, "\n".join(
        f"[{i:06d}] cc -O2 -c src/module_{i % 977}.c -o build/module_{i % 977}.o"
        for i in range(lines)))
    session.complete_message(m, finish="stop")
    return seq


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--scrubs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--points", type=int, default=200, help="random seqs for the server")
    parser.add_argument("--output-lines", type=int, default=50_000)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        t0 = time.perf_counter()
        with open_store(url, durability="batched") as writer:  # group commits: faster setup
            session, _ = record(writer, args.events)
            long_seq = long_output(session, args.output_lines)
            sid, last = session.id, session.version
            writer.flush()
        store = open_store(url)
        messages = sum(1 for e in store.read(sid) if type(e).__name__ == "MessageStarted")
        print(f"session: {last} events, {messages} messages "
              f"(recorded in {time.perf_counter() - t0:.1f} s)")

        viewer = Viewer(store)
        t0 = time.perf_counter()
        viewer.state(sid, last)
        every = viewer._cached(sid).timeline.every
        print(f"server: first state (builds the Timeline, a frozen state every {every} "
              f"events): {ms(time.perf_counter() - t0)}")
        seqs = [rng.randint(0, last) for _ in range(args.points)]
        bare, whole = [], []
        for seq in seqs:
            t0 = time.perf_counter()
            viewer.projection(sid, seq)
            bare.append(time.perf_counter() - t0)
        for seq in seqs:
            viewer._recent.clear()  # measure the fold, not the cache of recent answers
            t0 = time.perf_counter()
            viewer.state(sid, seq)
            whole.append(time.perf_counter() - t0)
        for name, lat in (("at(seq)", bare), ("state(seq)", whole)):
            print(f"server: {name} at {len(seqs)} random seqs: p50 {ms(pct(lat, .5))}, "
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
            t0 = time.perf_counter()
            page.fill("#slider", str(long_seq))
            shown(page, long_seq)
            body = page.wait_for_selector(".lines-body:not(:empty)", timeout=120_000)
            assert body is not None
            took = time.perf_counter() - t0
            lines = len((body.text_content() or "").split("\n"))
            print(f"page: the {args.output_lines}-line output on screen in {ms(took)}; "
                  f"{lines} of its lines in the DOM")
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
