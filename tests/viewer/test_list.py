"""The session list in a real browser: titles, filtered by text and source, sorted."""

from __future__ import annotations

from playwright.sync_api import Browser

from engine.store.base import Store
from projections.serve.app import create_app
from tests.support.browser import serving
from tests.viewer.conftest import IMG, Sessions


def listed(page: object) -> list[str]:
    got: list[str] = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "#tree .sess", "ns => ns.map(n => n.dataset.sid)")
    return got


def test_sessions_are_listed_by_title_filtered_and_sorted(
        browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    with serving(create_app(store)) as base:
        page = browser.new_page()
        page.goto(base + "/")
        page.wait_for_selector(f'.sess[data-sid="{s.hostile}"]')
        titles = page.eval_on_selector_all("#tree .sess .stitle",
                                           "ns => ns.map(n => n.textContent)")
        assert f"please echo {IMG}" in titles
        assert all(t and t != "untitled session" for t in titles)
        assert set(listed(page)) == {s.demo, s.fork, s.hostile}
        page.fill("#filter", "please echo")
        page.wait_for_function("() => document.querySelectorAll('#tree .sess').length === 1")
        assert listed(page) == [s.hostile]
        page.fill("#filter", "")
        page.select_option("#srcfilter", "recorded")
        page.wait_for_function("() => document.querySelectorAll('#tree .sess').length === 2")
        assert s.hostile not in listed(page)
        page.select_option("#srcfilter", "")
        page.select_option("#sort", "events")
        page.wait_for_function("() => document.querySelectorAll('#tree .sess').length === 3")
        roots = page.eval_on_selector_all("#tree > li > .sess", "ns => ns.map(n => n.dataset.sid)")
        lengths = [store.version(sid) for sid in roots]
        assert lengths == sorted(lengths, reverse=True)
        page.close()
