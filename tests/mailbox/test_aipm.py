"""The seed's .ai-pm files: exported from the log, imported with torn writes reported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.cli import main
from engine.mailbox import MailboxError
from engine.session import StepClock
from engine.store import MemoryStore, Store, open_store
from projections.mailbox import MAILBOX_SESSION, Mailbox
from projections.mailbox.aipm import export_lines, export_tree, import_tree, iso


def _chat(root: Path, agent: str) -> list[dict[str, object]]:
    path = root / ".ai-pm" / "agents" / agent / "chat.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_export_is_the_seeds_layout(mailbox: Mailbox, tmp_path: Path) -> None:
    ta = mailbox.authenticate("agent-a")
    sent = mailbox.send(ta, "agent-b", "質問です", related_task_id="task-1")
    export_tree(mailbox, tmp_path)
    created = iso(sent.created_at)
    assert _chat(tmp_path, "agent-a") == [{
        "id": sent.id, "senderId": "agent-a", "receiverId": "agent-b", "content": "質問です",
        "createdAt": created, "relatedTaskId": "task-1"}]
    assert _chat(tmp_path, "agent-b") == [{
        "id": sent.id, "senderId": "agent-a", "content": "質問です", "createdAt": created,
        "relatedTaskId": "task-1"}]
    raw = (tmp_path / ".ai-pm/agents/agent-b/chat.jsonl").read_text(encoding="utf-8")
    assert raw.startswith('{"id":')
    assert "質問です" in raw
    assert not (tmp_path / ".ai-pm/agents/agent-c").exists()


def test_iso_matches_the_seed() -> None:
    assert iso(1769162400000) == "2026-01-23T10:00:00Z"
    assert iso(1769162400123) == "2026-01-23T10:00:00.123Z"


def test_round_trip_through_the_files(mailbox: Mailbox, tmp_path: Path) -> None:
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    q = mailbox.send(ta, "agent-b", "q", related_task_id="t")
    mailbox.reply(tb, q.id, "a")
    mailbox.broadcast(ta, "all")
    export_tree(mailbox, tmp_path)
    copy = Mailbox(MemoryStore(), "project-1", clock=StepClock())
    report = import_tree(copy, tmp_path, assign=True)
    assert (report.imported, report.torn, report.conflicts) == (3, [], [])
    assert export_lines(copy) == export_lines(mailbox)
    again = import_tree(copy, tmp_path)  # importing twice writes nothing new
    assert (again.imported, again.already) == (0, 3)


def _write(root: Path, agent: str, *lines: dict[str, str]) -> None:
    d = root / ".ai-pm" / "agents" / agent
    d.mkdir(parents=True, exist_ok=True)
    with (d / "chat.jsonl").open("a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


def test_a_torn_dual_write_is_reported(tmp_path: Path) -> None:
    at = "2026-01-23T10:00:00Z"
    _write(tmp_path, "agent-a",
           {"id": "msg_01", "senderId": "agent-a", "receiverId": "agent-b", "content": "ok",
            "createdAt": at},
           # the crash: the sender's copy was written, the receiver's never was
           {"id": "msg_02", "senderId": "agent-a", "receiverId": "agent-b", "content": "lost",
            "createdAt": at})
    _write(tmp_path, "agent-b",
           {"id": "msg_01", "senderId": "agent-a", "content": "ok", "createdAt": at},
           {"id": "msg_03", "senderId": "agent-a", "content": "orphan", "createdAt": at})
    mb = Mailbox(MemoryStore(), "p", clock=StepClock())
    report = import_tree(mb, tmp_path, assign=True)
    assert report.imported == 1
    assert sorted((t.id, t.has) for t in report.torn) == [("msg_02", "sender"),
                                                          ("msg_03", "receiver")]
    assert [m.id for m in mb.messages("agent-b")] == ["msg_01"]
    assert mb.view.messages["msg_01"].created_at == 1769162400000
    both = Mailbox(MemoryStore(), "p", clock=StepClock())
    assert import_tree(both, tmp_path, include_torn=True, assign=True).imported == 3


def test_paths_outside_the_tree_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    _write(outside, "agent-z", {"id": "m", "senderId": "agent-y", "content": "secret",
                                "createdAt": "2026-01-23T10:00:00Z"})
    root = tmp_path / "tree"
    _write(root, "agent-a", {"id": "m1", "senderId": "agent-a", "receiverId": "agent-b",
                             "content": "x", "createdAt": "2026-01-23T10:00:00Z"})
    os.symlink(outside / ".ai-pm/agents/agent-z", root / ".ai-pm/agents/agent-z")
    (root / ".ai-pm/agents/agent-q").mkdir()
    os.symlink(outside / ".ai-pm/agents/agent-z/chat.jsonl",
               root / ".ai-pm/agents/agent-q/chat.jsonl")
    mb = Mailbox(MemoryStore(), "p", clock=StepClock())
    report = import_tree(mb, root)
    assert sorted(Path(p).parent.name for p in report.refused) == ["agent-q", "agent-z"]
    assert report.imported == 0
    assert mb.view.messages == {}  # nothing written


def test_export_refuses_an_agent_id_that_leaves_the_tree(store: Store, clock: StepClock,
                                                         tmp_path: Path) -> None:
    mb = Mailbox(store, "p", clock=clock)
    mb.create_project("/w")
    for agent in ("../../evil", "agent-b"):
        mb.register_agent(agent)
        mb.assign(agent)
    mb.send(mb.authenticate("../../evil"), "agent-b", "x")
    with pytest.raises(ValueError, match="cannot name a directory"):
        export_tree(mb, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_the_cli_exports_and_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    store = open_store(url)
    mb = Mailbox(store, "project-1")
    mb.create_project("/w")
    for agent in ("agent-a", "agent-b"):
        mb.register_agent(agent)
        mb.assign(agent)
    mb.send(mb.authenticate("agent-a"), "agent-b", "hello")
    store.close()
    assert main(["mailbox", "export", "--layout", "ai-pm", str(tmp_path / "out"),
                 "--store", url, "--project", "project-1"]) == 0
    assert _chat(tmp_path / "out", "agent-b")[0]["content"] == "hello"
    capsys.readouterr()
    url2 = f"sqlite:///{tmp_path}/n.db"
    assert main(["mailbox", "import", str(tmp_path / "out"), "--store", url2,
                 "--project", "project-1", "--assign"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 1
    (tmp_path / "out/.ai-pm/agents/agent-b/chat.jsonl").unlink()
    assert main(["mailbox", "import", str(tmp_path / "out"), "--store", url2,
                 "--project", "project-1"]) == 3
    assert json.loads(capsys.readouterr().out)["torn"][0]["has"] == "sender"


def test_import_of_a_missing_directory_is_a_usage_error_that_creates_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was an internal error (FileNotFoundError) after creating the store."""
    db = tmp_path / "mb.db"
    assert main(["mailbox", "import", str(tmp_path / "nowhere"), "--store", f"sqlite:///{db}",
                 "--project", "p"]) == 2
    assert capsys.readouterr().err.startswith("convlog mailbox import: no such directory: ")
    assert not db.exists()


def test_export_from_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "mb.db"
    assert main(["mailbox", "export", str(tmp_path / "out"), "--store", f"sqlite:///{db}",
                 "--project", "p"]) == 2
    assert not db.exists()


def test_import_never_changes_membership_unless_asked(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29, defect 5: a file written by another project's agent assigned that
    agent to this project, which then logged in and messaged a member. Without
    --assign, import says what it would change and writes nothing."""
    url = f"sqlite:///{tmp_path}/m.db"
    store = open_store(url)
    mb = Mailbox(store, "project-1")
    mb.create_project("/w")
    for agent in ("agent-a", "agent-b"):
        mb.register_agent(agent)
        mb.assign(agent)
    Mailbox(store, "project-2").create_project("/other")
    mb.register_agent("intruder")
    Mailbox(store, "project-2").assign("intruder")
    version = store.version(MAILBOX_SESSION)
    store.close()
    _write(tmp_path / "tree", "intruder",
           {"id": "m9", "senderId": "intruder", "receiverId": "agent-a", "content": "hi",
            "createdAt": "2026-01-23T10:00:00Z"})
    _write(tmp_path / "tree", "agent-a",
           {"id": "m9", "senderId": "intruder", "content": "hi",
            "createdAt": "2026-01-23T10:00:00Z"})
    capsys.readouterr()
    assert main(["mailbox", "import", str(tmp_path / "tree"), "--store", url,
                 "--project", "project-1"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["would_change"] == {"assign": ["intruder"]}
    store = open_store(url)
    try:
        assert store.version(MAILBOX_SESSION) == version  # nothing written
        with pytest.raises(MailboxError, match="sender_not_in_project"):
            Mailbox(store, "project-1").issue_token("intruder")
    finally:
        store.close()
    assert main(["mailbox", "import", str(tmp_path / "tree"), "--store", url,
                 "--project", "project-1", "--assign"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] == {"assign": ["intruder"]}
