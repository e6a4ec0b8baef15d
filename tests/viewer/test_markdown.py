"""Markdown in text parts, in a real browser: rendered (code highlighted), and safe (raw
HTML and script links stay text, nothing runs, nothing is fetched)."""

from __future__ import annotations

from playwright.sync_api import Browser, Page

from engine.session import Session
from engine.store import MemoryStore
from projections.demo import stepping_clock
from projections.serve import render_html
from projections.serve.app import create_app
from tests.support.browser import serving

ANSWER = """## The fix

The parser split on `,` only. Now it **also** splits on `;` (see *the tests*):

```python
def parse(line):  # both separators
    return [x for x in re.split("[,;]", line) if x]
```

1. run `pytest -k parse`
2. read [the docs](https://example.org/parse) and [this](javascript:window.__pwned=3)

- raw HTML stays text: <img src=x onerror="window.__pwned = 1">
  and <script>window.__pwned = 2</script>
- an image is a link, never loaded: ![chart](https://example.org/chart.png)

> quoted <b>not bold</b>

| option | meaning |
|---|---|
| `--json` | print JSON |
"""


def session_with_markdown() -> tuple[MemoryStore, str]:
    store = MemoryStore()
    s = Session.create(store, clock=stepping_clock())
    s.user_message("Why does **parse** fail on `a;b`?")
    m = s.start_message("assistant")
    p = s.add_text(m)
    s.text_delta(p, ANSWER)
    s.end_part(p)
    s.complete_message(m, finish="stop")
    return store, s.id


def check_rendered(page: Page) -> None:
    got = page.evaluate("""() => {
        const md = [...document.querySelectorAll('#conv .part.text.md')];
        const answer = md[md.length - 1];
        const q = (sel) => [...answer.querySelectorAll(sel)];
        return {
            count: md.length,
            heading: q('h4').map(n => n.textContent),
            strong: q('strong').map(n => n.textContent),
            em: q('em').map(n => n.textContent),
            code: q('code.md-code').map(n => n.textContent),
            pre: q('pre.md-pre').map(n => n.dataset.lang),
            keywords: q('pre.md-pre .tok-k').map(n => n.textContent),
            strings: q('pre.md-pre .tok-s').map(n => n.textContent),
            comments: q('pre.md-pre .tok-c').map(n => n.textContent),
            items: q('ol > li').length + q('ul > li').length,
            links: q('a').map(n => [n.getAttribute('href'), n.getAttribute('rel'),
                                    n.textContent]),
            cells: q('table td, table th').map(n => n.textContent),
            quote: q('blockquote').map(n => n.textContent),
            elements: [...document.querySelectorAll('#conv img, #conv script, #conv b')].length,
            text: answer.textContent,
            source: answer.dataset.source,
            pwned: window.__pwned === undefined ? null : window.__pwned,
        };
    }""")
    assert got["count"] == 2  # the prompt and the answer
    assert got["heading"] == ["The fix"]
    assert got["strong"] == ["also"]
    assert got["em"] == ["the tests"]
    assert "," in got["code"]
    assert "pytest -k parse" in got["code"]
    assert got["pre"] == ["python"]
    assert {"def", "return", "for", "in", "if"} <= set(got["keywords"])
    assert got["strings"] == ['"[,;]"']
    assert got["comments"] == ["# both separators"]
    assert got["items"] == 4
    assert got["links"] == [["https://example.org/parse", "noopener noreferrer nofollow",
                             "the docs"],
                            ["https://example.org/chart.png", "noopener noreferrer nofollow",
                             "image: chart"]]
    assert "[this](javascript:window.__pwned=3)" in got["text"]  # an unsafe link is text
    assert '<img src=x onerror="window.__pwned = 1">' in got["text"]
    assert "<script>window.__pwned = 2</script>" in got["text"]
    assert got["quote"] == ["quoted <b>not bold</b>"]
    assert got["cells"] == ["option", "meaning", "--json", "print JSON"]
    assert got["elements"] == 0  # no element came from the text
    assert got["source"] == ANSWER
    assert got["pwned"] is None


def test_markdown_is_rendered_and_nothing_in_it_runs(browser: Browser) -> None:
    store, sid = session_with_markdown()
    requests: list[str] = []
    with serving(create_app(store)) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{base}/?session={sid}")
        page.wait_for_selector("#conv .part.text.md pre.md-pre")
        check_rendered(page)
        assert errors == []
        page.close()
    assert all(u.startswith(base) for u in requests), requests  # the image was not fetched


def test_the_exported_file_renders_markdown_too(browser: Browser, tmp_path: object) -> None:
    store, sid = session_with_markdown()
    from pathlib import Path  # noqa: PLC0415

    path = Path(str(tmp_path)) / "session.html"
    path.write_text(render_html(store, sid), encoding="utf-8")
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector("#conv .part.text.md pre.md-pre")
    check_rendered(page)
    page.close()
    assert all(u.startswith("file:") for u in requests), requests
