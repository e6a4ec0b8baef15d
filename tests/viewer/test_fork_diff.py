"""A parent against its fork: the shared messages diffed by id (a session's own id is
no difference), the rest paired by position after them, each change with its detail."""

from __future__ import annotations

from playwright.sync_api import Browser

from engine.store import MemoryStore
from projections.serve.app import create_app
from projections.serve.state import Viewer
from tests.support.browser import serving
from tests.viewer.conftest import fill
from tests.viewer.test_family import imported


def test_a_fork_of_a_recorded_session_differs_only_where_it_does() -> None:
    """The demo forked at seq 41 mid-answer: before, 12 changes of which 5 said only that
    each side names its own session, and none said what changed."""
    store = MemoryStore()
    s = fill(store)
    viewer = Viewer(store, background=False)
    d = viewer.diff(s.demo, store.version(s.demo), s.fork, store.version(s.fork))
    assert d["by_position"] is True
    assert d["shared"] == 2
    kinds = [c["kind"] for c in d["changes"]]
    assert kinds[:2] == ["message-changed", "tool-state"]
    assert all(c["detail"] for c in d["changes"])
    assert not any("sessionID" in (c["full"] or c["detail"]) for c in d["changes"])
    assert "finish stop → —" in d["changes"][0]["detail"]
    assert "state completed vs running" in d["changes"][1]["detail"]


def test_an_imported_fork_is_paired_by_position_with_detail_in_the_page(
        browser: Browser) -> None:
    store, rows = imported()
    main = next(k for k, r in rows.items() if not r["parent"] and not r["child_of"])
    fork = next(k for k, r in rows.items() if r["parent"] == main)
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/?session={fork}")
        page.wait_for_selector(f'body[data-shown-seq="{rows[fork]["version"]}"]')
        page.click("#diffbtn")
        page.select_option("#dsa", main)
        page.fill("#da", str(rows[main]["version"]))
        page.select_option("#dsb", fork)
        page.fill("#db", str(rows[fork]["version"]))
        page.click("#diffform button[type=submit]")
        page.wait_for_selector("#diff .chg.part-differs")
        head = page.text_content("#diff > .small") or ""
        assert "4 shared message(s)" in head
        assert "paired by position" in head
        got = page.eval_on_selector_all("#diff .chg", """ns => ns.map(n => ({
            kind: n.querySelector('.kind').textContent, text: n.textContent,
            title: n.title }))""")
        assert [g["kind"] for g in got][:4] == ["message-changed", "differs", "part-differs",
                                                "part-only-b"]
        prompt = next(g for g in got if g["kind"] == "part-differs")
        assert "#1 part" in prompt["text"]
        assert 'from char 0: "yes, and delegate a review" vs "no, explain instead"' in \
            prompt["title"]
        task = [g for g in got if g["kind"] == "part-differs"][1]
        assert "tool Task completed vs text" in task["text"]
        only = [g for g in got if g["kind"] == "only-a"]
        assert len(only) == 5
        assert 'text "Reviewed; fixed."' in only[0]["text"]
        page.close()
