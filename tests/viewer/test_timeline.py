"""The timeline under the slider: markers by kind, and jumps to the next and previous."""

from __future__ import annotations

from playwright.sync_api import Browser

from engine import events as ev
from engine.store.base import Store
from projections.serve.app import create_app
from projections.serve.state import Viewer
from tests.support.browser import serving
from tests.viewer.conftest import Sessions


def kinds_of(store: Store, sid: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"user": [], "error": [], "compaction": [], "approval": []}
    for e in store.read(sid):
        if isinstance(e, ev.MessageStarted) and e.role == "user":
            found["user"].append(e.seq)
        elif isinstance(e, ev.ToolFailed):
            found["error"].append(e.seq)
        elif isinstance(e, ev.CompactionAdded):
            found["compaction"].append(e.seq)
        elif isinstance(e, ev.ToolApprovalRequested):
            found["approval"].append(e.seq)
    return found


def test_markers_are_the_events_of_each_kind(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    viewer = Viewer(store)
    for sid in (s.demo, s.hostile):
        got = viewer.markers(sid)
        assert got["ready"]
        assert {k: got[k] for k in ("user", "error", "compaction", "approval")} == \
            kinds_of(store, sid)
    assert viewer.markers(s.demo)["forks"] == [s.fork_seq]


def test_jumping_between_markers_in_the_page(browser: Browser,
                                              viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    want = kinds_of(store, s.hostile)
    assert want["error"]
    assert want["approval"]
    with serving(create_app(store)) as base:
        page = browser.new_page()
        page.goto(f"{base}/?session={s.hostile}&seq=0")
        page.wait_for_selector('body[data-shown-seq="0"]')
        page.wait_for_selector('#timeline[data-ready="1"]')
        assert page.locator("#timeline .tick").count() >= 3
        for kind in ("error", "approval", "user"):
            page.select_option("#jumpkind", kind)
            page.keyboard.press("Home")
            page.wait_for_selector('body[data-shown-seq="0"]')
            for seq in want[kind]:
                page.click("#jumpnext")
                page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
            for seq in reversed(want[kind][:-1]):
                page.click("#jumpprev")
                page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
        page.close()


def test_find_in_a_session_marks_and_jumps_to_its_hits(
        browser: Browser, viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    viewer = Viewer(store)
    found = viewer.find(s.demo, "PARSER")["hits"]
    texts = [m for m in viewer.messages(s.demo, store.version(s.demo))]
    assert [h["message"] for h in found] == [
        m.info.id for m in texts
        if any("parser" in t.casefold() for t in _all_texts(m))]
    seqs = [h["seq"] for h in found]
    assert seqs
    assert all(isinstance(x, int) for x in seqs)
    with serving(create_app(store)) as base:
        page = browser.new_page()
        page.goto(f"{base}/?session={s.demo}&seq=0")
        page.wait_for_selector('body[data-shown-seq="0"]')
        page.fill("#find", "parser")
        page.wait_for_selector(f'#find[data-hits="{len(found)}"]')
        assert page.locator("#timeline .tick.hits").count() >= 1
        for seq in seqs:
            page.click("#jumpnext")
            page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
        page.close()


def _all_texts(m: object) -> list[str]:
    from projections import views as v  # noqa: PLC0415

    assert isinstance(m, v.WithParts)
    out: list[str] = []
    for p in m.parts:
        if isinstance(p, v.TextPart | v.ReasoningPart):
            out.append(p.text)
        elif isinstance(p, v.ToolPart) and isinstance(p.state, v.ToolStateCompleted):
            out.append(p.state.output)
        elif isinstance(p, v.ToolPart) and isinstance(p.state, v.ToolStateError):
            out.append(p.state.error)
    return out
