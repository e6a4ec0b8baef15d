"""Worked examples in docs/architecture.md, applied to a copy of the engine by tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def doc_blocks(section: str) -> list[str]:
    """The ``<!-- no-run -->`` Python blocks of one ``## section`` of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    body = text[start:end if end != -1 else None]
    return re.findall(r"<!-- no-run -->\n```python\n(.*?)```", body, re.S)


def insert_after(path: Path, anchor: str, addition: str) -> None:
    """Insert ``addition`` after the one place ``anchor`` stands in ``path``."""
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, f"{anchor!r} is not a unique anchor in {path.name}"
    path.write_text(source.replace(anchor, anchor + addition), encoding="utf-8")
