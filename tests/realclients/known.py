"""Where convlog's import of a real-CLI fixture is still wrong, by test id.

Each entry marks its test ``xfail(strict=True)``: the test keeps asserting the
truth, the suite stays green, and the day the importer is fixed the test passes,
which fails the run until the entry is deleted here. Issue 23 numbers the classes.
"""

from __future__ import annotations

CLAUDE = "claude-code-2.1.197"
CODEX = "codex-0.171.0"
GEMINI = "gemini-cli-0.61.0"
OPENCODE = "opencode-1.18.33"
AIDER = "aider-0.86.2"

KNOWN: dict[str, str] = {}
