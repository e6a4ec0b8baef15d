"""Every session an importer creates opens with ``session.imported`` (forks share it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine import events as ev
from engine.cli import main
from engine.errors import IllegalTransition
from engine.importers.detect import plan_path
from engine.importers.write import write_plan
from engine.session import Session
from engine.store import MemoryStore
from tests.importers.support import FIXTURES, written

SOURCES = [
    ("claude-code", FIXTURES / "claude-code"),
    ("codex", FIXTURES / "codex"),
    ("gemini", FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.jsonl"),
    ("gemini", FIXTURES / "gemini" / "session-2025-10-01T09-00-8f2c1a00.json"),
    ("qcli", FIXTURES / "qcli-v1.10-pairs.json"),
    ("qcli", FIXTURES / "qcli-v1.14-objects.json"),
    ("opencode", FIXTURES / "opencode" / "export-live.json"),
    ("aider", FIXTURES / "aider" / ".aider.chat.history.md"),
]


@pytest.mark.parametrize(("fmt", "path"), SOURCES, ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_each_session_opens_with_session_imported(fmt: str, path: Path) -> None:
    plan = plan_path(path)
    store = written(plan)
    names = {p.name for p in (path.rglob("*") if path.is_dir() else [path])}
    for planned in plan.sessions:
        events = list(store.read(planned.id))
        first = events[0]
        assert isinstance(first, ev.SessionImported), (planned.kind, first)
        assert first.seq == 1
        assert first.format == fmt
        assert first.source in names  # the file's name, never its path
        assert "/" not in first.source
        assert sum(isinstance(e, ev.SessionImported) for e in events) == 1
        if planned.kind == "fork":  # shared from the parent, not written again
            assert planned.fork_seq is not None
            assert planned.fork_seq >= 1
            assert not any(isinstance(e, ev.SessionImported) for e in planned.events)


def test_original_ids_and_versions() -> None:
    codex = plan_path(FIXTURES / "codex")
    store = written(codex)
    heads = [next(iter(store.read(s.id))) for s in codex.sessions]
    assert all(isinstance(h, ev.SessionImported) for h in heads)
    assert {h.original_id for h in heads if isinstance(h, ev.SessionImported)} == {
        "0199a0b1-1111-7222-8333-444455556666", "019aa0b1-2222-7333-8444-555566667777",
        "019c0d11-3333-7444-8555-666677778888"}
    claude = plan_path(FIXTURES / "claude-code")
    store = written(claude)
    main = next(iter(store.read(claude.sessions[0].id)))
    assert isinstance(main, ev.SessionImported)
    assert main.original_id
    assert main.tool_version


def test_the_source_is_the_name_so_a_moved_copy_reimports_as_a_no_op(tmp_path: Path) -> None:
    """Why the event names the file, not its path: the same file imported from another
    directory derives the same event, so the second import writes nothing."""
    store = MemoryStore()
    src = next((FIXTURES / "codex").glob("rollout-2025-09-03*.jsonl"))
    write_plan(store, plan_path(src))
    moved = tmp_path / "elsewhere" / src.name
    moved.parent.mkdir()
    shutil.copy(src, moved)
    again = plan_path(moved)
    write_plan(store, again)
    assert again.report.written == 0


def test_session_imported_is_legal_only_first_and_once() -> None:
    s = Session.create(MemoryStore())
    s.start_message("user")
    with pytest.raises(IllegalTransition, match="first event"):
        s.append([ev.SessionImported(format="codex", source="r.jsonl", original_id="x")])
    t = Session.create(MemoryStore())
    t.append([ev.SessionImported(format="codex", source="r.jsonl", original_id="x")])
    with pytest.raises(IllegalTransition, match="already imported"):
        t.append([ev.SessionImported(format="aider", source="h.md", original_id="")])
    assert t.fork(1).lifecycle.conversation.imported is not None


def test_sessions_lists_where_each_imported_session_came_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(FIXTURES / "codex"), "--store", url]) == 0
    assert main(["import", str(FIXTURES / "claude-code"), "--store", url]) == 0
    capsys.readouterr()
    assert main(["sessions", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum("from codex rollout-" in line for line in lines) == 3
    assert any("from claude-code 5b1f0e6e" in line for line in lines)
    forks = [line for line in lines if "(fork at" in line]
    assert forks
    assert not any(" from " in line for line in forks)  # a fork shares its parent's origin
