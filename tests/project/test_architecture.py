"""Architecture rules, checked on the source: the write side never imports the read
side, and the read side's folds are pure (no clock, no randomness, no files)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINE_MODULES = sorted((REPO / "engine").rglob("*.py"))
PURE_MODULES = [REPO / "projections" / name for name in
                ("withparts.py", "views.py", "timetravel.py", "json.py", "convert.py")]

IMPURE_MODULES = frozenset({"random", "secrets", "uuid"})
CLOCK_CALLS = frozenset({
    ("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter"),
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
})
CLOCK_NAMES = frozenset({"time", "time_ns", "monotonic", "perf_counter"})
FILE_CALLS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes"})


def imports_projections(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "projections"]
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] == "projections"):
            found.append(node.module)
    return found


def impurities(tree: ast.AST) -> list[str]:
    """Calls of the clock, randomness or files, and imports of random-like modules."""
    found = []
    clock_aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in IMPURE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in IMPURE_MODULES:
                found.append(f"from {node.module} import ...")
            if node.module == "time":
                clock_aliases |= {a.asname or a.name for a in node.names
                                  if a.name in CLOCK_NAMES}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and (func.id in clock_aliases or func.id == "open"):
            found.append(f"{func.id}() at line {node.lineno}")
        elif isinstance(func, ast.Attribute):
            owner = func.value
            owner_name = (owner.id if isinstance(owner, ast.Name)
                          else owner.attr if isinstance(owner, ast.Attribute) else "")
            if (owner_name, func.attr) in CLOCK_CALLS or func.attr in FILE_CALLS:
                found.append(f"{owner_name}.{func.attr}() at line {node.lineno}")
    return found


def parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_there_is_something_to_scan() -> None:
    names = {p.name for p in ENGINE_MODULES}
    assert {"events.py", "lifecycle.py", "session.py", "app.py", "sqlite.py"} <= names
    assert all(p.is_file() for p in PURE_MODULES)


@pytest.mark.parametrize("path", ENGINE_MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_engine_never_imports_projections(path: Path) -> None:
    assert imports_projections(parse(path)) == []


@pytest.mark.parametrize("path", PURE_MODULES, ids=lambda p: p.name)
def test_projections_are_pure(path: Path) -> None:
    assert impurities(parse(path)) == []


def test_the_scanners_catch_violations() -> None:
    """The rules above would notice a violation (guards against a vacuous scan)."""
    bad_engine = ast.parse(
        "import projections\n"
        "import projections.views as pv\n"
        "from projections.withparts import WithPartsProjection\n"
        "from . import projections_helper\n"
    )
    assert imports_projections(bad_engine) == [
        "projections", "projections.views", "projections.withparts"]
    bad_fold = ast.parse(
        "import time, random\n"
        "from time import time_ns as now\n"
        "from datetime import datetime\n"
        "def f(path):\n"
        "    a = time.time()\n"
        "    b = datetime.now()\n"
        "    c = now()\n"
        "    d = open(path).read()\n"
        "    e = path.read_text()\n"
        "    return random.random()\n"
    )
    found = impurities(bad_fold)
    assert "import random" in found
    assert any(f.startswith("time.time()") for f in found)
    assert any(f.startswith("datetime.now()") for f in found)
    assert any(f.startswith("now()") for f in found)
    assert any(f.startswith("open()") for f in found)
    assert any(f.startswith("path.read_text()") for f in found)
    clean = ast.parse("def f(e):\n    return e.time + len(e.text)\n")
    assert impurities(clean) == []
