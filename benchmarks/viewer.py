"""Viewer benchmark: a long session in the real page, in a real chromium, in one run.

Usage (from the repository root; needs the dev extra and a chromium, see
tests/support/browser.py)::

    .venv/bin/python benchmarks/viewer.py --events 1000000          # the issue's target
    .venv/bin/python benchmarks/viewer.py                           # 100,000 events
    .venv/bin/python benchmarks/viewer.py --events 1000000 --keep /tmp/v1m.db  # reuse

The session is ``benchmarks/workload.py``'s, plus one tool call whose output
has ``--output-lines`` lines (50,000 by default), with stored snapshots
(``write_snapshots``, every 1,000 events) as a recorded or imported session has.
``--keep PATH`` keeps the store at PATH and reuses it when it is there (recording
1M events takes minutes). Reports, never asserts (see docs/viewer.md):

1. the server: the first state at the middle of the session from a fresh viewer
   (stored snapshots; the marks are built in a thread after it, with a Timeline
   only if the stored snapshots are slow), the marks' build, then at ``--points``
   random seqs the bare ``at(seq)`` (``Viewer.projection``) and the whole
   ``state(seq)`` answer; p50/p95/max;
2. the page: time to first paint of the conversation at the middle of the
   session, cold (a fresh server) and warm (a reload), from navigation to the
   state on screen;
3. scrub latency, timed in the page: from the slider's input event at a random
   seq to the frame after that state is on screen; and one ``→`` key press
   (timed from Playwright); p50/p95 over ``--scrubs`` points, while the
   marks are still being built and once they are;
4. how many messages the page holds in its DOM, and the long output;
5. ``export --as html``: wall and CPU time, the file's size and the writer's
   peak RSS, in a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Page, sync_playwright

from benchmarks.workload import record
from engine.session import Session
from engine.store import open_store
from projections.serve.app import create_app
from projections.serve.state import Viewer
from projections.timetravel import write_snapshots
from tests.support.browser import chromium, serving

ROOT = Path(__file__).resolve().parents[1]
# The export, in a child process whose peak RSS is its own: a script with a main guard,
# as the CLI runs it (the export verifies the session in a spawned grandchild,
# projections/serve/verifying.py, whose memory is not the writer's).
EXPORT_CHILD = '''
import resource, sys, time
from engine.store import open_store
from projections.serve.export import write_html
if __name__ == "__main__":
    t0, c0 = time.perf_counter(), time.process_time()
    with open_store(sys.argv[1]) as store, open(sys.argv[3], "w", encoding="utf-8") as out:
        write_html(store, sys.argv[2], out)
    print(time.perf_counter() - t0, time.process_time() - c0,
          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
'''


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


def build(url: str, events: int, output_lines: int) -> tuple[str, float]:
    t0 = time.perf_counter()
    with open_store(url, durability="batched") as writer:  # group commits: faster setup
        session, _ = record(writer, events)
        long_output(session, output_lines)
        writer.flush()
        sid = session.id
    with open_store(url) as store:
        write_snapshots(store, sid)
    return sid, time.perf_counter() - t0


def longest(url: str) -> str:
    with open_store(url) as store:
        return max(store.sessions(), key=lambda i: store.version(i.id)).id


def built(base: str, sid: str, seq: int) -> bool:
    """Whether the server's marks are built: its state answers then carry them."""
    with urllib.request.urlopen(f"{base}/api/sessions/{sid}/state?seq={seq}&count=1") as r:
        return json.load(r)["marks"] is not None


# Timed in the page: from the slider's input event to the frame after the state is on
# screen, without Playwright's own round trips (tens of ms on a loaded machine); and of
# that, the wait for the server's first byte (the request's Resource Timing) and the page's
# own part, from the answer in (the page's ``convlog:answer`` mark) to that frame.
SCRUB_JS = """async (seq) => {
    performance.clearResourceTimings();
    const slider = document.getElementById('slider');
    const t0 = performance.now();
    const done = new Promise((resolve) => {
        const seen = new MutationObserver(() => {
            if (document.body.dataset.shownSeq === String(seq)) { seen.disconnect(); resolve(); }
        });
        seen.observe(document.body, {attributes: true, attributeFilter: ['data-shown-seq']});
    });
    slider.value = String(seq);
    slider.dispatchEvent(new Event('input'));
    await done;
    await new Promise((r) => requestAnimationFrame(() => r()));
    const t1 = performance.now();
    const req = performance.getEntriesByType('resource')
        .find((e) => e.name.includes('/state?seq=' + seq + '&'));
    const answer = performance.getEntriesByName('convlog:answer')
        .filter((e) => e.detail === seq).pop();
    return [(t1 - t0) / 1000, req ? (req.responseStart - req.startTime) / 1000 : null,
            answer ? (t1 - answer.startTime) / 1000 : null];
}"""


Scrubs = tuple[list[float], list[float], list[float], list[float]]


def scrubs(page: Page, rng: random.Random, last: int, n: int) -> Scrubs:
    scrub, server, inpage, keys = [], [], [], []
    for seq in (rng.randint(1, last - 1) for _ in range(n)):
        total, waited, painted = page.evaluate(SCRUB_JS, seq)
        scrub.append(float(total))
        if waited is not None:
            server.append(float(waited))
        if painted is not None:
            inpage.append(float(painted))
        t0 = time.perf_counter()
        page.keyboard.press("ArrowRight")
        shown(page, seq + 1)
        keys.append(time.perf_counter() - t0)
    return scrub, server, inpage, keys


def report_scrubs(when: str, got: Scrubs) -> None:
    scrub, server, inpage, keys = got
    print(f"page: scrub to a random seq, in the page ({when}): p50 {ms(pct(scrub, .5))}, "
          f"p95 {ms(pct(scrub, .95))}; one → key: p50 {ms(pct(keys, .5))}, "
          f"p95 {ms(pct(keys, .95))} ({len(scrub)} points; "
          f"mean {statistics.mean(scrub) * 1000:.1f} ms)", flush=True)
    if server and inpage:
        print(f"      of a scrub: the server's first byte p50 {ms(pct(server, .5))}, "
              f"p95 {ms(pct(server, .95))}; the page, from the answer to the frame, "
              f"p50 {ms(pct(inpage, .5))}, p95 {ms(pct(inpage, .95))}", flush=True)


def export_figures(url: str, sid: str, tmp: str) -> None:
    path, script = Path(tmp) / "export.html", Path(tmp) / "export_child.py"
    script.write_text(EXPORT_CHILD, encoding="utf-8")
    run = subprocess.run([sys.executable, str(script), url, sid, str(path)],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall, cpu, rss = (float(x) for x in run.stdout.split())
    print(f"export --as html: {wall:.1f} s wall, {cpu:.1f} s CPU, "
          f"{path.stat().st_size / 1e6:.1f} MB file, peak RSS {rss / 1e6:.0f} MB "
          "(the writer's; the badge's verification runs in a child)", flush=True)
    path.unlink()


def long_figures(page: Page, long_seq: int) -> None:
    t0 = time.perf_counter()
    page.fill("#slider", str(long_seq))
    shown(page, long_seq)
    body = page.wait_for_selector(".lines-body:not(:empty)", timeout=120_000)
    assert body is not None
    took = time.perf_counter() - t0
    lines = len((body.text_content() or "").split("\n"))
    print(f"page: the long output on screen in {ms(took)}; "
          f"{lines} of its lines in the DOM", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--scrubs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--points", type=int, default=200, help="random seqs for the server")
    parser.add_argument("--output-lines", type=int, default=50_000)
    parser.add_argument("--keep", type=Path, help="keep the store here (reused when there)")
    parser.add_argument("--no-export", action="store_true", help="skip the export figures")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench.db"
        url = f"sqlite:///{path}"
        if path.exists():
            sid, setup = longest(url), 0.0
        else:
            sid, setup = build(url, args.events, args.output_lines)
        store = open_store(url)
        last = store.version(sid)
        mid = last // 2
        messages = sum(1 for e in store.read(sid) if type(e).__name__ == "MessageStarted")
        # None for a store made elsewhere (/work/big's) without the long output.
        long_seq = next((e.seq for e in store.read(sid, max(1, last - 10), last)
                         if type(e).__name__ == "ToolCompleted"), None)
        print(f"session: {last:,} events, {messages:,} messages "
              f"({'reused' if not setup else f'recorded with snapshots in {setup:.1f} s'})",
              flush=True)

        viewer = Viewer(store)
        t0, c0 = time.perf_counter(), time.process_time()
        viewer.state(sid, mid)
        print(f"server: first state at seq {mid:,} (stored snapshots): "
              f"{ms(time.perf_counter() - t0)} wall, {ms(time.process_time() - c0)} CPU",
              flush=True)
        t0 = time.perf_counter()
        viewer.wait_built(sid)  # the marks, and a Timeline if the snapshots are slow
        timeline = viewer._cached(sid).timeline
        what = ("no Timeline: the stored snapshots answer" if timeline is None else
                f"a Timeline, a frozen state every {timeline.every} events")
        print(f"server: the marks, built in a thread after that ({what}): "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
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
                  f"p95 {ms(pct(lat, .95))}, max {ms(max(lat))}", flush=True)
        del viewer

        with serving(create_app(store)) as base, sync_playwright() as pw, \
                chromium(pw) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            t0 = time.perf_counter()
            page.goto(f"{base}/?session={sid}&seq={mid}")
            shown(page, mid)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            page.reload()
            shown(page, mid)
            warm = time.perf_counter() - t0
            print(f"page: first paint at seq {mid:,}, cold (a fresh server): {ms(cold)}; "
                  f"warm (reload): {ms(warm)}", flush=True)
            early = max(2, args.scrubs // 3)
            report_scrubs("while the marks are built", scrubs(page, rng, last, early))
            while not built(base, sid, mid):
                time.sleep(0.2)
            report_scrubs("the marks built", scrubs(page, rng, last, args.scrubs))
            dom = page.evaluate("document.querySelectorAll('#conv .msg').length")
            print(f"page: {dom} messages in the DOM of {messages:,}", flush=True)
            if long_seq is None:
                print("page: no long output at the end of this session", flush=True)
            else:
                long_figures(page, long_seq)
        store.close()
        if not args.no_export:
            export_figures(url, sid, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
