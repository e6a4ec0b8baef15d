"""``convlog import``: detection, the summary, --json, exit 2 and nothing written on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.store import open_store
from tests.importers.support import FIXTURES


@pytest.mark.parametrize(("path", "fmt"), [
    ("claude-code", "claude-code"),
    ("claude-code/5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f.jsonl", "claude-code"),
    ("codex", "codex"),
    ("qcli-v1.10-pairs.json", "qcli"),
    ("qcli-v1.14-objects.json", "qcli"),
    ("opencode/export-live.json", "opencode"),
    ("aider/.aider.chat.history.md", "aider"),
])
def test_formats_are_detected(path: str, fmt: str) -> None:
    assert detect(FIXTURES / path) == fmt


def test_other_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(ImportInputError, match="not a transcript"):
        detect(path)


def test_import_prints_a_summary_and_reimport_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(FIXTURES / "claude-code"), "--store", url]) == 0
    out = capsys.readouterr().out
    assert "1 session(s), 1 fork(s), 2 child session(s)" in out
    assert "not mapped" in out
    assert main(["import", str(FIXTURES / "claude-code"), "--store", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["written"] == 0
    assert report["existing"] > 0
    assert report["format"] == "claude-code"
    assert main(["verify", url]) == 0


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "s.jsonl"
    good = (FIXTURES / "claude-code" / "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f.jsonl").read_text()
    lines = good.splitlines(keepends=True)
    bad.write_text("".join([*lines[:3], "{oops\n", *lines[3:]]))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(bad), "--store", url]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4" in err
    assert "nothing written" in err
    store = open_store(url)
    try:
        assert store.sessions() == []
    finally:
        store.close()
    assert main(["import", str(bad), "--store", url, "--lenient"]) == 0
    assert "skipped 1 bad line(s)" in capsys.readouterr().out


def test_a_wrong_format_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"hello": 1}\n')
    assert main(["import", str(path), "--format", "codex", "--store", "memory://"]) == 2
    assert str(path) in capsys.readouterr().err
