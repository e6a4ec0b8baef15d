"""Architecture rules, checked on the source: the write side never imports the read
side, and the read side's folds are pure (no clock, no randomness, no files)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINE_MODULES = sorted((REPO / "engine").rglob("*.py"))
PURE_MODULES = [REPO / "projections" / name for name in
                ("withparts.py", "views.py", "timetravel.py", "json.py", "convert.py",
                 "integrations/pydantic_ai.py")]

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


# --------------------------------------------------------------------------- the import graph

# The engine's layers, lowest first. A module may import its own layer and the
# layers below it, never one above; the names are module prefixes (a package
# names all of its modules). docs/architecture.md states the same order.
ENGINE_LAYERS: tuple[tuple[str, ...], ...] = (
    # the vocabulary: what an event is, its bytes, ids, typed errors, log setup
    ("engine.events", "engine.errors", "engine.ids", "engine.codec", "engine.logging",
     "engine.mailbox_graphemes", "engine.mailbox_credentials"),
    # the deciders: entity declarations, their composition, multi-event commands
    ("engine.decider", "engine.messages", "engine.conversation", "engine.tables",
     "engine.lifecycle", "engine.settle", "engine.mailbox"),
    # the log: stores (their verifier replays the lifecycle)
    ("engine.store",),
    # the write API
    ("engine.session",),
    # the edges: provider adapters, importers, asyncio, reference docs, command line
    ("engine.adapters", "engine.importers", "engine.aio", "engine.docgen", "engine.cli",
     "engine.__main__", "engine"),
)


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


SOURCE = {module_name(p): p for root in ("engine", "projections")
          for p in sorted((REPO / root).rglob("*.py"))}


def imported_modules(name: str, tree: ast.AST, known: set[str]) -> set[str]:
    """Every module of ``known`` that ``name`` imports, anywhere in its body.

    Imports inside functions and under ``if TYPE_CHECKING`` count too: a lazy
    import hides a circle, it does not remove it. ``from package import module``
    names the module; ``from module import name`` names the module.
    """
    package = name if SOURCE[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    known = set(SOURCE)
    return {name: imported_modules(name, parse(path), known) for name, path in SOURCE.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for level, prefixes in enumerate(ENGINE_LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        if not module.startswith("engine"):
            continue
        for target in sorted(targets):
            if target.startswith("engine") and layer_of(target) > layer_of(module):
                out.append(f"{module} (layer {layer_of(module)}) imports {target} "
                           f"(layer {layer_of(target)})")
    return out


def test_the_graph_sees_the_known_edges() -> None:
    graph = import_graph()
    assert "engine.lifecycle" in graph["engine.session"]
    assert "engine.events" in graph["engine.messages"]
    assert "engine.store.base" in graph["engine.session"]
    assert any(t.startswith("engine") for t in graph["projections.withparts"])


def test_no_import_circle_in_engine_or_projections() -> None:
    assert circles(import_graph()) == []


def test_every_engine_module_has_a_layer() -> None:
    assert [m for m in SOURCE if m.startswith("engine") and layer_of(m) < 0] == []


def test_engine_imports_only_downwards() -> None:
    assert upward_imports(import_graph()) == []


def test_the_engine_never_reaches_projections_through_the_graph() -> None:
    graph = import_graph()
    assert [(m, t) for m, ts in graph.items() if m.startswith("engine")
            for t in ts if t.startswith("projections")] == []


def test_the_graph_checks_catch_violations() -> None:
    """A circle through a lazy import and an upward arrow are both reported."""
    lazy = ast.parse("def f():\n    from engine.lifecycle import Lifecycle\n")
    assert imported_modules("engine.conversation", lazy, set(SOURCE)) == {"engine.lifecycle"}
    relative = ast.parse("from . import base\nfrom .blocks import x\n")
    assert imported_modules("engine.store.sqlite", relative, set(SOURCE)) == {
        "engine.store.base", "engine.store.blocks"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert upward_imports({"engine.events": {"engine.session"}}) == [
        "engine.events (layer 0) imports engine.session (layer 3)"]
