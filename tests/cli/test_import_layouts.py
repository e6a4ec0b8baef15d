"""`convlog import` on each tool's directory as the tool lays it out under a home directory,
and on the whole home at once (autodetection, one all-or-nothing plan, a re-import writes
nothing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from tests.importers.support import FIXTURES
from tests.importers.test_opencode_v2 import build as build_opencode_db
from tests.importers.test_qcli_db import data_dir as build_qcli_dir


def fake_home(root: Path) -> Path:
    """A home holding every tool's sessions where the tool keeps them (and the files beside
    them an import must not take for sessions)."""
    home = root / "home"
    shutil.copytree(FIXTURES / "claude-projects", home / ".claude" / "projects")
    (home / ".claude" / "history.jsonl").write_text(
        '{"display": "hi", "pastedContents": {}, "timestamp": 1, "project": "/p"}\n')
    shutil.copytree(FIXTURES / "codex-home", home / ".codex")
    (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": "sk-not-a-session"}')
    shutil.copytree(FIXTURES / "gemini-tmp", home / ".gemini" / "tmp" / "3f9a")
    (home / ".gemini" / "settings.json").write_text('{"theme": "dark"}')
    shutil.copytree(FIXTURES / "opencode-data", home / ".local" / "share" / "opencode")
    build_opencode_db(home / ".local" / "share" / "opencode" / "opencode.db")
    (home / ".local" / "share" / "amazon-q").mkdir(parents=True)
    build_qcli_dir(home / ".local" / "share" / "amazon-q")
    (home / "project").mkdir()
    shutil.copy(FIXTURES / "aider" / ".aider.chat.history.md", home / "project")
    return home


def imported(capsys: pytest.CaptureFixture[str], path: Path, store: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["import", str(path), "--store", store, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


LAYOUTS = [
    (".claude/projects", "claude-code", 2),
    (".codex", "codex", 2),
    (".codex/sessions/2026/07/02", "codex", 2),
    (".gemini/tmp/3f9a", "gemini", 3),
    (".gemini/tmp", "gemini", 3),
    (".local/share/opencode", "opencode", 6),
    (".local/share/amazon-q", "qcli", 2),
    ("project", "aider", 2),
]


@pytest.mark.parametrize(("where", "fmt", "sessions"), LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_each_tools_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str,
                              fmt: str, sessions: int) -> None:
    home = fake_home(tmp_path)
    store = f"sqlite:///{tmp_path / 'out.db'}"
    report = imported(capsys, home / where, store)
    assert report["format"] == fmt
    assert len(report["sessions"]) == sessions
    assert report["written"] > 0
    again = imported(capsys, home / where, store)
    assert (again["written"], again["existing"]) == (0, report["written"])


def test_the_whole_home_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    store = f"sqlite:///{tmp_path / 'out.db'}"
    report = imported(capsys, home, store)
    assert set(report["format"].split("+")) == {"claude-code", "codex", "gemini", "opencode",
                                                "qcli", "aider"}
    unknown = [line for key, item in report["unmapped"].items()
               if key.endswith("a file no importer recognises: not imported")
               for line in item["lines"]]
    names = {Path(str(x)).name for x in unknown}
    assert {"history.jsonl", "auth.json", "settings.json"} <= names
    raw = (tmp_path / "out.db").read_bytes()
    assert b"sk-not-a-session" not in raw  # auth.json is named, never read into the store
