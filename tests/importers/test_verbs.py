"""The read-side verbs over an imported store: export, sessions, diff, fork."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.importers.claude_code import plan_claude_code
from engine.importers.write import write_plan
from engine.store import open_store
from projections.verbs import AS_CHOICES
from tests.importers.support import FIXTURES


@pytest.fixture
def imported(tmp_path: Path) -> tuple[str, dict[str, str]]:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    plan = plan_claude_code(FIXTURES / "claude-code")
    store = open_store(url)
    try:
        write_plan(store, plan)
    finally:
        store.close()
    return url, {s.kind: s.id for s in plan.report.sessions}


def test_sessions_prints_the_lineage_tree(imported: tuple[str, dict[str, str]],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, ids = imported
    assert main(["sessions", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    main_line = next(i for i, line in enumerate(lines) if line.startswith(ids["main"]))
    fork_line = next(line for line in lines if ids["fork"] in line)
    assert fork_line.startswith("  ")
    assert "(fork at " in fork_line
    assert any(line.startswith("  ") and "(child)" in line for line in lines[main_line:])


@pytest.mark.parametrize("fmt", AS_CHOICES)
def test_export_in_every_format(imported: tuple[str, dict[str, str]], fmt: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    url, ids = imported
    assert main(["export", url, "--session", ids["fork"], "--as", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "events":
        events = [json.loads(line) for line in out.splitlines()]
        assert events[0]["seq"] == 1
        assert events[-1]["seq"] == len(events)
    elif fmt == "html":  # one self-contained page: no external resource
        assert out.startswith("<!DOCTYPE html>") or out.lower().startswith("<!doctype html>")
        assert ids["fork"] in out
        assert "src=\"http" not in out
        assert "href=\"http" not in out
    elif fmt == "opencode":
        data = json.loads(out)
        assert data["info"]["id"] == ids["fork"]
        assert data["messages"][0]["info"]["role"] == "user"
    else:
        assert json.loads(out)


def test_export_at_a_past_seq_and_out_of_range(imported: tuple[str, dict[str, str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, ids = imported
    assert main(["export", url, "--session", ids["main"], "--as", "opencode", "--at", "6"]) == 0
    assert len(json.loads(capsys.readouterr().out)["messages"]) == 2
    assert main(["export", url, "--session", ids["main"], "--at", "100000"]) == 2


def test_diff_and_fork(imported: tuple[str, dict[str, str]],
                       capsys: pytest.CaptureFixture[str]) -> None:
    url, ids = imported
    assert main(["diff", url, "--session", ids["main"], "3", "20"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["fork", url, "--session", ids["main"], "--at", "10"]) == 0
    fork_id = capsys.readouterr().out.strip()
    store = open_store(url)
    try:
        info = store.session_info(fork_id)
        assert (info.parent, info.fork_seq) == (ids["main"], 10)
    finally:
        store.close()
