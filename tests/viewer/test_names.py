"""Names, paths and tool inputs in a real browser: a long one wraps, and one that hides
characters cannot pass for another (``report\u202Etxt.exe`` shown as ``reportexe.txt``).

Each failed before its fix: a 3,000-character tool name made the conversation scroll
sideways by tens of thousands of pixels, and U+202E and zero-width characters were
rendered live.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from engine import events as ev
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from tests.support.browser import serving

LONG = "x" * 3000
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "report\u202etxt.exe" displays as "reportexe.txt"
HIDDEN = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2069", "\u200b", "\u200d", "\u200f",
          "\ufeff", "\u2060", "\u00ad", "\x1b"]
SPOOF = f"report{RLO}txt.exe"


@pytest.fixture
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, str]]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('names') / 'n.db'}")
    s = Session.create(store, clock=stepping_clock())
    s.append([ev.SessionImported(format="claude-code", source=f"/home/me/{SPOOF}.jsonl",
                                 original_id="o1", tool_version="2.0")])
    model = ev.ModelRef(provider_id="anthropic", model_id=f"claude{RLO}4")
    s.user_message("open the file", agent=f"build{RLO}er", model=model)
    m = s.start_message("assistant", agent="builder", model=model)
    tool = s.add_tool(m, "call_1", LONG)
    s.tool_input_ready(tool, {"path": f"/tmp/{SPOOF}", "hidden": "".join(HIDDEN),
                              "long": "y" * 3000})
    s.start_tool(tool)
    s.complete_tool(tool, "ok", title=f"read {SPOOF}")
    spoof = s.add_tool(m, "call_2", f"rm{RLO}fr")
    s.tool_input_ready(spoof, {"cmd": "ls"})
    s.start_tool(spoof)
    s.fail_tool(spoof, "denied")
    s.add_file(m, "text/plain", f"file:///{LONG}", filename=f"{LONG}{SPOOF}")
    s.add_patch(m, "abc", [f"src/{SPOOF}", "z" * 3000])
    s.complete_message(m, finish="stop")
    try:
        yield store, s.id
    finally:
        store.close()


def open_page(page: Page, base: str, sid: str, last: int) -> None:
    page.goto(f"{base}/?session={sid}&seq={last}")
    page.wait_for_selector(f'body[data-shown-seq="{last}"]')
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")


def test_long_names_wrap(browser: Browser, named: tuple[Store, str]) -> None:
    store, sid = named
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        open_page(page, base, sid, store.version(sid))
        sizes = page.evaluate("""() => {
            const c = document.getElementById('conv');
            const msgs = [...c.querySelectorAll('.msg')];
            return {scroll: c.scrollWidth, client: c.clientWidth,
                    widest: Math.max(...msgs.map(m => m.scrollWidth - m.clientWidth)),
                    page: document.documentElement.scrollWidth - innerWidth};
        }""")
        assert sizes["scroll"] <= sizes["client"] + 1, sizes
        assert sizes["widest"] <= 1, sizes
        assert sizes["page"] <= 1, sizes
        # The long name is all there, wrapped, not cut.
        names = page.eval_on_selector_all("#conv .tool-head .name",
                                          "ns => ns.map(n => n.textContent)")
        assert LONG in names
        page.close()


# Where a name, path or tool input is shown: none may hold a raw hidden character.
PLACES = ["#conv .tool-head .name", "#conv .tool-head .title", "#conv .part.tool pre",
          "#conv .part.file", "#conv .part.patch", "#conv .msg-head", "#source",
          ".sess .src"]


def test_hidden_characters_are_revealed_and_names_isolated(browser: Browser,
                                                           named: tuple[Store, str]) -> None:
    store, sid = named
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        open_page(page, base, sid, store.version(sid))
        for sel in PLACES:
            texts: list[str] = page.eval_on_selector_all(sel, "ns => ns.map(n => n.textContent)")
            assert texts, sel
            raw = [t for t in texts if any(h in t for h in HIDDEN)]
            assert raw == [], sel
        # Each is shown by name, in a visible mark.
        names = page.eval_on_selector_all("#conv .tool-head .name",
                                          "ns => ns.map(n => n.textContent)")
        assert "rm⟨U+202E⟩fr" in names
        inputs = " ".join(page.eval_on_selector_all("#conv .part.tool pre",
                                                    "ns => ns.map(n => n.textContent)"))
        for h in HIDDEN:  # JSON already spells the C0 controls out (\u001b)
            assert f"⟨U+{ord(h):04X}⟩" in inputs or f"\\u{ord(h):04x}" in inputs, repr(h)
        marks = page.eval_on_selector_all("#conv .tool-head .name .ctl",
                                          "ns => ns.map(n => getComputedStyle(n).display)")
        assert marks
        assert "none" not in marks
        # A name is isolated: right-to-left text in it cannot reorder what is around it.
        bidi = page.eval_on_selector_all(
            "#conv .tool-head .name, #conv .part.file, #conv .part.tool pre, #source",
            "ns => ns.map(n => getComputedStyle(n).unicodeBidi)")
        assert set(bidi) == {"isolate"}, bidi
        page.close()
