"""Importing convlog never imports an SDK: the integrations are optional extras."""

from __future__ import annotations

import subprocess
import sys

SDKS = ("anthropic", "openai", "agents", "pydantic_ai", "httpx", "httpx2", "pydantic")


def test_importing_convlog_imports_no_sdk() -> None:
    code = (
        "import sys, pkgutil, importlib, engine, projections\n"
        "import engine.integrations, projections.integrations\n"
        "import engine.session, engine.store, engine.adapters.anthropic, engine.cli\n"
        "import projections.withparts, projections.render.anthropic, projections.commands\n"
        f"loaded = sorted(m for m in {SDKS!r} if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_each_integration_imports_only_its_own_sdk() -> None:
    expected = {
        "engine.integrations.anthropic": "anthropic",
        "engine.integrations.openai": "openai",
        "engine.integrations.pydantic_ai": "pydantic_ai",
        "engine.integrations.pydantic_ai_live": "pydantic_ai",
        "engine.integrations.agents_run": "agents",
        "projections.integrations.pydantic_ai": "pydantic_ai",
        "projections.integrations.openai_agents": "agents",
    }
    for module, sdk in expected.items():
        others = [s for s in ("anthropic", "agents", "pydantic_ai") if s != sdk]
        code = (f"import sys, {module}\n"
                f"assert {sdk!r} in sys.modules\n"
                f"loaded = [m for m in {others!r} if m in sys.modules]\n"
                "assert not loaded, loaded\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, (module, done.stderr)
