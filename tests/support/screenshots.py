"""Screenshots of the viewer's main views for docs/viewer.md (``make screenshots``).

Records the demo session, a fork of it, an imported session whose every string
is hostile, a project mailbox and a long session (a build log of 5,000 lines),
and imports the project's Claude Code, Codex and OpenCode transcripts, in a
throwaway store; serves them, and photographs the page in chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from tests.support.browser import chromium, serving
from tests.viewer.conftest import fill

OUT = Path("docs/img")
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def import_transcripts(store: Store) -> None:
    """Real-looking sessions: the transcripts the importer tests read, as `convlog import`
    writes them (titles, models, working directories, tokens)."""
    from engine.importers.detect import plan_path  # noqa: PLC0415 - only for the pictures
    from engine.importers.write import write_plan  # noqa: PLC0415

    for name in ("claude-code", "codex", "opencode"):
        for path in sorted((TRANSCRIPTS / name).iterdir()):
            if path.is_file():
                write_plan(store, plan_path(path))


def _shown(page: Page, seq: int) -> None:
    page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
    page.wait_for_selector("#verify.ok, #verify.bad")


def record_long(store: Store) -> tuple[str, int]:
    """Many short turns and one build whose log is 5,000 lines; the log's seq."""
    s = Session.create(store, clock=stepping_clock())
    for i in range(300):
        s.user_message(f"step {i}: run the build again")
    m = s.start_message("assistant")
    tool = s.add_tool(m, "call_make", "bash")
    s.tool_input_ready(tool, {"command": "make -k all"})
    s.start_tool(tool, title="make -k all")
    seq = s.complete_tool(tool, "\n".join(
        f"[{i:04d}] cc -O2 -c src/module_{i % 97}.c -o build/module_{i % 97}.o"
        for i in range(5000)), title="make -k all")
    s.complete_message(m, finish="stop")
    return s.id, seq


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'shots.db'}")
        s = fill(store)
        long_sid, long_seq = record_long(store)
        import_transcripts(store)
        app = create_app(store, allow_writes=True, token="docs")
        with serving(app) as base, sync_playwright() as pw, chromium(pw) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.goto(f"{base}/?session={s.demo}&seq=60#token=docs")
            _shown(page, 60)
            page.screenshot(path=str(out / "viewer-scrub.png"))
            page.fill("#filter", "")
            page.select_option("#sort", "title")
            page.screenshot(path=str(out / "viewer-sessions.png"))
            page.select_option("#sort", "updated")
            page.click("#diffbtn")
            page.fill("#da", "20")
            page.fill("#db", "60")
            page.click("#diffform button[type=submit]")
            page.wait_for_selector("#diff .chg")
            page.screenshot(path=str(out / "viewer-diff.png"))
            page.click("#diffclose")
            page.fill("#search", "semicolons")
            page.wait_for_selector(".hit mark")
            page.goto(f"{base}/?session={s.fork}")
            _shown(page, store.version(s.fork))
            page.fill("#search", "parser")
            page.wait_for_selector(".hit mark")
            page.screenshot(path=str(out / "viewer-fork-search.png"))
            page.goto(f"{base}/?session={s.hostile}")
            _shown(page, store.version(s.hostile))
            page.evaluate("document.querySelectorAll('#conv details').forEach(d => d.open = true)")
            page.screenshot(path=str(out / "viewer-escaped.png"))
            page.goto(f"{base}/?session={long_sid}&seq={long_seq}")
            _shown(page, long_seq)
            page.wait_for_selector(".lines-body:not(:empty)")
            page.screenshot(path=str(out / "viewer-long.png"))
            page.goto(f"{base}/?mailbox=webapp")
            page.wait_for_selector("#mailbox .thread")
            page.wait_for_selector("#mblive.ok")
            page.screenshot(path=str(out / "viewer-mailbox.png"))
        store.close()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
