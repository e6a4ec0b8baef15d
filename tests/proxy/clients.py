"""Where the real agent CLIs are: ``$CONVLOG_REAL_CLIENTS``, then the project's
``.cache/real-clients``, then ``/work/cli`` (each an npm prefix with the CLIs in
``node_modules/.bin`` and aider in ``aider-venv/bin``).

(The same search order as tests/realclients/clients.py of the real-clients rig;
the two are to be unified.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_BINARIES = {"claude": "node_modules/.bin/claude", "codex": "node_modules/.bin/codex",
             "gemini": "node_modules/.bin/gemini", "opencode": "node_modules/.bin/opencode",
             "aider": "aider-venv/bin/aider"}


def places() -> list[Path]:
    out = []
    if os.environ.get("CONVLOG_REAL_CLIENTS"):
        out.append(Path(os.environ["CONVLOG_REAL_CLIENTS"]))
    out += [ROOT / ".cache" / "real-clients", Path("/work/cli")]
    return out


def find(name: str) -> tuple[Path | None, str]:
    """(the CLI's executable, "") or (None, why it is missing)."""
    tried = []
    for place in places():
        candidate = place / _BINARIES[name]
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, ""
        tried.append(str(candidate))
    return None, f"{name} is not installed (looked for {', '.join(tried)})"


def require(name: str) -> Path:
    """The CLI, or skip with the reason (fail in CI, where the CLIs must be installed)."""
    path, why = find(name)
    if path is None:
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    return path
