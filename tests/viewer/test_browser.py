"""The page in a real browser (Debian chromium through Playwright), against a real server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Browser, Page, Request

from engine.events import SessionImported
from engine.session import Session
from engine.store import MemoryStore
from engine.store.base import Store
from projections import views as v
from projections.demo import stepping_clock
from projections.mailbox import Mailbox
from projections.serve import render_html
from projections.serve.app import create_app
from projections.serve.state import Viewer
from projections.timetravel import at, diff
from tests.support.browser import serving
from tests.viewer.conftest import IMG, SCRIPT, B, Sessions

TOKEN = "browser-token"


@contextmanager
def opened(browser: Browser, store: Store, path: str, **kw: Any) -> Iterator[Page]:
    with serving(create_app(store, poll=0.05, **kw)) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            page.goto(base + path)
            yield page
        finally:
            page.close()
        assert errors == []


def wait_seq(page: Page, seq: int) -> None:
    page.wait_for_selector(f'body[data-shown-seq="{seq}"]')


def shown(page: Page) -> dict[str, Any]:
    """What a person sees: parts in order, texts, tool badges, the highlighted part."""
    data: dict[str, Any] = page.evaluate("""() => ({
        parts: [...document.querySelectorAll('#conv [data-part]')].map(n => n.dataset.part),
        texts: [...document.querySelectorAll('#conv .part.text')]
            .map(n => n.dataset.source ?? n.textContent),
        tools: [...document.querySelectorAll('#conv .part.tool .tool-head .st')]
            .map(n => n.textContent),
        hl: [...document.querySelectorAll('#conv .hl')]
            .map(n => n.dataset.part || n.dataset.msg),
    })""")
    return data


def visible(page: Page) -> dict[str, Any]:
    got = shown(page)
    return {k: got[k] for k in ("parts", "texts", "tools")}


def expected(store: Store, sid: str, seq: int) -> dict[str, Any]:
    msgs = at(store, sid, seq, use_snapshots=False).messages()
    parts = [p for m in msgs for p in m.parts]
    tools: list[str] = []
    for p in parts:
        if isinstance(p, v.ToolPart):
            tools.append(p.state.TAG)
            if p.approval is not None:
                tools.append(f"approval {p.approval.state}")
    return {"parts": [p.id for p in parts],
            "texts": [p.text for p in parts if isinstance(p, v.TextPart)],
            "tools": tools}


def record_url(seen: list[str], request: Request) -> None:
    seen.append(request.url)


def url_seq(page: Page) -> int:
    return int(parse_qs(urlparse(page.url).query)["seq"][0])


def test_scrub_shows_the_state_at_each_seq(browser: Browser,
                                           viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    last = store.version(s.demo)
    with opened(browser, store, f"/?session={s.demo}&seq=30") as page:
        wait_seq(page, 30)
        got = shown(page)
        assert {k: got[k] for k in ("parts", "texts", "tools")} == expected(store, s.demo, 30)
        event = next(iter(store.read(s.demo, 30, 30)))
        assert got["hl"] == [getattr(event, "part_id", None) or getattr(event, "message_id")]  # noqa: B009
        page.keyboard.press("ArrowRight")
        wait_seq(page, 31)
        assert url_seq(page) == 31  # the URL keeps the seq
        starts = [e.seq for e in store.read(s.demo) if type(e).__name__ == "MessageStarted"]
        page.keyboard.press("PageUp")
        wait_seq(page, starts[-1])
        page.keyboard.press("PageUp")
        wait_seq(page, starts[0])
        page.keyboard.press("PageDown")
        wait_seq(page, starts[1])
        page.keyboard.press("End")
        wait_seq(page, last)
        page.keyboard.press("ArrowLeft")
        wait_seq(page, last - 1)
        for seq in (5, 17, 45, 60, last):
            page.fill("#slider", str(seq))  # the slider, as a drag would set it
            wait_seq(page, seq)
            assert visible(page) == expected(store, s.demo, seq)
        page.keyboard.press("Home")
        wait_seq(page, 0)
        assert shown(page)["parts"] == []
        # The check runs in a child process: on a loaded machine it can outlast the scrub.
        page.wait_for_function(
            "() => document.getElementById('verify').textContent.includes('verified')")


def test_diff_two_points(browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with opened(browser, store, f"/?session={s.demo}&seq=40") as page:
        wait_seq(page, 40)
        page.click("#diffbtn")
        page.fill("#da", "10")
        page.fill("#db", "40")
        page.click("#diffform button[type=submit]")
        page.wait_for_selector("#diff .chg")
        kinds = page.eval_on_selector_all("#diff .chg .kind", "ns => ns.map(n => n.textContent)")
        assert kinds == [c.kind for c in diff(store, s.demo, 10, 40).changes]
        grown = page.eval_on_selector_all("#diff .chg ins", "ns => ns.map(n => n.textContent)")
        want = Viewer(store).diff(s.demo, 10, s.demo, 40)["changes"]
        assert grown == [c["grown"] for c in want if c["kind"] == "text-grown"]
        assert grown  # the text that grew between the two points is highlighted


def test_fork_from_the_page(browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    before = {i.id for i in store.sessions()}
    with opened(browser, store, f"/?session={s.demo}&seq=12#token={TOKEN}",
                allow_writes=True, token=TOKEN) as page:
        wait_seq(page, 12)
        page.click("#forkbtn")
        page.locator(".sess").nth(len(before)).wait_for()
        (child,) = {i.id for i in store.sessions()} - before
        assert store.lineage(child) == [(s.demo, 12), (child, None)]
        # The new branch is in the tree, under its parent, and open.
        page.wait_for_selector(f'.tree .tree .sess.current[data-sid="{child}"]')
        assert page.get_attribute("#title", "title") == child


def test_fork_button_is_absent_without_writes(browser: Browser,
                                              viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with opened(browser, store, f"/?session={s.demo}#token={TOKEN}") as page:
        wait_seq(page, store.version(s.demo))
        assert page.is_hidden("#forkbtn")


def test_a_live_append_arrives(browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with opened(browser, store, f"/?session={s.fork}") as page:
        last = store.version(s.fork)
        wait_seq(page, last)
        page.wait_for_selector("#live.ok")

        def write() -> None:  # another writer, as an agent in another process would be
            Session.open(store, s.fork).user_message("a live message from elsewhere")
        t = threading.Thread(target=write)
        t.start()
        t.join()
        page.wait_for_selector("text=a live message from elsewhere")
        wait_seq(page, store.version(s.fork))
        assert store.version(s.fork) > last


def test_search_finds_a_session(browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with opened(browser, store, "/") as page:
        page.wait_for_selector(".sess")
        page.fill("#search", "semicolons")
        hit = page.wait_for_selector(".hit mark")
        assert hit is not None
        assert hit.text_content() == "semicolons"
        page.click(".hit")
        wait_seq(page, store.version(s.demo))
        assert page.get_attribute("#title", "title") == s.demo


HOSTILE_TEXTS = [  # each as it must read on screen, somewhere in the page
    f"output: {SCRIPT}", f"error: {SCRIPT}", f"thinking {SCRIPT}", f"prompt {SCRIPT}",
    f"description {IMG}", f"retry {SCRIPT}", f"{SCRIPT}.py", f"{IMG}.txt", "bash<b>bold</b>",
    f"grep{IMG}", f"agent{B}", f"model{IMG}", f"aborted {SCRIPT}", f"stop{B}", f"text/{B}",
    f"yes {SCRIPT}", f"snapshot {IMG}", f"patch {IMG}",
]
NO_MARKUP = r"""() => ({
    pwned: window.__pwned === undefined ? null : window.__pwned,
    scripts: [...document.querySelectorAll('script')]
        .filter(n => !/\/static\/(app|md)\.js$/.test(n.src)).length,
    imgs: document.querySelectorAll('img').length,
    bolds: [...document.querySelectorAll('b')].filter(n => n.parentElement.id !== 'event').length,
})"""


def assert_no_markup(page: Page) -> None:
    assert page.evaluate(NO_MARKUP) == {"pwned": None, "scripts": 0, "imgs": 0, "bolds": 0}


def test_log_strings_render_as_text(browser: Browser,
                                    viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    last = store.version(s.hostile)
    with opened(browser, store, f"/?session={s.hostile}") as page:
        wait_seq(page, last)
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        assert_no_markup(page)
        conv = page.text_content("#conv") or ""
        missing = [t for t in HOSTILE_TEXTS if t not in conv]
        assert missing == []
        outputs = page.eval_on_selector_all("#conv .part.tool pre",
                                            "ns => ns.map(n => n.textContent)")
        assert f"output: {SCRIPT}" in outputs
        assert page.text_content("#conv .tool-head .name") == "bash<b>bold</b>"
        # The import's source label, in the tree and over the conversation.
        label = f"imported from claude-code{B} {B}"
        # Opened by its address, the session is painted before the list (with the
        # labels) arrives: wait for the list, then compare.
        page.wait_for_selector("#tree .sess")
        page.wait_for_function("() => document.querySelector('#source').textContent !== ''")
        assert page.text_content("#source") == label
        assert page.get_attribute("#source", "title") == f"{SCRIPT}.jsonl"
        # In the list: the tool and the model; the whole label and the file on hover.
        assert page.text_content(f'.sess[data-sid="{s.hostile}"] .src') == \
            f"claude-code{B} · model{IMG}"
        assert page.get_attribute(f'.sess[data-sid="{s.hostile}"] .src', "title") == \
            f"{label} · {SCRIPT}.jsonl"
        # The title is the first prompt, as text.
        assert page.text_content(f'.sess[data-sid="{s.hostile}"] .stitle') == \
            f"please echo {IMG}"
        # Every event under the slider, and the state at every seq.
        for seq in range(last, -1, -1):
            page.keyboard.press("ArrowLeft") if seq < last else None
            wait_seq(page, seq)
            assert_no_markup(page)
        page.keyboard.press("End")
        wait_seq(page, last)
        page.fill("#search", "<script>")
        page.wait_for_selector(".hit mark")
        assert_no_markup(page)


def test_mailbox_strings_render_as_text(browser: Browser,
                                        viewer_store: tuple[Store, Sessions]) -> None:
    store, _ = viewer_store
    mb = Mailbox(store, "evil", clock=stepping_clock())
    mb.create_project(f"/w/{IMG}", name=SCRIPT)
    mb.register_agent(f"a{B}", name=IMG)
    mb.register_agent("b", name=SCRIPT)
    for agent in (f"a{B}", "b"):
        mb.assign(agent)
    sent = mb.send(mb.authenticate(f"a{B}"), "b", f"hello {SCRIPT}", related_task_id=IMG)
    mb.reply(mb.authenticate("b"), sent.id, f"answer {IMG}")
    with opened(browser, store, "/?mailbox=evil", public_mailbox=True) as page:
        page.wait_for_selector(f'#mailbox [data-mail="{sent.id}"]')
        assert_no_markup(page)
        text = page.text_content("#mailbox") or ""
        for shown in (f"mailbox · {SCRIPT}", f"/w/{IMG}", IMG, SCRIPT, f"hello {SCRIPT}",
                      f"answer {IMG}", f"task {IMG}", "b: read", f"a{B}: sent"):
            assert shown in text, shown
        assert page.text_content('.proj[data-project="evil"] .id') == SCRIPT


def test_exported_file_scrubs_offline(browser: Browser, tmp_path: Path,
                                      viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    for sid in (s.demo, s.hostile):
        path = tmp_path / f"{sid}.html"
        path.write_text(render_html(store, sid), encoding="utf-8")
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", partial(record_url, requests))
        page.goto(path.as_uri())
        last = store.version(sid)
        wait_seq(page, last)
        assert visible(page) == expected(store, sid, last)
        page.keyboard.press("Home")
        wait_seq(page, 0)
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        wait_seq(page, 3)
        assert visible(page) == expected(store, sid, 3)
        assert page.evaluate("window.__pwned") is None
        assert requests == [path.as_uri()]  # nothing fetched: the file is self-contained
        page.close()


def test_the_mailbox_page_follows_the_log(browser: Browser,
                                          viewer_store: tuple[Store, Sessions]) -> None:
    store, _ = viewer_store
    box = Mailbox(store, "webapp", clock=stepping_clock())
    view = box.refresh()
    with opened(browser, store, "/", public_mailbox=True) as page:
        page.click('.proj[data-project="webapp"]')
        page.wait_for_selector("#mailbox .thread")
        assert urlparse(page.url).query == "mailbox=webapp"
        # Agents with their unread counts, as the log says.
        chips = page.eval_on_selector_all("#mailbox .agent[data-agent]",
                                          "ns => ns.map(n => [n.dataset.agent, n.textContent])")
        unread = {a: len(view.unread("webapp", a)) for a, _ in chips}
        assert [a for a, _ in chips] == ["planner", "coder", "tester"]
        for agent, text in chips:
            want = f" · {unread[agent]} unread" if unread[agent] else ""
            assert text in {f"{name}{want}" for name in ("Planner", "Coder", "Tester")}, agent
        # Threads: an answer sits in its question's thread; every receiver has its state.
        threads = page.eval_on_selector_all("#mailbox .thread", """ns => ns.map(t =>
            [...t.querySelectorAll('.mail')].map(m => m.dataset.mail))""")
        ask = next(m for m in view.messages.values() if m.related_task_id == "T-12")
        (answer,) = [m for m in view.messages.values() if m.reply_to == ask.id]
        assert [ask.id, answer.id] in threads
        assert sum(len(t) for t in threads) == len(view.messages)
        states = page.eval_on_selector_all(
            f'[data-mail="{ask.id}"] .receipts .st', "ns => ns.map(n => n.textContent)")
        assert states == [f"{r}: {s}" for r, s in view.receipts(ask.id).items()]
        # One agent's messages only.
        page.click('#mailbox .agent[data-agent="tester"]')
        page.wait_for_selector('#mailbox .agent.current[data-agent="tester"]')
        shown = page.eval_on_selector_all("#mailbox .mail", "ns => ns.map(n => n.dataset.mail)")
        assert shown == [m.id for m in view.conversation("webapp", "tester")]
        # Live: another writer sends, and the coder reads; the page follows.
        page.click("#mailbox .agent:not([data-agent])")
        page.wait_for_selector("#mailbox .agent.current:not([data-agent])")
        page.wait_for_selector("#mblive.ok")
        coder = box.authenticate("coder")
        late = box.send(coder, "tester", "Fixed on the branch, please rerun.")
        page.wait_for_selector(f'[data-mail="{late.id}"] .st[data-receiver="tester"].sent')
        box.mark_read(box.authenticate("tester"), [late.id])
        page.wait_for_selector(f'[data-mail="{late.id}"] .st[data-receiver="tester"].read')


def test_back_and_forward_walk_what_was_opened(browser: Browser,
                                               viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with opened(browser, store, f"/?session={s.demo}&seq=20", public_mailbox=True) as page:
        wait_seq(page, 20)
        page.keyboard.press("ArrowRight")
        wait_seq(page, 21)
        page.click(f'.sess[data-sid="{s.fork}"]')
        wait_seq(page, store.version(s.fork))
        page.click('.proj[data-project="webapp"]')
        page.wait_for_selector("#mailbox .thread")
        page.go_back()
        page.wait_for_selector(f'.sess.current[data-sid="{s.fork}"]')
        wait_seq(page, store.version(s.fork))
        assert page.is_visible("#conv")
        assert page.is_hidden("#mailbox")
        page.go_back()
        wait_seq(page, 21)  # the seq the session was left at
        assert page.get_attribute("#title", "title") == s.demo
        page.go_forward()
        wait_seq(page, store.version(s.fork))
        assert page.get_attribute("#title", "title") == s.fork


def test_a_new_user_walks_into_every_corner(browser: Browser, tmp_path: Path,
                                            viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    # A session id that is not in the store, and seqs that are not numbers or too big.
    with opened(browser, store, "/?session=0190e0e0-0000-7000-8000-000000000000") as page:
        page.wait_for_selector("#banner:not([hidden])")
        assert "no session" in (page.text_content("#banner") or "")
    last = store.version(s.demo)
    for seq in ("abc", "99999", "-4"):
        with opened(browser, store, f"/?session={s.demo}&seq={seq}") as page:
            want = 0 if seq == "-4" else last
            wait_seq(page, want)
            assert url_seq(page) == want
    # A session with no events, and one with events but no message yet.
    empty = Session.create(store)
    bare = Session.create(store)
    bare.append([SessionImported(format="codex", source="rollout.jsonl", original_id="")])
    with opened(browser, store, f"/?session={empty.id}") as page:
        wait_seq(page, 0)
        assert page.text_content("#note") == "this session has no events yet"
        page.keyboard.press("ArrowRight")  # nowhere to go: nothing breaks
        page.keyboard.press("End")
        assert page.text_content("#seqlabel") == "seq 0 / 0"
    with opened(browser, store, f"/?session={bare.id}") as page:
        wait_seq(page, 1)
        assert page.text_content("#note") == "no messages yet at seq 1"
        assert page.text_content("#source") == "imported from codex"
    # A search nobody matches says so.
    with opened(browser, store, "/") as page:
        page.fill("#search", "words that appear nowhere")
        page.wait_for_selector(".hit.none")
    # An empty store.
    other = MemoryStore()
    with opened(browser, other, "/") as page:
        page.wait_for_selector("#tree .empty")
        page.wait_for_selector("#note:not([hidden])")
        assert page.text_content("#note") == "this store has no sessions yet"
        assert page.is_hidden("#mailboxes")
