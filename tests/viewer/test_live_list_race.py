"""A session written between the page's list and the start of its store feed still
shows up: the feed's first message is compared with the position the list was read
at, not skipped. (CI once met this: a follower wrote while the page was loading and
the new session never appeared.)"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Route
from starlette.testclient import TestClient

from engine.session import Session
from engine.store import open_store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from tests.support.browser import serving


def test_a_session_appended_before_the_feed_starts_is_listed(browser: Browser,
                                                             tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'race.db'}")
    written: list[str] = []

    def write_then_connect(route: Route) -> None:
        # The page has its (empty) list; the session lands before the feed's first
        # message is read, which is exactly the window the old page lost.
        if not written:
            s = Session.create(store, clock=stepping_clock())
            s.user_message("written while the page loaded")
            written.append(s.id)
        route.continue_()

    try:
        with serving(create_app(store, poll=0.05)) as base:
            page = browser.new_page()
            page.route("**/api/live", write_then_connect)
            page.goto(base + "/")
            link = page.wait_for_selector("#tree .sess", timeout=10_000)
            assert link is not None
            assert written
            assert link.get_attribute("data-sid") == written[0]
            assert page.text_content("#note") == "pick a session on the left"
            page.close()
    finally:
        store.close()


def test_the_list_says_the_position_it_was_read_at(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'pos.db'}")
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        assert client.get("/api/sessions").headers["X-Convlog-Position"] == "0"
        s = Session.create(store, clock=stepping_clock())
        s.user_message("one")
        answer = client.get("/api/sessions")
        assert answer.headers["X-Convlog-Position"] == str(store.last_position())
        assert [o["id"] for o in answer.json()] == [s.id]
    finally:
        store.close()
