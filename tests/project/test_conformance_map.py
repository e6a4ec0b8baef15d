"""The conformance map (docs/architecture.md) names files and tests that exist.

A renamed test or module would otherwise leave the map pointing at nothing.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## Conformance with the seeds"
REF = re.compile(r"`([\w/]+\.py)?(?:::(\w+\*?))?`")


def conformance_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def functions_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def references() -> list[tuple[str, str | None]]:
    """(file, function or None) for every `file.py` and `file.py::name` of the map; a
    `::name` after a reference in the same cell names a function of that file."""
    out: list[tuple[str, str | None]] = []
    for line in conformance_section().splitlines():
        last: str | None = None
        for match in REF.finditer(line):
            path, name = match.group(1), match.group(2)
            if path is None and name is None:
                continue
            if path is None:
                assert last is not None, f"'::{name}' with no file before it: {line}"
                path = last
            out.append((path, name))
            last = path
    return out


def test_the_map_names_existing_files_and_tests() -> None:
    refs = references()
    assert len(refs) > 40
    missing = []
    for path, name in refs:
        under = ROOT / "tests" if Path(path).name.startswith("test_") else ROOT
        file = under / path
        if not file.is_file():
            missing.append(path)
            continue
        if name is not None and not fnmatch.filter(functions_of(file), name):
            missing.append(f"{path}::{name}")
    assert missing == []
