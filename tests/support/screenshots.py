"""Screenshots of the viewer's main views for docs/viewer.md (``make screenshots``).

Records the demo session, a fork of it and a session with a hostile tool output
in a throwaway store, serves them, and photographs the page in Debian chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from engine.store import open_store
from projections.serve.app import create_app
from tests.support.browser import chromium, serving
from tests.viewer.conftest import fill

OUT = Path("docs/img")


def _shown(page: Page, seq: int) -> None:
    page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
    page.wait_for_selector("#verify.ok, #verify.bad")


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'shots.db'}")
        s = fill(store)
        app = create_app(store, allow_writes=True, token="docs")
        with serving(app) as base, sync_playwright() as pw, chromium(pw) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.goto(f"{base}/?session={s.demo}&seq=60#token=docs")
            _shown(page, 60)
            page.screenshot(path=str(out / "viewer-scrub.png"))
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
            page.screenshot(path=str(out / "viewer-escaped.png"))
        store.close()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
