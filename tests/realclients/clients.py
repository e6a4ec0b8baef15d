"""Where the real agent CLIs are: ``$CONVLOG_REAL_CLIENTS``, then ``.cache/real-clients``
of this checkout (what ``tests/realclients/install.sh`` fills; ``.ci/run`` runs it).

Each finder returns the binary's path, or None with the reason it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINARIES = {
    "claude": "node_modules/.bin/claude",
    "codex": "node_modules/.bin/codex",
    "gemini": "node_modules/.bin/gemini",
    "opencode": "node_modules/.bin/opencode",
    "aider": "aider-venv/bin/aider",
}


def install_dirs() -> list[Path]:
    dirs = []
    env = os.environ.get("CONVLOG_REAL_CLIENTS")
    if env:
        dirs.append(Path(env))
    dirs.append(ROOT / ".cache" / "real-clients")
    return dirs


def find(name: str) -> tuple[Path | None, str]:
    """``(path, "")`` for an installed CLI, else ``(None, why)``."""
    rel = BINARIES.get(name)
    if rel is None:
        return None, f"no such client {name!r} (known: {', '.join(BINARIES)})"
    tried = []
    for d in install_dirs():
        path = d / rel
        if path.exists() and os.access(path, os.X_OK):
            return path, ""
        tried.append(str(path))
    return None, (f"{name} is not installed (tried {', '.join(tried)}); "
                  "run tests/realclients/install.sh")


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(name: str) -> Path:
    """The CLI, or skip with the reason; in CI (``CI=true``) a missing CLI fails, since
    ``.ci/run`` installs them."""
    import pytest  # noqa: PLC0415 - the finders serve the fixture generator too

    path, why = find(name)
    if path is None:
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    return path
