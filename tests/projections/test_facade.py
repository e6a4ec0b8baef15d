"""``import convlog``: the facade exports what the README uses, and nothing optional."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import convlog
import engine
import projections
from engine import errors
from engine.session import Session
from projections.withparts import WithPartsProjection

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("anthropic", "openai", "psycopg", "httpx", "pydantic")


def test_every_exported_name_exists_and_is_the_original() -> None:
    assert len(set(convlog.__all__)) == len(convlog.__all__)
    for name in convlog.__all__:
        assert hasattr(convlog, name), name
    assert convlog.Session is Session
    assert convlog.WithPartsProjection is WithPartsProjection
    assert convlog.at is projections.at
    assert convlog.open_store is engine.open_store


def test_the_listed_public_names_are_there() -> None:
    wanted = {"Session", "open_store", "at", "at_time", "diff", "Timeline",
              "WithPartsProjection", "ConversationFold", "ConversationState", "StepClock",
              "DEFAULT_URL", "ConvlogError", "IllegalTransition", "PartValidationError"}
    assert wanted <= set(convlog.__all__)


def test_every_error_class_is_exported() -> None:
    public = {name for name, obj in vars(errors).items()
              if isinstance(obj, type) and issubclass(obj, errors.ConvlogError)}
    assert public <= set(convlog.__all__), public - set(convlog.__all__)


def _readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_readme_examples_could_be_written_with_convlog_alone() -> None:
    """Each name the README imports from engine or projections is in the facade."""
    imported: set[str] = set()
    for block in _readme_blocks():
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.split(".")[0] in ("engine", "projections"):
                imported.update(alias.name for alias in node.names)
    assert {"Session", "open_store", "WithPartsProjection", "at", "diff"} <= imported
    assert imported <= set(convlog.__all__), imported - set(convlog.__all__)
    assert any("import convlog" in block for block in _readme_blocks())


def test_importing_convlog_loads_no_optional_sdk() -> None:
    code = ("import sys, convlog; "
            f"print(','.join(m for m in {OPTIONAL!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_importing_convlog_loads_no_store_session_door_or_projection() -> None:
    """``import convlog`` is lazy (PEP 562): it loads none of what its names need until
    one is read, and then every name of ``__all__`` resolves and ``dir()`` lists it
    (before, the import loaded the door, the stores, the sessions, asyncio and every
    projection: ~0.7 s of CPU for a user who wanted one name)."""
    code = ("import json, sys, convlog\n"
            "loaded = sorted(sys.modules)\n"
            "listed = sorted(set(convlog.__all__) - set(dir(convlog)))\n"
            "missing = [n for n in convlog.__all__ if getattr(convlog, n, None) is None]\n"
            "print(json.dumps([loaded, listed, missing, sorted(dir(convlog))]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    loaded, unlisted, missing, names = json.loads(out.stdout.strip().splitlines()[-1])
    heavy = ("engine.store", "engine.session", "engine.aio", "engine.adapters", "engine.events",
             "engine.codec", "projections.", "asyncio", "msgspec", "attr", "cattrs", "sqlite3",
             "structlog")
    assert [m for m in loaded if m.startswith(heavy)] == []
    assert unlisted == []
    assert missing == []
    assert set(convlog.__all__) <= set(names)


def test_a_convlog_name_loads_only_its_own_side() -> None:
    """``convlog.Session`` loads the write side only; no projection comes with it."""
    code = ("import sys, convlog\n"
            "convlog.Session, convlog.open_store\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('projections'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
