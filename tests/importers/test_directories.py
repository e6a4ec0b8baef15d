"""A directory of transcripts imports as its files do one by one, whatever mix of
formats and file extensions it holds (a directory of only ``.json`` files, Gemini's
sessions or checkpoints or Q CLI saves, was "no transcript found")."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.detect import plan_path
from tests.importers.support import FIXTURES, written

# Files that are whole transcripts on their own (no companion files beside them).
SINGLE = [
    *sorted((FIXTURES / "codex").glob("rollout-*.jsonl")),
    *sorted((FIXTURES / "codex-legacy").glob("rollout-*.jsonl")),
    next((FIXTURES / "gemini").glob("*.json")),
    *sorted((FIXTURES / "gemini-checkpoints").glob("*.json")),
    FIXTURES / "qcli-v1.10-pairs.json",
    FIXTURES / "qcli-v1.14-objects.json",
    FIXTURES / "opencode" / "export-live.json",
    FIXTURES / "aider" / ".aider.chat.history.md",
]


def _ids(path: Path) -> set[str]:
    return {s.id for s in plan_path(path).sessions}


ALONE = {f: _ids(f) for f in SINGLE}


@settings(max_examples=25, deadline=None)
@given(st.sets(st.sampled_from(SINGLE), min_size=1))
def test_a_directory_imports_what_its_files_import_alone(files: set[Path]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in files:
            shutil.copy(f, root / f.name)
        plan = plan_path(root)
        assert {s.id for s in plan.sessions} == set().union(*(ALONE[f] for f in files))
        written(plan)


def test_a_directory_of_json_files_only_imports(tmp_path: Path) -> None:
    # Gemini's tmp/<project>/ holds chats/session-*.json, checkpoints and logs.json, and
    # no *.jsonl: it was "no transcript found in this directory".
    (tmp_path / "chats").mkdir()
    shutil.copy(next((FIXTURES / "gemini").glob("*.json")), tmp_path / "chats")
    shutil.copy(FIXTURES / "gemini-checkpoints" / "checkpoint-fix-bug.json", tmp_path)
    (tmp_path / "logs.json").write_text('[{"sessionId": "s", "messageId": 0, "type": "user", '
                                        '"message": "hi", "timestamp": "2025-01-01T00:00:00Z"}]')
    plan = plan_path(tmp_path)
    # logs.json was "a file no importer recognises"; it is now the prompts of session "s"
    # (no chat recording of "s" is in the directory).
    assert len(plan.sessions) == 3
    assert "a file no importer recognises: not imported" not in plan.report.unmapped
    assert [s.source for s in plan.sessions if s.original_id == "s"] == ["logs.json"]
    written(plan)
