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

KNOWN: dict[str, str] = {
    f"test_usage_is_kept[{GEMINI}]":
        "issue 23 class 8: the JSONL session's `tokens` (and model) are not read",
    f"test_compaction_is_the_sessions_own[{GEMINI}]":
        "issue 23 class 8: --resume read as rewinds, so no one main session holds the "
        "turns around the compression",
    f"test_session_structure[{GEMINI}]":
        "issue 23 class 8: each --resume appends a header and $set to the file and reads "
        "as a rewind (an empty main session and 7 forks); the stub file a later --resume "
        "writes (same sessionId, only $set) is a second main session with 2 forks",
}
