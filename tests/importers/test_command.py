"""``convlog import``: detection, the summary, --json, exit 2 and nothing written on bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.importers import command
from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.store import open_store
from engine.store.sqlite import SQLiteStore
from projections.verbs import imported_from
from tests.importers.support import FIXTURES
from tests.support.cli_run import run_cli


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
    assert "--lenient skips such lines" in err  # the way to import the rest
    store = open_store(url)
    try:
        assert store.sessions() == []
    finally:
        store.close()
    assert main(["import", str(bad), "--store", url, "--lenient"]) == 0
    assert "skipped 1 bad line(s)" in capsys.readouterr().out


def test_a_torn_metadata_line_mid_file_loses_nothing_after_it_with_lenient(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real failure (anthropics/claude-code#50347): a ``file-history-snapshot`` line cut
    mid-JSON in the middle of a session file, valid records after it. The refusal names
    --lenient; with it every message after the torn line is imported."""
    source = next((FIXTURES / "claude-code-metadata-first").glob("*.jsonl"))
    lines = source.read_text().splitlines(keepends=True)
    torn = '{"type":"file-history-snapshot","messageId":"m","snapshot":{"trackedFileBack\n'
    path = tmp_path / source.name
    path.write_text("".join([*lines[:6], torn, *lines[6:]]))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(path), "--store", url]) == 2
    assert "--lenient" in capsys.readouterr().err
    assert main(["import", str(path), "--store", url, "--lenient", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["line"] for s in report["skipped"]] == [7]
    assert [(s["messages"], s["tools"]) for s in report["sessions"]] == [(3, 1)]


def test_a_wrong_format_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"hello": 1}\n')
    assert main(["import", str(path), "--format", "codex", "--store", "memory://"]) == 2
    assert str(path) in capsys.readouterr().err


# --------------------------------------------------------------------------- a new user


def test_a_wrong_path_and_an_empty_directory_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(tmp_path / "nope.jsonl"), "--store", url]) == 2
    assert "no such file or directory; nothing written" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["import", str(tmp_path / "empty"), "--store", url]) == 2
    assert "no transcript found" in capsys.readouterr().err
    assert not (tmp_path / "c.db").exists()  # refused before the store is created


def mixed(tmp_path: Path) -> Path:
    """A directory a user might point at: several tools' files and one stray file."""
    root = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "claude-code", root / "claude")
    shutil.copytree(FIXTURES / "codex", root / "codex")
    shutil.copy(FIXTURES / "qcli-v1.14-objects.json", root)
    (root / "notes.json").write_text('{"hello": "world"}')
    return root


def test_a_directory_of_mixed_formats_imports_each_by_its_importer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = mixed(tmp_path)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(root), "--store", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)  # --json is one JSON document
    assert report["format"] == "claude-code+codex+qcli"
    assert "a file no importer recognises: not imported" in report["unmapped"]
    with open_store(url) as store:
        heads = [imported_from(store, s.id) for s in store.sessions() if s.parent is None]
        formats = sorted(h.format for h in heads if h is not None)
    assert formats == ["claude-code"] * 3 + ["codex"] * 3 + ["qcli"]  # a child included
    assert main(["import", str(root), "--store", url]) == 0  # again: nothing new
    assert "0 event(s) written" in capsys.readouterr().out


def test_ctrl_c_mid_import_leaves_whole_sessions_and_a_reimport_finishes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = mixed(tmp_path)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    clean = f"sqlite:///{tmp_path / 'clean.db'}"
    assert main(["import", str(root), "--store", clean]) == 0
    real = SQLiteStore.append
    calls = 0

    def interrupted(self: SQLiteStore, *args: object, **kw: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLiteStore, "append", interrupted)
    assert main(["import", str(root), "--store", url]) == 130
    assert "import the same path again to finish" in capsys.readouterr().err
    monkeypatch.setattr(SQLiteStore, "append", real)
    assert main(["verify", url]) == 0  # consistent: every session whole
    assert main(["import", str(root), "--store", url]) == 0
    capsys.readouterr()
    with open_store(url) as a, open_store(clean) as b:
        assert {s.id: list(a.read(s.id)) for s in a.sessions()} == {
            s.id: list(b.read(s.id)) for s in b.sessions()}


def test_progress_is_shown_on_a_terminal_for_large_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "rollout-big.jsonl"
    src = next((FIXTURES / "codex").glob("rollout-2025-09-03*.jsonl")).read_text()
    pad = json.dumps({"timestamp": "2025-09-03T14:00:20.000Z", "type": "event_msg",
                      "payload": {"type": "token_count", "info": None}}) + "\n"
    big.write_text(src + pad * 40000)
    monkeypatch.setattr(command, "PROGRESS_MIN_BYTES", 1024)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert main(["import", str(big), "--store", f"sqlite:///{tmp_path / 'c.db'}"]) == 0
    err = capsys.readouterr().err
    assert "reading" in err
    assert " MB" in err


@pytest.mark.parametrize("name", ["bad\nname.jsonl", "tab\there.jsonl", "esc\x1b[31m.jsonl"])
def test_a_refusal_is_one_printable_line_whatever_the_file_name(
        name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text("{oops\n")
    done = run_cli(["import", str(path), "--store", "memory://"])
    done.assert_clean()  # one printable first line
    assert done.code == 2
    assert done.err.count("\n") == 1
