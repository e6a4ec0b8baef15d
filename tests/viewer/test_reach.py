"""Every message reachable, and the touched part on screen, in a real browser.

Messages of very different heights (one line, forty lines, a tool call), as in a real
Claude Code session. Before the fix, after scrolling up, scrolling down stopped early
(the list was swapped before its spacers were re-measured, so the browser clamped
scrollTop), and after a scrub the part the event touched could be off screen.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import attrs
import pytest
from playwright.sync_api import Browser, Page

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from projections.timetravel import at
from tests.support.browser import serving

TURNS = 160


@attrs.frozen
class Varied:
    store: Store
    sid: str


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Varied]:
    rng = random.Random(28)
    path = tmp_path_factory.mktemp("varied") / "v.db"
    with open_store(f"sqlite:///{path}", durability="batched") as writer:
        s = Session.create(writer, clock=stepping_clock())
        for i in range(TURNS):
            lines = rng.choice([1, 1, 2, 3, 8, 25, 40])
            s.user_message("\n".join(f"prompt {i}, line {k}" for k in range(lines)))
            m = s.start_message("assistant")
            text = s.add_text(m)
            for k in range(rng.choice([1, 2, 6, 30])):
                s.text_delta(text, f"answer {i}, line {k}\n")
            s.end_part(text)
            if i % 3 == 0:
                tool = s.add_tool(m, f"call_{i}", "bash")
                s.tool_input_ready(tool, {"command": f"make step{i}"})
                s.start_tool(tool)
                s.complete_tool(tool, "\n".join(f"out {k}" for k in range(rng.choice([1, 12]))))
            s.complete_message(m, finish="stop")
        writer.flush()
        sid = s.id
    store = open_store(f"sqlite:///{path}")
    try:
        yield Varied(store, sid)
    finally:
        store.close()


SEEN = """() => {
    const conv = document.getElementById('conv');
    const box = conv.getBoundingClientRect();
    return [...conv.querySelectorAll('.msg[data-msg]')].filter(n => {
        const r = n.getBoundingClientRect();
        return r.bottom > box.top + 1 && r.top < box.bottom - 1;
    }).map(n => n.dataset.msg);
}"""


def settle(page: Page) -> None:
    page.wait_for_function("""() => {
        const conv = document.getElementById('conv');
        return conv.querySelectorAll('.msg[data-msg]').length > 0 &&
               conv.querySelectorAll('.msg.placeholder').length === 0;
    }""")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def scroll_until_stuck(page: Page, dy: int, seen: set[str]) -> None:
    for _ in range(2000):  # bounded: the assertion after says whether the end was reached
        settle(page)
        seen.update(page.evaluate(SEEN))
        moved = page.evaluate("""(dy) => {
            const conv = document.getElementById('conv');
            const before = conv.scrollTop;
            conv.scrollTop += dy;
            return conv.scrollTop !== before;
        }""", dy)
        if not moved:
            settle(page)
            seen.update(page.evaluate(SEEN))
            return


@pytest.mark.parametrize("step", [250, 560])  # the view is 596 px high
def test_after_scrolling_up_scrolling_down_reaches_every_message(
        browser: Browser, varied: Varied, step: int) -> None:
    store, sid = varied.store, varied.sid
    last = store.version(sid)
    ids = [m.info.id for m in at(store, sid, last).messages()]
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 700})
        page.goto(f"{base}/?session={sid}&seq={last}")
        page.wait_for_selector(f'body[data-shown-seq="{last}"]')
        up: set[str] = set()
        scroll_until_stuck(page, -step, up)
        assert ids[0] in up  # the top was reached
        down: set[str] = set()
        scroll_until_stuck(page, step, down)
        missing = [i for i, mid in enumerate(ids) if mid not in down]
        assert missing == []
        page.close()


def test_after_a_scrub_the_touched_part_is_on_screen(browser: Browser, varied: Varied) -> None:
    store, sid = varied.store, varied.sid
    last = store.version(sid)
    rng = random.Random(5)
    seqs = [rng.randint(1, last) for _ in range(40)]
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 700})
        page.goto(f"{base}/?session={sid}&seq={last}")
        page.wait_for_selector(f'body[data-shown-seq="{last}"]')
        off: list[int] = []
        for seq in seqs:
            page.fill("#slider", str(seq))
            page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
            settle(page)
            event = next(iter(store.read(sid, seq, seq)))
            part = getattr(event, "part_id", None)
            mid = getattr(event, "message_id")  # noqa: B009
            sel = f'#conv [data-part="{part}"]' if part else f'#conv [data-msg="{mid}"]'
            visible = page.evaluate("""(sel) => {
                const n = document.querySelector(sel);
                if (!n || !n.classList.contains('hl')) return false;
                const r = n.getBoundingClientRect();
                const b = document.getElementById('conv').getBoundingClientRect();
                // on screen: wholly when it fits, else it covers part of the view
                return r.height <= b.height ? r.top >= b.top - 1 && r.bottom <= b.bottom + 1
                                            : r.bottom > b.top && r.top < b.bottom;
            }""", sel)
            if not visible:
                off.append(seq)
        assert off == []
        page.close()
