"""The docs are part of the product: generated pages are fresh and every example runs.

- ``docs/events.md`` and ``docs/transitions.md`` equal what ``engine.docgen`` generates.
- Every ```python block in README.md and docs/*.md runs. The blocks of one file run
  in order in one shared namespace, inside a fresh temporary working directory. A
  block preceded by the HTML comment ``<!-- no-run -->`` is skipped.
- The README's quick start is exactly ``make demo`` and ``make test``.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest

from engine import docgen
from engine.events import EVENT_TYPES, tag_of

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NO_RUN = "<!-- no-run -->"
FENCE = re.compile(r"^```(\w*)\s*$")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def code_blocks(text: str) -> list[tuple[str, int, str, bool]]:
    """(language, first line number, code, skipped) for each fenced block."""
    blocks: list[tuple[str, int, str, bool]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        lang, start = match.group(1), i + 1
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"unclosed code fence at line {i + 1}")
        blocks.append((lang, start + 1, "\n".join(lines[start:end]) + "\n", before == NO_RUN))
        i = end + 1
    return blocks


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section."""
    match = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match is not None, f"no '## {title}' section"
    return match.group(1)


# --------------------------------------------------------------------------- generated docs


def test_generated_docs_are_fresh() -> None:
    stale = docgen.stale(DOCS)
    assert not stale, (
        f"stale generated docs: {[str(p.relative_to(ROOT)) for p in stale]}; "
        "run `python -m engine.docgen` (make docs)"
    )


def test_docgen_check_detects_staleness(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 1  # missing files are stale
    assert docgen.main(["--docs", str(tmp_path)]) == 0
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 0
    events = tmp_path / "events.md"
    events.write_text(events.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 1
    assert "events.md is stale" in capsys.readouterr().err


def test_events_doc_covers_the_catalog() -> None:
    text = (DOCS / "events.md").read_text(encoding="utf-8")
    for cls in EVENT_TYPES:
        assert f"\n### {tag_of(cls)}\n" in text


# --------------------------------------------------------------------------- runnable examples


def _with_python(paths: list[Path]) -> list[Path]:
    # Generated pages (transitions.md) hold tables only; they are checked for staleness.
    return [p for p in paths if any(lang == "python" and not skipped for lang, _, _, skipped
                                    in code_blocks(p.read_text(encoding="utf-8")))]


@pytest.mark.parametrize("path", _with_python(doc_files()),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text(encoding="utf-8")
    blocks = [(line, code) for lang, line, code, skipped in code_blocks(text)
              if lang == "python" and not skipped]
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    name = path.relative_to(ROOT)
    for line, code in blocks:
        compiled = compile(code, f"{name}:{line}", "exec")
        try:
            exec(compiled, namespace)
        except Exception:
            pytest.fail(f"the python block at {name}:{line} failed:\n{traceback.format_exc()}")


def test_every_doc_has_runnable_python_or_is_generated_elsewhere() -> None:
    # The hand-written pages teach the API; they must show code that runs.
    for name in ("README.md", "docs/architecture.md", "docs/time-travel.md", "docs/cli.md"):
        blocks = code_blocks((ROOT / name).read_text(encoding="utf-8"))
        assert any(lang == "python" and not skipped for lang, _, _, skipped in blocks), name


def test_code_blocks_parser() -> None:
    text = "x\n<!-- no-run -->\n\n```python\na = 1\n```\n```python\nb = 2\n```\n"
    assert code_blocks(text) == [("python", 5, "a = 1\n", True), ("python", 8, "b = 2\n", False)]


# --------------------------------------------------------------------------- quick start


def test_readme_quick_start_is_exactly_two_commands() -> None:
    body = section((ROOT / "README.md").read_text(encoding="utf-8"), "Quick start")
    commands = [
        line.strip().removeprefix("$ ")
        for lang, _, code, _ in code_blocks(body)
        if lang in ("", "sh", "bash", "console", "shell")
        for line in code.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert commands == ["make demo", "make test"]
    assert "```python" not in body


def test_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README does not link docs/{page.name}"
