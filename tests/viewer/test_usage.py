"""Token usage and cost per message and per session, with the chart under the timeline,
in a real browser."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser

from engine import events as ev
from engine.session import Session
from engine.store import MemoryStore
from projections.demo import stepping_clock
from projections.serve.app import create_app
from projections.serve.export import export_data, render_html
from projections.serve.state import Viewer
from tests.support.browser import serving

TURNS = [(1200, 300, 0.012), (2500, 800, 0.031), (4000, 150, 0.02)]


def session_with_usage() -> tuple[MemoryStore, str, list[int]]:
    """Three answers with their tokens and cost (a step each), and one without."""
    store = MemoryStore()
    s = Session.create(store, clock=stepping_clock())
    starts = []
    for i, (inp, out, cost) in enumerate(TURNS):
        s.user_message(f"question {i}")
        m = s.start_message("assistant")
        starts.append(store.version(s.id))
        s.start_step(m)
        p = s.add_text(m)
        s.text_delta(p, f"answer {i}")
        s.end_part(p)
        s.finish_step(m, "stop", cost=cost, tokens=ev.Tokens(input=inp, output=out))
        s.complete_message(m, finish="stop")
    return store, s.id, starts


def test_the_usage_answer_sums_each_message_and_the_session() -> None:
    store, sid, starts = session_with_usage()
    viewer = Viewer(store, background=False)
    viewer.wait_built(sid)
    u = viewer.usage(sid)
    assert [m["seq"] for m in u["messages"]] == starts
    assert [(m["tokens"]["input"], m["tokens"]["output"], m["cost"])
            for m in u["messages"]] == TURNS
    assert u["total"]["tokens"]["input"] == sum(t[0] for t in TURNS)
    assert u["total"]["tokens"]["output"] == sum(t[1] for t in TURNS)
    assert round(u["total"]["cost"], 6) == round(sum(t[2] for t in TURNS), 6)


def test_the_chart_and_totals_are_on_the_page_and_a_click_goes_there(browser: Browser) -> None:
    store, sid, starts = session_with_usage()
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{base}/?session={sid}&seq=0")
        page.wait_for_selector('#usage[data-bars="3"]')
        total = page.text_content("#usagesum") or ""
        assert "3 answers" in total
        assert "in 7700" in total
        assert "out 1250" in total
        assert "$0.0630" in total
        # The chart is drawn: its pixels are not all blank.
        inked = page.evaluate("""() => {
            const c = document.getElementById('usage');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
            return n; }""")
        assert inked > 20
        box = page.locator("#usage").bounding_box()
        assert box is not None
        version = store.version(sid)
        x = box["x"] + starts[1] / version * (box["width"] - 3) + 1
        page.mouse.move(x, box["y"] + box["height"] / 2)
        assert "message 4 at seq" in (page.text_content("#usagesum") or "")
        assert "out 800" in (page.text_content("#usagesum") or "")
        page.mouse.click(x, box["y"] + box["height"] / 2)
        page.wait_for_selector(f'body[data-shown-seq="{starts[1]}"]')
        # Per message: each answer's head names its tokens and cost (from its steps).
        page.keyboard.press("End")
        page.wait_for_selector(f'body[data-shown-seq="{version}"]')
        heads = page.eval_on_selector_all("#conv .msg.assistant .msg-head .tokens",
                                          "ns => ns.map(n => n.parentElement.textContent)")
        for inp, out, cost in TURNS:
            assert any(f"in {inp} · out {out}" in h and f"${cost:.4f}" in h for h in heads), heads
        page.close()


def test_the_exported_file_draws_the_chart_from_its_own_data(
        browser: Browser, tmp_path: Path) -> None:
    """The static export (no server) has the chart too: the last of its data pieces
    holds the served answer's rows, and the page draws them offline."""
    store, sid, starts = session_with_usage()
    viewer = Viewer(store, background=False)
    viewer.wait_built(sid)
    served = viewer.usage(sid)
    path = tmp_path / "usage.html"
    path.write_text(render_html(store, sid, chunk=5), encoding="utf-8")  # several pieces
    assert export_data(store, sid)["usage"] == served
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(path.as_uri())
        page.wait_for_selector('#usage[data-bars="3"]', timeout=15_000)
        total = page.text_content("#usagesum") or ""
        assert "3 answers" in total
        assert "in 7700" in total
        assert "$0.0630" in total
        box = page.locator("#usage").bounding_box()
        assert box is not None
        x = box["x"] + starts[2] / store.version(sid) * (box["width"] - 3) + 1
        page.mouse.click(x, box["y"] + box["height"] / 2)
        page.wait_for_selector(f'body[data-shown-seq="{starts[2]}"]')
    finally:
        page.close()
