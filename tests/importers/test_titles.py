"""Sessions keep the name their tool recorded (issue 23): a ``session.titled`` event per
name (Claude Code's ``/rename``, generated title and ``summary``, Codex's thread name,
OpenCode's title, Gemini's summary), the latest wins; ``convlog sessions`` shows it,
else the first prompt, and ``--json`` lists it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import events as ev
from engine.cli.app import main
from engine.importers.detect import plan_path
from engine.store import open_store
from tests.importers.support import FIXTURES, written

SID = "7a1e0000-0000-4000-8000-000000000001"


def _line(uuid: str, parent: str | None, kind: str, text: str, second: int) -> dict[str, Any]:
    message: dict[str, Any] = ({"role": "user", "content": text} if kind == "user" else {
        "id": f"msg_{uuid}", "role": "assistant", "model": "m", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": text}]})
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SID,
            "isSidechain": False, "timestamp": f"2026-10-01T10:00:{second:02d}.000Z",
            "message": message}


def _titled(path: Path) -> list[tuple[str, str]]:
    plan = plan_path(path)
    store = written(plan)
    return [(e.title, e.source) for s in plan.sessions for e in store.read(s.id)
            if isinstance(e, ev.SessionTitled)]


def test_each_tools_recorded_name_is_a_session_titled_event() -> None:
    assert _titled(FIXTURES / "opencode" / "export-live.json") == [
        ("Fix the parser tests", "opencode title")]
    assert _titled(FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.json") == [
        ("Listing python files", "gemini summary")]


def test_a_rename_beats_the_summary_and_a_later_rename_is_appended(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{SID}.jsonl"
    lines = [_line("u0", None, "user", "fix   the\nbuild please", 0),
             _line("a0", "u0", "assistant", "done", 1),
             {"type": "summary", "summary": "Build fix", "leafUuid": "a0"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(path), "--store", url]) == 0
    assert main(["import", str(path), "--store", url, "--json"]) == 0
    capsys.readouterr()
    assert main(["sessions", url, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["title"], row["title_source"]) == ("Build fix", "claude-code summary")
    assert row["imported"]["format"] == "claude-code"
    assert row["kind"] == "main"
    # The session goes on and is renamed: only the new name (and the new lines) come in.
    with path.open("a") as f:
        f.write(json.dumps({"type": "custom-title", "customTitle": "CI repair",
                            "sessionId": SID}) + "\n")
    assert main(["import", str(path), "--store", url]) == 0
    capsys.readouterr()
    assert main(["sessions", url]) == 0
    assert capsys.readouterr().out.rstrip().endswith('"CI repair"')
    with open_store(url) as store:
        [info] = store.sessions()
        titled = [e.title for e in store.read(info.id) if isinstance(e, ev.SessionTitled)]
    assert titled == ["Build fix", "CI repair"]


def test_a_session_without_a_name_is_listed_by_its_first_prompt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        _line("u0", None, "user", "fix   the\nbuild " + "x" * 100, 0),
        _line("a0", "u0", "assistant", "done", 1)]))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(path), "--store", url]) == 0
    capsys.readouterr()
    assert main(["sessions", url, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["title_source"] == "first prompt"
    assert row["title"].startswith("fix the build xxx")
    assert len(row["title"]) == 80
    assert main(["sessions", url]) == 0
    assert '"fix the build xxx' in capsys.readouterr().out
