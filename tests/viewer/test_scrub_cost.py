"""What a scrub costs the page, in a real browser: a step renders only the message it
changed, the marks are sent once per version, and a drag keeps one request in flight
(for the latest seq only: see test_scrub_wall.py).

benchmarks/viewer.py measures the latency these buy at 1M events; these tests hold the
behaviour that buys it, each failing before it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Browser, Page, Request

from engine import events as ev
from engine.session import Session
from engine.store import MemoryStore
from projections.demo import stepping_clock
from projections.serve.state import Viewer
from tests.viewer.test_browser import expected, opened, shown, wait_seq

TURNS = 6


def conversation() -> tuple[MemoryStore, str, list[int]]:
    """Six question-and-answer turns, each answer streamed in five deltas; the seqs of
    the last answer's deltas."""
    store = MemoryStore()
    s = Session.create(store, clock=stepping_clock())
    deltas: list[int] = []
    for i in range(TURNS):
        s.user_message(f"question {i}: " + "words " * 30)
        m = s.start_message("assistant")
        p = s.add_text(m)
        for k in range(5):
            s.text_delta(p, f"answer {i} piece {k}. ")
            deltas.append(store.version(s.id))
        s.end_part(p)
        s.complete_message(m, finish="stop")
    return store, s.id, deltas[-5:]


def all_there(page: Page) -> None:
    page.wait_for_function("() => document.querySelectorAll('#conv .msg:not(.placeholder)')"
                           f".length == {TURNS * 2}")


def tag_nodes(page: Page) -> None:
    page.evaluate("() => document.querySelectorAll('#conv .msg').forEach(n => { n.__kept = 1; })")


def kept(page: Page) -> dict[str, bool]:
    return dict(page.evaluate("""() => [...document.querySelectorAll('#conv .msg')]
        .map(n => [n.dataset.msg, n.__kept === 1])"""))


def test_a_step_renders_only_the_message_the_event_changed(browser: Browser) -> None:
    store, sid, deltas = conversation()
    seq = deltas[1]
    with opened(browser, store, f"/?session={sid}&seq={seq}") as page:
        page.set_viewport_size({"width": 1280, "height": 2400})  # every message on screen
        wait_seq(page, seq)
        all_there(page)
        tag_nodes(page)
        page.keyboard.press("ArrowRight")  # a delta to the last answer
        wait_seq(page, seq + 1)
        all_there(page)  # the answer holds 8 messages: the list asks for the others
        after = kept(page)
        event = next(iter(store.read(sid, seq + 1, seq + 1)))
        assert isinstance(event, ev.TextDelta)
        changed = event.message_id
        assert len(after) == TURNS * 2
        assert {m for m, same in after.items() if not same} == {changed}
        got = shown(page)
        assert {k: got[k] for k in ("parts", "texts", "tools")} == expected(store, sid, seq + 1)
        # The outline follows the event: the kept nodes carry none from the last seq.
        assert got["hl"] == [event.part_id]
        # A jump far back: the messages that are the same again keep their nodes too, and
        # the page shows exactly that state.
        first = deltas[0] - 40
        page.fill("#slider", str(first))
        wait_seq(page, first)
        got = shown(page)
        assert {k: got[k] for k in ("parts", "texts", "tools")} == expected(store, sid, first)


def state_requests(seen: list[str], request: Request) -> None:
    if "/state?" in request.url:
        seen.append(request.url)


def test_the_marks_are_sent_once_per_version(browser: Browser) -> None:
    store, sid, deltas = conversation()
    seen: list[str] = []
    with opened(browser, store, f"/?session={sid}&seq={deltas[0]}") as page:
        page.on("request", lambda r: state_requests(seen, r))
        wait_seq(page, deltas[0])
        for seq in deltas[1:]:
            page.keyboard.press("ArrowRight")
            wait_seq(page, seq)
        asked = [parse_qs(urlparse(u).query) for u in seen if "start=" not in u]
        assert len(asked) == len(deltas) - 1
        assert all(q.get("marks") == ["0"] for q in asked), seen
        # The marks held still move: PgUp goes to the start of the last answer.
        page.keyboard.press("PageUp")
        marks = [e.seq for e in store.read(sid) if type(e).__name__ == "MessageStarted"]
        wait_seq(page, max(m for m in marks if m < deltas[-1]))


def test_a_drag_keeps_one_request_in_flight_and_ends_on_its_last_seq(
        browser: Browser) -> None:
    store, sid, _ = conversation()
    last = store.version(sid)
    seen: list[str] = []
    with opened(browser, store, f"/?session={sid}&seq=1") as page:
        wait_seq(page, 1)
        page.on("request", lambda r: state_requests(seen, r))
        # Forty input events in one task, as a fast drag gives them.
        page.evaluate("""(last) => {
            const s = document.getElementById('slider');
            for (let i = 1; i <= 40; i++) {
                s.value = String(Math.round(i * last / 40));
                s.dispatchEvent(new Event('input'));
            }
        }""", last)
        wait_seq(page, last)
        asked = [u for u in seen if "start=" not in u]
        # The first seq's request, then the latest seq's when it is in: not one per event.
        assert len(asked) <= 3, asked
        assert parse_qs(urlparse(asked[-1]).query)["seq"] == [str(last)]
        page.wait_for_timeout(300)  # nothing older lands after it
        assert page.get_attribute("body", "data-shown-seq") == str(last)


def test_after_a_scrub_the_list_fetches_only_what_it_lacks(browser: Browser) -> None:
    """The answer to a scrub holds 8 messages around the focus; a window that needs more
    on both sides fetches them, and not those 8 again."""
    store = MemoryStore()
    s = Session.create(store, clock=stepping_clock())
    for i in range(30):
        s.user_message(f"short question {i}")
    last = store.version(s.id)
    seen: list[str] = []
    with opened(browser, store, f"/?session={s.id}&seq={last}") as page:
        page.set_viewport_size({"width": 1280, "height": 2000})  # ~24 short messages
        wait_seq(page, last)
        # The list comes after the first paint of a session opened by its address, and
        # its arrival drops the kept nodes (a kept node may lack a subagent's link):
        # scrub once it is in, so the requests counted are the scrub's own.
        page.wait_for_selector("#tree .sess")
        page.on("request", lambda r: state_requests(seen, r))
        middle = last // 2
        page.fill("#slider", str(middle))
        wait_seq(page, middle)
        page.wait_for_function("() => !document.querySelector('#conv .msg.placeholder')")
        answer = next(parse_qs(urlparse(u).query) for u in seen if "start=" not in u)
        assert answer["count"] == ["8"]
        held = page.evaluate("() => [...document.querySelectorAll('#conv .msg')].length")
        assert held > 8  # the window needed more than the answer
        start = Viewer(store).state(s.id, middle, count=8)["start"]
        window = set(range(start, start + 8))  # what the answer held
        for url in (u for u in seen if "start=" in u):
            q = parse_qs(urlparse(url).query)
            got = set(range(int(q["start"][0]), int(q["start"][0]) + int(q["count"][0])))
            assert not window <= got, url
