"""Claude Code Agent Teams inboxes: into the mailbox and back out, unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli.app import main
from engine.session import StepClock
from engine.store import MemoryStore
from projections.mailbox import Mailbox
from projections.mailbox.teams import export_team, import_team

TEAM = Path(__file__).resolve().parents[1] / "fixtures" / "agent-teams" / "review-team"


def _inboxes(root: Path) -> dict[str, object]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((root / "inboxes").glob("*.json"))}


def test_import_keeps_sender_recipient_time_read_summary_and_color(tmp_path: Path) -> None:
    mb = Mailbox(MemoryStore(), "review", clock=StepClock())
    plan = import_team(mb, TEAM)
    assert plan.plan == {"create_project": {"id": "review", "working_directory": "/work/app"},
                         "register": ["security", "team-lead", "tests"],
                         "assign": ["security", "team-lead", "tests"]}
    assert mb.view.messages == {}  # nothing written without assign
    report = import_team(mb, TEAM, assign=True)
    assert (report.imported, report.already, report.read, report.conflicts) == (5, 0, 3, [])
    msg = mb.view.messages["0d6f1f7e-5b0e-4c1e-9a57-6c1f0c2d7a01"]
    assert (msg.sender_id, msg.receivers, msg.summary, msg.color) == (
        "security", ("team-lead",), "Security review done", "blue")
    assert msg.created_at == 1770836620120  # 2026-02-11T19:03:40.120Z
    assert mb.receipts(msg.id) == {"team-lead": "read"}
    idle = mb.view.messages["6a3b0c55-8d2e-4f0a-b1d3-2e9f4c7a8b02"]
    assert json.loads(idle.content)["type"] == "idle_notification"  # kept verbatim
    assert mb.receipts(idle.id) == {"team-lead": "sent"}
    # Export writes the same layout back: every inbox equal, entry for entry.
    export_team(mb, tmp_path / "out")
    assert _inboxes(tmp_path / "out") == _inboxes(TEAM)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["name"] == "review-team"
    assert {m["name"]: m.get("color") for m in config["members"]} == {
        "team-lead": None, "security": "blue", "tests": "green"}
    again = import_team(mb, TEAM, assign=True)
    assert (again.imported, again.already, again.read) == (0, 5, 0)


def test_a_read_flag_that_turns_true_is_logged_on_the_next_import(tmp_path: Path) -> None:
    team = tmp_path / "team"
    shutil.copytree(TEAM, team)
    mb = Mailbox(MemoryStore(), "review", clock=StepClock())
    import_team(mb, team, assign=True)
    lead = team / "inboxes" / "team-lead.json"
    entries = json.loads(lead.read_text())
    entries[1]["read"] = True
    lead.write_text(json.dumps(entries, indent=2))
    report = import_team(mb, team)
    assert (report.imported, report.read) == (0, 1)
    assert mb.receipts("6a3b0c55-8d2e-4f0a-b1d3-2e9f4c7a8b02") == {"team-lead": "read"}


def test_entries_without_msg_id_group_into_one_broadcast(tmp_path: Path) -> None:
    """Older files have no msg_id: the same send in several inboxes is one message."""
    team = tmp_path / "team"
    (team / "inboxes").mkdir(parents=True)
    (team / "config.json").write_text(json.dumps({"name": "t", "members": []}))
    sent = {"from": "lead", "text": "standup", "timestamp": "2026-02-11T19:05:00.000Z"}
    for agent, read in (("a", True), ("b", False)):
        (team / "inboxes" / f"{agent}.json").write_text(json.dumps([{**sent, "read": read}]))
    mb = Mailbox(MemoryStore(), "t", clock=StepClock())
    import_team(mb, team, assign=True)
    [msg] = mb.view.messages.values()
    assert (msg.receivers, msg.broadcast) == (("a", "b"), True)
    assert mb.receipts(msg.id) == {"a": "read", "b": "sent"}
    assert import_team(mb, team).imported == 0  # the derived id is stable


def test_the_cli_imports_and_exports_a_team(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    assert main(["mailbox", "import", str(TEAM), "--store", url, "--project", "review"]) == 3
    assert "would_change" in capsys.readouterr().out
    assert main(["mailbox", "import", str(TEAM), "--store", url, "--project", "review",
                 "--assign"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 5
    assert main(["mailbox", "export", str(tmp_path / "out"), "--layout", "agent-teams",
                 "--store", url, "--project", "review"]) == 0
    assert _inboxes(tmp_path / "out") == _inboxes(TEAM)


def test_convlog_import_refuses_a_team_directory(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: `convlog import` on a team dir exited 0, imported nothing and created a
    store. It now refuses and names the mailbox import; nothing is created."""
    db = tmp_path / "c.db"
    for path in (TEAM, TEAM / "inboxes", TEAM / "inboxes" / "security.json"):
        assert main(["import", str(path), "--store", f"sqlite:///{db}"]) == 2
        err = capsys.readouterr().err
        assert "Agent Teams" in err
        assert "convlog mailbox import" in err
    assert not db.exists()
