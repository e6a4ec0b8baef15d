"""Where the real agent CLIs are: ``$CONVLOG_REAL_CLIENTS``, then ``.cache/real-clients``
of this checkout (what ``tests/realclients/install.sh`` fills), then ``/work/cli``.

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
    dirs += [ROOT / ".cache" / "real-clients", Path("/work/cli")]
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
