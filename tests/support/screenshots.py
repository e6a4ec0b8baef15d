"""Screenshots of the viewer's main views for docs/viewer.md (``make screenshots``).

Records the demo session, a fork of it, an imported session whose every string
is hostile, a project mailbox and a long session (a build log of 5,000 lines),
and imports the project's Claude Code, Codex and OpenCode transcripts, in a
throwaway store; serves them, and photographs the page in chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from engine import events as ev
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import stepping_clock
from projections.serve.app import create_app
from tests.support.browser import chromium, serving
from tests.viewer.conftest import fill

OUT = Path("docs/img")
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def import_transcripts(store: Store) -> None:
    """Real-looking sessions: the transcripts the importer tests read, as `convlog import`
    writes them (titles, models, working directories, tokens)."""
    from engine.importers.detect import plan_path  # noqa: PLC0415 - only for the pictures
    from engine.importers.write import write_plan  # noqa: PLC0415

    for name in ("claude-code", "codex", "opencode"):
        for path in sorted((TRANSCRIPTS / name).iterdir()):
            if path.is_file():
                write_plan(store, plan_path(path))


def _shown(page: Page, seq: int) -> None:
    page.wait_for_selector(f'body[data-shown-seq="{seq}"]')
    page.wait_for_selector("#verify.ok, #verify.bad")


def record_long(store: Store) -> tuple[str, int]:
    """Many short turns and one build whose log is 5,000 lines; the log's seq."""
    s = Session.create(store, clock=stepping_clock())
    for i in range(300):
        s.user_message(f"step {i}: run the build again")
    m = s.start_message("assistant")
    tool = s.add_tool(m, "call_make", "bash")
    s.tool_input_ready(tool, {"command": "make -k all"})
    s.start_tool(tool, title="make -k all")
    seq = s.complete_tool(tool, "\n".join(
        f"[{i:04d}] cc -O2 -c src/module_{i % 97}.c -o build/module_{i % 97}.o"
        for i in range(5000)), title="make -k all")
    s.complete_message(m, finish="stop")
    return s.id, seq


PARSER_ANSWER = """The split only knows commas, so `a;b` comes back whole. **Two changes:**

1. split on both separators with one pattern
2. drop the empty fields a trailing separator leaves

```python
import re

def parse(line: str) -> list[str]:
    # commas and semicolons both separate fields
    return [field for field in re.split(r"[,;]", line) if field]
```

| input | before | after |
|---|---|---|
| `a,b` | `['a', 'b']` | `['a', 'b']` |
| `a;b` | `['a;b']` | `['a', 'b']` |

> The fixtures in `tests/data/*.csv` use semicolons since the export change.
"""


def record_markdown(store: Store) -> tuple[str, int]:
    """A session whose answers are markdown (a code block, a list, a table), with the
    tokens and cost of each step: the markdown and usage pictures. Also the seq where
    the first answer is complete."""
    s = Session.create(store, clock=stepping_clock())
    model = ev.ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
    turns = [("Why does parse() return ['a;b'] for the line a;b?", PARSER_ANSWER,
              (5200, 640, 1800, 0.0291)),
             ("Run the parser tests", "All **14** tests pass: `pytest -q tests/test_parse.py`.",
              (6100, 95, 5200, 0.0118)),
             ("Add a test for a trailing separator", "Added `test_trailing_separator`:\n\n"
              "```python\ndef test_trailing_separator():\n    assert parse('a;b;') == "
              "['a', 'b']\n```", (6900, 210, 6100, 0.0142)),
             ("Summarise the change for the PR", "### Parse semicolons\n\n- `parse()` "
              "splits on `,` and `;`\n- empty fields are dropped\n- one new test",
              (7400, 120, 6900, 0.0101))]
    first = 0
    for prompt, answer, (inp, out, cached, cost) in turns:
        s.user_message(prompt, model=model)
        m = s.start_message("assistant", model=model)
        s.start_step(m)
        p = s.add_text(m)
        for piece in answer.split(" "):
            s.text_delta(p, piece + " ")
        s.end_part(p)
        s.finish_step(m, "stop", cost=cost,
                      tokens=ev.Tokens(input=inp, output=out, cache=ev.CacheTokens(read=cached)))
        s.complete_message(m, finish="stop")
        first = first or store.version(s.id)
    return s.id, first


def family(page: Page, base: str, store: Store, out: Path) -> None:
    """The imported Claude Code session with a rewind (a fork) and two subagents: the
    Task call's link and the branch graph; then the fork diffed against its parent."""
    from projections.serve.state import sessions_json  # noqa: PLC0415

    rows = {r["id"]: r for r in sessions_json(store)}
    main_sid = next(k for k, r in rows.items() if r["title"] == "Fix the failing test")
    fork = next(k for k, r in rows.items() if r["parent"] == main_sid)
    page.goto(f"{base}/?session={main_sid}")
    _shown(page, store.version(main_sid))
    page.click("#branchbtn")
    page.wait_for_selector("#branches .branch")
    link = page.wait_for_selector(".childlink")
    assert link is not None
    link.scroll_into_view_if_needed()
    page.screenshot(path=str(out / "viewer-family.png"))
    page.click("#branchbtn")
    page.click("#diffbtn")
    page.select_option("#dsa", main_sid)
    page.fill("#da", str(store.version(main_sid)))
    page.select_option("#dsb", fork)
    page.fill("#db", str(store.version(fork)))
    page.click("#diffform button[type=submit]")
    page.wait_for_selector("#diff .chg.part-differs")
    page.screenshot(path=str(out / "viewer-fork-diff.png"))
    page.click("#diffclose")


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'shots.db'}")
        s = fill(store)
        long_sid, long_seq = record_long(store)
        md_sid, md_seq = record_markdown(store)
        import_transcripts(store)
        app = create_app(store, allow_writes=True, token="docs", public_mailbox=True)
        with serving(app) as base, sync_playwright() as pw, chromium(pw) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.goto(f"{base}/?session={s.demo}&seq=60#token=docs")
            _shown(page, 60)
            page.screenshot(path=str(out / "viewer-scrub.png"))
            page.fill("#filter", "")
            page.select_option("#sort", "title")
            page.screenshot(path=str(out / "viewer-sessions.png"))
            page.select_option("#sort", "updated")
            page.click("#diffbtn")
            page.fill("#da", "20")
            page.fill("#db", "60")
            page.click("#diffform button[type=submit]")
            page.wait_for_selector("#diff .chg")
            page.screenshot(path=str(out / "viewer-diff.png"))
            page.click("#diffclose")
            page.fill("#search", "semicolons")
            page.wait_for_selector(".hit mark")
            page.goto(f"{base}/?session={s.fork}")
            _shown(page, store.version(s.fork))
            page.fill("#search", "parser")
            page.wait_for_selector(".hit mark")
            page.screenshot(path=str(out / "viewer-fork-search.png"))
            page.goto(f"{base}/?session={s.hostile}")
            _shown(page, store.version(s.hostile))
            page.evaluate("document.querySelectorAll('#conv details').forEach(d => d.open = true)")
            page.screenshot(path=str(out / "viewer-escaped.png"))
            page.goto(f"{base}/?session={long_sid}&seq={long_seq}")
            _shown(page, long_seq)
            page.wait_for_selector(".lines-body:not(:empty)")
            page.screenshot(path=str(out / "viewer-long.png"))
            page.set_viewport_size({"width": 1280, "height": 960})
            page.goto(f"{base}/?session={md_sid}&seq={md_seq}")
            _shown(page, md_seq)
            page.wait_for_selector("#usage[data-bars]")
            page.wait_for_selector("#conv pre.md-pre")
            page.screenshot(path=str(out / "viewer-markdown.png"))
            page.set_viewport_size({"width": 1280, "height": 760})
            family(page, base, store, out)
            page.goto(f"{base}/?mailbox=webapp")
            page.wait_for_selector("#mailbox .thread")
            page.wait_for_selector("#mblive.ok")
            page.screenshot(path=str(out / "viewer-mailbox.png"))
        store.close()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
