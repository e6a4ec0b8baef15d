"""JSON nested deeper than the interpreter can follow (a hostile or broken file) is
invalid input, exit 2 and nothing written; it was an internal error (RecursionError)
in format detection, JSON lines and whole documents alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.importers.base import ImportInputError
from engine.importers.detect import plan_path
from tests.support.cli_run import run_cli

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("name", "text", "fmt"), [
    ("save.json", '{"conversation_id": "c", "history": [], "x": ' + DEEP + "}", "auto"),
    ("s.jsonl", '{"type": "user", "uuid": "u", "message": ' + DEEP + "}\n", "auto"),
    ("s.jsonl", '{"type": "user", "uuid": "u", "message": ' + DEEP + "}\n", "claude-code"),
    ("rollout-x.jsonl", '{"timestamp": "t", "type": "response_item", "payload": '
     + DEEP + "}\n", "codex"),
    ("session-x.json", '{"sessionId": "g", "projectHash": "p", "messages": ' + DEEP + "}",
     "gemini"),
    ("export.json", '{"info": {}, "messages": ' + DEEP + "}", "opencode"),
])
def test_too_deep_is_invalid_input_not_a_crash(name: str, text: str, fmt: str,
                                               tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ImportInputError):
        plan_path(path, fmt)
    done = run_cli(["import", str(path), "--format", fmt, "--store", f"sqlite:///{tmp_path}/s.db"])
    done.assert_clean()
    assert done.code == 2
    assert not (tmp_path / "s.db").exists()
