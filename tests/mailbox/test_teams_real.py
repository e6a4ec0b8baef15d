"""A real Claude Code Agent Teams directory, captured from the CLI (not written by hand).

``python -m tests.realclients.teams`` ran Claude Code 2.1.197 interactively in tmux
against the scripted model: the lead spawned a teammate in a tmux pane, messaged
it, and the teammate answered. Every distinct state of ``~/.claude/teams/<team>/``
was kept, in order: Claude Code empties an inbox once its agent has the messages,
so no single state holds the whole conversation.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from engine import events as ev
from engine.session import StepClock
from engine.store import MemoryStore
from projections.mailbox import Mailbox
from projections.mailbox.mailbox import MAILBOX_SESSION
from projections.mailbox.teams import export_team, import_team

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agent-teams" / "claude-2.1.197"
STATES = sorted(d for d in CAPTURE.iterdir() if d.is_dir() and d.name.isdigit())


def _team(state: Path) -> Path:
    [team] = [d for d in state.iterdir() if d.is_dir()]
    return team


def _entries(state: Path) -> dict[str, dict[str, object]]:
    """Every inbox entry of a state by msg_id, with the inbox it sits in."""
    out = {}
    for inbox in sorted((_team(state) / "inboxes").glob("*.json")):
        for entry in json.loads(inbox.read_text()):
            out[entry["msg_id"]] = {**entry, "to": inbox.stem}
    return out


def test_the_capture_holds_the_conversation_across_its_states() -> None:
    seen: dict[str, dict[str, object]] = {}
    for state in STATES:
        seen.update(_entries(state))
    said = [(e["from"], e["to"], e.get("summary")) for e in seen.values()
            if not str(e["text"]).startswith("{")]
    assert ("team-lead", "worker", "a question for the worker") in said
    assert ("worker", "team-lead", "the answer is four") in said
    # Claude Code takes entries out of an inbox once delivered: some vanish.
    assert any(set(_entries(a)) - set(_entries(b)) for a, b in itertools.pairwise(STATES))


@pytest.mark.parametrize("state", STATES, ids=lambda p: p.name)
def test_each_state_exports_back_byte_for_byte(state: Path, tmp_path: Path) -> None:
    """Import one state into an empty mailbox, export it: every file Claude Code
    wrote comes back with the same bytes (config verbatim, entries in the writer's
    key order, two-space indent, no final newline)."""
    team = _team(state)
    mb = Mailbox(MemoryStore(), "team", clock=StepClock())
    report = import_team(mb, team, assign=True)
    assert report.conflicts == []
    assert report.config
    export_team(mb, tmp_path / "out")
    for path in sorted(p for p in team.rglob("*.json")):
        rel = path.relative_to(team)
        assert (tmp_path / "out" / rel).read_bytes() == path.read_bytes(), rel


def test_importing_every_state_in_order_keeps_every_message_once() -> None:
    """What a watcher gets: importing the directory each time it changes logs every
    message once, with its sender, recipient, time, summary and colour, and the
    config again only when it changed."""
    mb = Mailbox(MemoryStore(), "team", clock=StepClock())
    configs: list[object] = []
    seen: dict[str, dict[str, object]] = {}
    for state in STATES:
        team = _team(state)
        config = json.loads((team / "config.json").read_text())
        if not configs or configs[-1] != config:
            configs.append(config)
        report = import_team(mb, team, assign=True)
        assert report.conflicts == []
        seen.update(_entries(state))
    view = mb.refresh()
    assert set(view.messages) == set(seen)
    for mid, entry in seen.items():
        msg = view.messages[mid]
        assert (msg.sender_id, list(msg.receivers), msg.content, msg.summary, msg.color) == (
            entry["from"], [entry["to"]], entry["text"], entry.get("summary"),
            entry.get("color"))
    logged = [e.config for e in mb.log.store.read(MAILBOX_SESSION)
              if isinstance(e, ev.ProjectTeamConfigSet)]
    assert logged == configs
