"""A session being imported with ``convlog import --follow`` (a real follower process)
shows up in an open page and grows on screen as its file is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Browser

from engine.store import open_store
from projections.serve.app import create_app
from tests.cli.test_import_follow import _session_lines
from tests.support.browser import serving

ROOT = Path(__file__).resolve().parents[2]


def test_an_imported_session_appears_and_grows_in_the_page(browser: Browser,
                                                           tmp_path: Path) -> None:
    lines = _session_lines(8)
    transcript = tmp_path / "live.jsonl"
    transcript.write_text("", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'live.db'}"
    store = open_store(url)  # the viewer reads; the follower, another process, writes
    follower = subprocess.Popen(
        [sys.executable, "-c", "import sys; from engine.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "import", str(transcript), "--follow", "--store", url,
         "--interval", "0.05"], env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with serving(create_app(store, poll=0.05)) as base:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/")
            page.wait_for_selector("#note:not([hidden])")
            assert page.locator("#tree .sess").count() == 0
            with transcript.open("a", encoding="utf-8") as f:  # the first two turns
                f.writelines(lines[:8])
            link = page.wait_for_selector("#tree .sess", timeout=30_000)
            assert link is not None
            assert (page.text_content("#tree .sess .stitle") or "") == "step 0"
            sid = link.get_attribute("data-sid")
            assert sid is not None
            link.click()
            page.wait_for_selector("#conv .msg")
            first = store.version(sid)
            page.wait_for_selector(f'body[data-shown-seq="{first}"]')
            before = page.locator("#conv .msg").count()
            assert before >= 4  # two prompts and their answers
            # The rest of the session is written while the page is open at its end.
            with transcript.open("a", encoding="utf-8") as f:
                f.writelines(lines[8:])
            page.wait_for_function(
                "() => [...document.querySelectorAll('#conv .msg .part.text')]"
                ".some(n => n.textContent === 'done 7')", timeout=30_000)
            last = store.version(sid)
            assert last > first
            page.wait_for_selector(f'body[data-shown-seq="{last}"]', timeout=30_000)
            assert page.get_attribute("#slider", "max") == str(last)
            assert page.text_content("#live") == "● live"
            assert page.locator("#conv .msg").count() > before
            # The list's counts moved with it.
            page.wait_for_function(
                "(n) => document.querySelector('#tree .sess .meta').textContent"
                ".includes(n + ' events')", arg=str(last), timeout=30_000)
            page.close()
    finally:
        follower.terminate()
        follower.wait(timeout=30)
        store.close()
