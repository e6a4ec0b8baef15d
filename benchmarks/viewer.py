"""Viewer benchmark: a long session in the real page, in a real chromium, in one run.

Usage (from the repository root; needs the dev extra and a chromium, see
tests/support/browser.py)::

    .venv/bin/python benchmarks/viewer.py --events 1000000          # the issue's target
    .venv/bin/python benchmarks/viewer.py                           # 100,000 events
    .venv/bin/python benchmarks/viewer.py --events 1000000 --keep /tmp/v1m.db  # reuse
    .venv/bin/python benchmarks/viewer.py --keep /tmp/v1m.db --against /tmp/before  # A/B

``--against DIR`` serves a second copy of the viewer from another checkout of this
repository (``git archive <commit> | tar -x -C DIR``) beside this one, each in its own
process, and scrubs both pages to the same seqs in turn (the order alternating), so the
two versions are compared in one run, at the same load.

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
   marks are still being built and once they are; each scrub split by the page's
   performance marks, the request's Resource Timing and the server's
   ``Server-Timing`` header into the page before the request, the wait for a core
   and the network (the first byte's wait less the server's own time), the server's
   hand-over to a worker thread, its work (wall and CPU) and the JSON encoding, the
   transfer and parse, the DOM update, and the wait for the next frame;
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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Page, sync_playwright

from benchmarks.workload import record
from engine.session import Session
from engine.store import open_store
from projections.serve.state import Viewer
from projections.timetravel import write_snapshots
from tests.support.browser import chromium

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

# The viewer served in a process of its own, as ``convlog serve`` runs it, from the
# checkout given (this one, or ``--against``'s); it prints its port, then serves until
# it is stopped. Its verification child follows it (projections/serve/verifying.py).
SERVER_CHILD = '''
import socket, sys
sys.path.insert(0, sys.argv[1])
import uvicorn
import projections.serve.app as app
from engine.store import open_store
if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], app.__file__, flush=True)
    kw = {"inline": False} if sys.argv[3:] == ["threaded"] else {}
    server = uvicorn.Server(uvicorn.Config(app.create_app(open_store(sys.argv[2]), **kw),
                                           log_level="warning", lifespan="off"))
    server.run(sockets=[sock])
'''


@contextmanager
def served(root: Path, url: str, tmp: str, *, threaded: bool = False) -> Iterator[str]:
    """The viewer of the checkout at ``root`` over ``url``, in a child process, until the
    block ends; yields its base URL. The child is stopped before the caller closes its
    own store: no request of the page outlives the server it was sent to. ``threaded``:
    every state answer in a worker thread (``create_app(inline=False)``)."""
    script = Path(tmp) / "server_child.py"
    script.write_text(SERVER_CHILD, encoding="utf-8")
    log = Path(tmp) / f"server-{abs(hash((root, threaded)))}.log"
    with log.open("w", encoding="utf-8") as err:
        child = subprocess.Popen([sys.executable, str(script), str(root), url,
                                  *(["threaded"] if threaded else [])], cwd=root,
                                 stdout=subprocess.PIPE, stderr=err, text=True,
                                 env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert child.stdout is not None
        port, module = child.stdout.readline().split(maxsplit=1)
        if not Path(module.strip()).resolve().is_relative_to(root.resolve()):
            raise RuntimeError(f"the viewer of {root} imported {module.strip()}")
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/config").close()
                break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise
                time.sleep(0.05)
        yield base
    finally:
        # uvicorn's graceful stop waits for the requests in flight, and the verify
        # badge's (a 1M-event chain, in the child's own verification process) can take
        # a minute: past a few seconds the child is killed (its verifier follows it).
        child.terminate()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(30)
        # A failed request is the server's traceback; the rest (the stopped child's
        # multiprocessing warnings) is noise.
        text = log.read_text(encoding="utf-8")
        if "Traceback" in text:
            print(f"the server of {root} failed:\n{text}", file=sys.stderr, flush=True)


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
# screen, without Playwright's own round trips (tens of ms on a loaded machine); and its
# parts, from the page's marks (convlog:fetch, :answer, :shown; a version without some
# gives null for them), the request's Resource Timing and the server's Server-Timing.
SCRUB_JS = """async (seq) => {
    performance.clearResourceTimings();
    performance.clearMarks();
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
    const mark = (name) => {
        const e = performance.getEntriesByName(name).filter((x) => x.detail === seq).pop();
        return e ? e.startTime : null;
    };
    const server = {};
    let path = null;
    for (const t of (req && req.serverTiming) || []) {
        server[t.name] = t.duration;
        if (t.name === 'queue') path = t.description;
    }
    return {t0: t0, t1: t1, fetch: mark('convlog:fetch'), answer: mark('convlog:answer'),
            shown: mark('convlog:shown'), server: server, path: path,
            req: req ? [req.startTime, req.requestStart, req.responseStart, req.responseEnd]
                     : null};
}"""

# The parts of a scrub, in order (ms): see split().
PARTS = ("page before the request", "wait: network and a core", "server: hand-over",
         "server: work", "server: encode", "transfer and parse", "DOM update",
         "to the next frame")


def split(got: dict[str, Any]) -> dict[str, float]:
    """A scrub's parts from SCRUB_JS's answer (ms); a part the version does not mark is
    left out (the old page has no fetch mark and its server no Server-Timing: its wait
    is then the whole first byte)."""
    out = {"total": got["t1"] - got["t0"]}
    req, server = got["req"], got["server"]
    if got["fetch"] is not None:
        out["page before the request"] = got["fetch"] - got["t0"]
    if req is not None:
        own = sum(server.get(k, 0.0) for k in ("queue", "compute", "encode"))
        out["wait: network and a core"] = req[2] - req[0] - own
        if server:
            out["server: hand-over"] = server["queue"]
            out["server: work"] = server["compute"]
            out["server: CPU"] = server["cpu"]
            out["server: encode"] = server["encode"]
            out["inline"] = 1.0 if got["path"] == "inline" else 0.0
        if got["answer"] is not None:
            out["transfer and parse"] = got["answer"] - req[2]
    if got["answer"] is not None and got["shown"] is not None:
        out["DOM update"] = got["shown"] - got["answer"]
    if got["shown"] is not None:
        out["to the next frame"] = got["t1"] - got["shown"]
    return out


Samples = dict[str, list[float]]


def scrubs(pages: dict[str, Page], rng: random.Random, last: int, n: int) -> dict[str, Samples]:
    """``n`` random seqs, each scrubbed to on every page (in turn, the order rotating)
    and then stepped once with ``→`` (timed from Playwright)."""
    out: dict[str, Samples] = {name: {} for name in pages}
    names = list(pages)
    for k, seq in enumerate(rng.randint(1, last - 1) for _ in range(n)):
        for name in names[k % len(names):] + names[:k % len(names)]:
            page = pages[name]
            for part, value in split(page.evaluate(SCRUB_JS, seq)).items():
                out[name].setdefault(part, []).append(value)
            t0 = time.perf_counter()
            page.keyboard.press("ArrowRight")
            shown(page, seq + 1)
            out[name].setdefault("→ key", []).append((time.perf_counter() - t0) * 1000)
    return out


def report_scrubs(when: str, got: dict[str, Samples]) -> None:
    for name, samples in got.items():
        scrub, keys = samples["total"], samples["→ key"]
        print(f"page ({name}): scrub to a random seq, in the page ({when}): "
              f"p50 {pct(scrub, .5):.1f} ms, p95 {pct(scrub, .95):.1f} ms; one → key: "
              f"p50 {pct(keys, .5):.1f} ms, p95 {pct(keys, .95):.1f} ms ({len(scrub)} points; "
              f"mean {statistics.mean(scrub):.1f} ms)", flush=True)
        for part in (*PARTS[:4], "server: CPU", *PARTS[4:]):
            values = samples.get(part)
            if values:
                print(f"      {part}: p50 {pct(values, .5):.1f} ms, p95 {pct(values, .95):.1f} ms"
                      + (" (first byte less the server's time)" if "wait" in part and
                         "server: work" in samples else
                         " (the whole first byte)" if "wait" in part else ""), flush=True)
        if "inline" in samples:
            print(f"      answered on the thread that read the request: "
                  f"{sum(samples['inline']):.0f} of {len(samples['inline'])}", flush=True)


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
    parser.add_argument("--threaded", action="store_true",
                        help="also serve this version with every state answer in a worker "
                             "thread (no answer made on the request's thread)")
    parser.add_argument("--against", type=Path,
                        help="another checkout's viewer to serve and scrub beside this one")
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
        bare, whole, cpu = [], [], []
        for seq in seqs:
            t0 = time.perf_counter()
            viewer.projection(sid, seq)
            bare.append(time.perf_counter() - t0)
        for seq in seqs:
            viewer._recent.clear()  # measure the fold, not the cache of recent answers
            t0, c0 = time.perf_counter(), time.thread_time()
            viewer.state(sid, seq, count=8)  # as the page asks on a scrub
            whole.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        for name, lat in (("at(seq)", bare), ("state(seq, count=8)", whole),
                          ("state(seq, count=8), CPU", cpu)):
            print(f"server: {name} at {len(seqs)} random seqs: p50 {ms(pct(lat, .5))}, "
                  f"p95 {ms(pct(lat, .95))}, max {ms(max(lat))}", flush=True)
        del viewer

        roots = {"now": (ROOT, False),
                 **({"now, every answer in a thread": (ROOT, True)} if args.threaded else {}),
                 **({"before": (args.against, False)} if args.against else {})}
        with ExitStack() as stack:
            bases = {name: stack.enter_context(served(root, url, tmp, threaded=threaded))
                     for name, (root, threaded) in roots.items()}
            pw = stack.enter_context(sync_playwright())
            browser = stack.enter_context(chromium(pw))
            pages: dict[str, Page] = {}
            for name, base in bases.items():
                page = pages[name] = browser.new_page(viewport={"width": 1280, "height": 800})
                t0 = time.perf_counter()
                page.goto(f"{base}/?session={sid}&seq={mid}")
                shown(page, mid)
                cold = time.perf_counter() - t0
                t0 = time.perf_counter()
                page.reload()
                shown(page, mid)
                warm = time.perf_counter() - t0
                print(f"page ({name}): first paint at seq {mid:,}, cold (a fresh server): "
                      f"{ms(cold)}; warm (reload): {ms(warm)}", flush=True)
            print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            early = max(2, args.scrubs // 3)
            report_scrubs("while the marks are built", scrubs(pages, rng, last, early))
            for base in bases.values():
                while not built(base, sid, mid):
                    time.sleep(0.2)
            report_scrubs("the marks built", scrubs(pages, rng, last, args.scrubs))
            print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            page = pages["now"]
            dom = page.evaluate("document.querySelectorAll('#conv .msg').length")
            print(f"page: {dom} messages in the DOM of {messages:,}", flush=True)
            if long_seq is None:
                print("page: no long output at the end of this session", flush=True)
            else:
                long_figures(page, long_seq)
        # Only now, with the pages closed and their servers stopped (the ExitStack, in
        # reverse): a request still on its way (the verify badge's) met the closed store.
        store.close()
        if not args.no_export:
            export_figures(url, sid, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
