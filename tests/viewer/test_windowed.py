"""A long session in the real page: only what is on screen is in the DOM.

Thousands of messages, a tool output of 50,000 lines and a text of 300 lines:
scrolling through the whole session keeps a bounded number of message nodes,
every message is shown on the way, a seq brings its message on screen, and the
long output is read line by line as its box scrolls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from playwright.sync_api import Browser, Page

from engine.events import ToolCompleted
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from projections.timetravel import at
from tests.support.browser import serving

MESSAGES = 1500
OUTPUT_LINES = 50_000
MAX_NODES = 24  # app.js: the most messages the page keeps in its DOM


@attrs.frozen
class Long:
    store: Store
    sid: str
    tool_seq: int  # the event that completed the long tool call
    middle_seq: int  # an event of a message in the middle of the session


def output_line(i: int) -> str:
    return f"line {i} of the build log"


@pytest.fixture(scope="module")
def long_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Long]:
    path = tmp_path_factory.mktemp("long") / "long.db"
    with open_store(f"sqlite:///{path}", durability="batched") as writer:
        s = Session.create(writer, clock=stepping_clock())
        middle_seq = 0
        for i in range(MESSAGES):
            s.user_message(f"message {i}" + ("\nsecond line" if i % 3 else ""))
            if i == MESSAGES // 2:
                middle_seq = s.version
        m = s.start_message("assistant")
        answer = s.add_text(m)
        s.text_delta(answer, "\n".join(f"a long answer, line {i}" for i in range(300)))
        s.end_part(answer)
        tool = s.add_tool(m, "call_long", "bash")
        s.tool_input_ready(tool, {"command": "make"})
        s.start_tool(tool)
        s.complete_tool(tool, "\n".join(output_line(i) for i in range(OUTPUT_LINES)))
        tool_seq = s.version
        s.complete_message(m, finish="stop")
        s.user_message("the last message")
        writer.flush()
        sid = s.id
    store = open_store(f"sqlite:///{path}")
    try:
        assert isinstance(next(iter(store.read(sid, tool_seq, tool_seq))), ToolCompleted)
        yield Long(store, sid, tool_seq, middle_seq)
    finally:
        store.close()


def dom(page: Page) -> dict[str, Any]:
    data: dict[str, Any] = page.evaluate("""() => {
        const conv = document.getElementById('conv');
        const box = conv.getBoundingClientRect();
        const msgs = [...conv.querySelectorAll('.msg')];
        const onScreen = msgs.filter(n => {
            const r = n.getBoundingClientRect();
            return r.bottom > box.top && r.top < box.bottom;
        });
        return {nodes: msgs.length,
                placeholders: conv.querySelectorAll('.msg.placeholder').length,
                indexes: msgs.filter(n => n.dataset.msg).map(n => Number(n.dataset.index)),
                on_screen: onScreen.map(n => n.dataset.msg || null),
                top: conv.scrollTop, height: conv.clientHeight, full: conv.scrollHeight};
    }""")
    return data


def settled(page: Page) -> dict[str, Any]:
    """The list once the messages on screen have arrived and been measured."""
    page.wait_for_function("""() => {
        const conv = document.getElementById('conv');
        return conv.querySelectorAll('.msg').length > 0 &&
               conv.querySelectorAll('.msg.placeholder').length === 0;
    }""")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return dom(page)


def on_screen(page: Page, selector: str) -> bool:
    return bool(page.evaluate("""(sel) => {
        const n = document.querySelector(sel);
        if (!n) return false;
        const r = n.getBoundingClientRect();
        const b = document.getElementById('conv').getBoundingClientRect();
        return r.bottom > b.top && r.top < b.bottom;
    }""", selector))


def test_scrolling_the_whole_session_keeps_the_dom_bounded(browser: Browser,
                                                          long_session: Long) -> None:
    store, sid = long_session.store, long_session.sid
    total = len(at(store, sid).messages())
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 700})
        page.goto(f"{base}/?session={sid}&seq=0")
        page.wait_for_selector('body[data-shown-seq="0"]')
        page.keyboard.press("End")
        page.wait_for_selector(f'body[data-shown-seq="{store.version(sid)}"]')
        seen: set[int] = set()
        # To the top, as a person would (again if a render still settling after the
        # jump to the end moved the view): the first message on screen.
        for _ in range(5):
            page.evaluate("document.getElementById('conv').scrollTop = 0")
            if 0 in settled(page)["indexes"]:
                break
        most = 0
        for _ in range(1000):  # bounded: a list that never reaches its end fails below
            got = settled(page)
            most = max(most, got["nodes"])
            seen.update(got["indexes"])
            moved = page.evaluate("""(dy) => {
                const conv = document.getElementById('conv');
                const before = conv.scrollTop;
                conv.scrollTop += dy;
                return conv.scrollTop !== before;
            }""", got["height"])
            if not moved:  # the bottom
                break
        assert most <= MAX_NODES
        assert seen == set(range(total))  # every message was on screen on the way down
        page.close()


def test_a_seq_brings_its_message_on_screen(browser: Browser, long_session: Long) -> None:
    store, sid = long_session.store, long_session.sid
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 700})
        for seq in (long_session.middle_seq, 2, store.version(sid) - 1, 1000):
            page.goto(f"{base}/?session={sid}&seq={seq}")
            page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
            event = next(iter(store.read(sid, seq, seq)))
            mid = getattr(event, "message_id")  # noqa: B009
            settled(page)
            assert on_screen(page, f'#conv [data-msg="{mid}"]'), seq
            assert page.locator("#conv .hl").count() == 1
            assert dom(page)["nodes"] <= MAX_NODES
        # The slider jumps across the session the same way.
        for seq in (5, long_session.middle_seq + 7):
            page.fill("#slider", str(seq))
            page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
            mid = getattr(next(iter(store.read(sid, seq, seq))), "message_id")  # noqa: B009
            settled(page)
            assert on_screen(page, f'#conv [data-msg="{mid}"]'), seq
        page.close()


def test_a_50k_line_output_is_read_as_it_scrolls(browser: Browser, long_session: Long) -> None:
    store, sid, seq = long_session.store, long_session.sid, long_session.tool_seq
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 700})
        page.goto(f"{base}/?session={sid}&seq={seq}")
        page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
        box = page.wait_for_selector(f'#conv .lines[data-total="{OUTPUT_LINES}"]')
        assert box is not None
        body = '#conv .lines[data-total="50000"] .lines-body'
        page.wait_for_function("(sel) => document.querySelector(sel).textContent.length > 0",
                               arg=body)
        first = page.text_content(body) or ""
        assert first.split("\n")[0] == output_line(0)
        assert len(first.split("\n")) <= 60  # the lines on screen and some, not 50,000
        box.evaluate("b => { b.scrollTop = b.scrollHeight; }")
        page.wait_for_function("([sel, last]) => document.querySelector(sel).textContent"
                               ".endsWith(last)", arg=[body, output_line(OUTPUT_LINES - 1)])
        assert len((page.text_content(body) or "").split("\n")) <= 60
        # The 300-line answer is a line box too, and the page never held the whole output.
        assert page.locator('#conv .lines[data-total="300"]').count() == 1
        html = page.evaluate("document.getElementById('conv').textContent.length")
        assert html < 50_000
        page.close()
