"""A diff of thousands of rows is a windowed list in the real page (before: every row in
the DOM; a whole 1M-event session's diff put 39,417 rows, 241k nodes, on the page)."""

from __future__ import annotations

from playwright.sync_api import Browser

from engine.session import Session
from engine.store import open_store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from projections.timetravel import diff
from tests.support.browser import serving

MESSAGES = 1500
MOST_ROWS = 80  # a screenful of 22-px rows and the overscan, whatever the diff's length


def test_a_long_diff_keeps_a_screenful_of_rows(browser: Browser) -> None:
    with open_store("sqlite:///:memory:") as store:
        s = Session.create(store, clock=stepping_clock())
        for i in range(MESSAGES):
            s.user_message(f"message {i}")
        last = store.version(s.id)
        want = [c.kind for c in diff(store, s.id, 0, last).changes]
        with serving(create_app(store)) as base:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(f"{base}/?session={s.id}&seq={last}")
            page.wait_for_selector(f'body[data-shown-seq="{last}"]')
            page.click("#diffbtn")
            page.fill("#da", "0")
            page.fill("#db", str(last))
            page.click("#diffform button[type=submit]")
            page.wait_for_selector("#diff .chg:not(.placeholder)")
            assert f"{len(want):,} change(s)" in (page.text_content("#diff") or "")
            rows = page.locator("#diff .chg").count()
            assert rows <= MOST_ROWS
            kinds = "ns => ns.map(n => n.textContent)"
            first = page.eval_on_selector_all("#diff .chg .kind", kinds)
            assert first == want[:len(first)]
            # Scrolled to the end, the last rows are the diff's last changes.
            page.eval_on_selector("#diff .diff-rows", "r => { r.scrollTop = r.scrollHeight; }")
            page.wait_for_function("""(n) => {
                const rows = [...document.querySelectorAll('#diff .chg')];
                return rows.length && !rows.some(r => r.classList.contains('placeholder')) &&
                       rows[rows.length - 1].dataset.index === String(n - 1);
            }""", arg=len(want))
            tail = page.eval_on_selector_all("#diff .chg .kind", kinds)
            assert tail == want[len(want) - len(tail):]
            assert page.locator("#diff .chg").count() <= MOST_ROWS
            page.close()
