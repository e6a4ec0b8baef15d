"""The seed's file layout: ``DIR/.ai-pm/agents/{agent-id}/chat.jsonl``.

Export derives the files from the log, so UIs that read them keep working: the
sender's copy of a message carries ``receiverId``, the receiver's copy does not.
Import reads such a tree back. The seed writes the two copies one after the
other, so a crash between them leaves one side only (a torn message); import
pairs the copies by id and reports every torn one instead of hiding it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from engine.mailbox import MailboxError
from projections.mailbox.mailbox import Mailbox
from projections.mailbox.view import Message

AGENTS_DIR = Path(".ai-pm") / "agents"


def iso(ms: int) -> str:
    """The seed's ``createdAt``: ISO 8601 in UTC, seconds, with a ``Z``."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    if ms % 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _line(msg: Message, receiver: str | None) -> str:
    out: dict[str, Any] = {"id": msg.id, "senderId": msg.sender_id}
    if receiver is not None:
        out["receiverId"] = receiver
    out["content"] = msg.content
    out["createdAt"] = iso(msg.created_at)
    if msg.related_task_id is not None:
        out["relatedTaskId"] = msg.related_task_id
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _safe_component(agent_id: str) -> str:
    if agent_id in ("", ".", "..") or "/" in agent_id or "\\" in agent_id or "\0" in agent_id:
        raise ValueError(f"agent id {agent_id!r} cannot name a directory")
    return agent_id


def export_lines(mailbox: Mailbox) -> dict[str, list[str]]:
    """Each agent's ``chat.jsonl`` lines, in log order (a pure function of the view)."""
    view = mailbox.refresh()
    files: dict[str, list[str]] = {}
    for msg in view.messages.values():
        if msg.project_id != mailbox.project_id:
            continue
        for receiver in msg.receivers:
            files.setdefault(msg.sender_id, []).append(_line(msg, receiver))
            files.setdefault(receiver, []).append(_line(msg, None))
    return files


def export_tree(mailbox: Mailbox, root: Path) -> list[Path]:
    """Write ``root/.ai-pm/agents/{agent}/chat.jsonl`` for every agent with messages."""
    written: list[Path] = []
    for agent, lines in sorted(export_lines(mailbox).items()):
        path = root / AGENTS_DIR / _safe_component(agent) / "chat.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, path)  # a reader never sees half a file
        written.append(path)
    return written


@attrs.frozen
class Copy:
    """One line of one agent's file."""

    owner: str  # whose file
    id: str
    sender_id: str
    receiver_id: str | None
    content: str
    created_at: int
    related_task_id: str | None
    where: str  # path:line, for reports


@attrs.frozen
class Torn:
    """A message only one side has."""

    id: str
    sender_id: str
    receiver_id: str
    has: str  # "sender" or "receiver": the copy that exists
    where: str


@attrs.define
class ImportReport:
    imported: int = 0
    already: int = 0
    torn: list[Torn] = attrs.field(factory=list)
    conflicts: list[str] = attrs.field(factory=list)  # same id, different payloads
    refused: list[str] = attrs.field(factory=list)  # paths outside the tree
    # Membership changes the files need: {"create_project", "register", "assign"}.
    # Without ``assign`` they are only reported here and nothing is written.
    plan: dict[str, Any] = attrs.field(factory=dict)
    changed: dict[str, Any] = attrs.field(factory=dict)  # the ones made (with ``assign``)


def membership_plan(mailbox: Mailbox, agents: set[str], working_directory: str) -> dict[str, Any]:
    """What importing messages between ``agents`` would change: the project to create,
    the agents to register and to assign. Empty when every one is a member already."""
    mailbox.refresh()
    state = mailbox.log.session.lifecycle.mailbox
    plan: dict[str, Any] = {}
    if mailbox.project_id not in state.projects:
        plan["create_project"] = {"id": mailbox.project_id,
                                  "working_directory": working_directory}
    register = sorted(a for a in agents if a not in state.agents)
    assign = sorted(a for a in agents if not state.assigned(mailbox.project_id, a))
    if register:
        plan["register"] = register
    if assign:
        plan["assign"] = assign
    return plan


def apply_plan(mailbox: Mailbox, plan: dict[str, Any]) -> None:
    """Make the membership changes of :func:`membership_plan` (agents get no
    credential: an operator sets one before any can authenticate over MCP)."""
    if "create_project" in plan:
        mailbox.create_project(plan["create_project"]["working_directory"])
    for agent in plan.get("register", ()):
        mailbox.register_agent(agent)
    for agent in plan.get("assign", ()):
        mailbox.assign(agent)


class UnsafePath(ValueError):
    """A file of the tree resolves outside it (a symlink or ``..``)."""


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root)
    except (ValueError, OSError):
        return False
    return True


def _files(root: Path, report: ImportReport) -> Iterator[tuple[str, Path]]:
    base = root / AGENTS_DIR
    if not base.is_dir() or not _inside(root, base):
        if base.exists() or base.is_symlink():
            report.refused.append(str(base))
        return
    for entry in sorted(base.iterdir()):
        path = entry / "chat.jsonl"
        if not (path.exists() or path.is_symlink()):
            continue
        if entry.is_symlink() or path.is_symlink() or not _inside(root, path):
            report.refused.append(str(path))
            continue
        yield entry.name, path


def read_copies(root: Path, report: ImportReport) -> list[Copy]:
    root = root.resolve(strict=True)
    copies: list[Copy] = []
    for owner, path in _files(root, report):
        with path.open(encoding="utf-8") as fh:
            for n, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                d = json.loads(raw)
                copies.append(Copy(owner, str(d["id"]), str(d["senderId"]),
                                   d.get("receiverId"), str(d["content"]),
                                   parse_iso(str(d["createdAt"])), d.get("relatedTaskId"),
                                   f"{path}:{n}"))
    return copies


def import_tree(mailbox: Mailbox, root: Path, *, include_torn: bool = False,
                assign: bool = False) -> ImportReport:
    """Read a seed tree into the log: each message once, its two copies paired by id.

    Nothing is written when a path leaves the tree. A torn message is reported, and
    imported only with ``include_torn`` (either copy proves what was sent). Files
    naming agents that are not members of the project (or a project that does not
    exist) change membership only with ``assign``; without it the changes are
    returned in ``plan`` and nothing is written: a file written by another
    project's agent must not let that agent into this one.
    """
    report = ImportReport()
    copies = read_copies(root, report)
    if report.refused:
        return report
    sent: dict[tuple[str, str], Copy] = {}  # (id, receiver) -> the sender's copy
    got: dict[tuple[str, str], Copy] = {}  # (id, receiver) -> the receiver's copy
    for copy in copies:
        if copy.receiver_id is not None and copy.owner == copy.sender_id:
            sent[(copy.id, copy.receiver_id)] = copy
        else:
            got[(copy.id, copy.owner)] = copy
    keep: dict[str, list[Copy]] = {}
    for key in dict.fromkeys([*sent, *got]):
        s, r = sent.get(key), got.get(key)
        either = s or r
        assert either is not None
        c = either
        if s is None or r is None:
            report.torn.append(Torn(c.id, c.sender_id, key[1],
                                    "sender" if s is not None else "receiver", c.where))
            if not include_torn:
                continue
        elif (s.sender_id, s.content, s.related_task_id) != (r.sender_id, r.content,
                                                             r.related_task_id):
            report.conflicts.append(f"{s.id}: {s.where} and {r.where} differ")
            continue
        keep.setdefault(key[0], []).append(c)
    agents = {c.sender_id for cs in keep.values() for c in cs} | {
        c.receiver_id or c.owner for cs in keep.values() for c in cs}
    plan = membership_plan(mailbox, agents, str(root.resolve()))
    if plan and not assign:
        report.plan = plan
        return report
    apply_plan(mailbox, plan)
    report.changed = plan
    # Log order is creation order (files list a message where each agent saw it).
    for mid, cs in sorted(keep.items(), key=lambda item: item[1][0].created_at):
        first = cs[0]
        receivers = list(dict.fromkeys(c.receiver_id or c.owner for c in cs))
        try:
            new = mailbox.record_imported(mid, first.sender_id, receivers, first.content,
                                          created_at=first.created_at,
                                          related_task_id=first.related_task_id)
        except MailboxError as exc:
            report.conflicts.append(f"{mid}: {exc}")
            continue
        if new:
            report.imported += 1
        else:
            report.already += 1
    return report
