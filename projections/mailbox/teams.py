"""Claude Code Agent Teams inboxes, into the mailbox log and back out.

A team directory (``~/.claude/teams/<team>/``) holds ``config.json`` (the team:
``name``, ``createdAt``, ``leadAgentId``, ``leadSessionId``, ``members`` with
``name``, ``color``, ``agentType``, ``model``, ``prompt``, ``cwd``, ``tmuxPaneId``,
``backendType``...) and ``inboxes/<agent>.json``: each a JSON array of the
messages *to* that agent, ``{from, text, summary?, timestamp, color?, msgV,
msg_id, type, read}``, written by Claude Code as ``JSON.stringify(x, null, 2)``
(no final newline). Claude Code 2.1.197 empties an inbox once its agent has taken
the messages in, so a finished team's inboxes are ``[]``: import a running
team's directory (again and again: each import adds only what is new) to keep
its messages. The recipient
is the file's name; ``read`` flips to true when the agent has seen it (the read
receipt); ``color`` is the sender's; protocol messages (idle notices, shutdown
requests, task assignments) are JSON inside ``text`` and are kept verbatim.

Import logs the config verbatim (``project.team_config_set``, again only when it
changed) and each message once, with its sender, recipients, time, summary and
colour, and a ``mail.read`` for every ``read: true``. A broadcast (one send
written to several inboxes: the same sender, time, text, summary and colour)
becomes one message with several receivers. Message ids derive from the
message's content and its place among equal ones, so importing again writes
only what is new (more messages, or a read flag that turned true). Export
writes the same layout back from the log, so a team's history can be audited,
replayed and diffed.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from engine.mailbox import MailboxError
from projections.mailbox.aipm import apply_plan, membership_plan, parse_iso
from projections.mailbox.mailbox import Mailbox

_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "convlog:mailbox:agent-teams")


class TeamFormatError(MailboxError):
    """A team file that is not the Agent Teams shape (nothing was written)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_request", message)


def is_team_dir(path: Path) -> bool:
    """A Claude Code Agent Teams team directory: ``config.json`` beside ``inboxes/``."""
    return (path / "config.json").is_file() and (path / "inboxes").is_dir()


def team_timestamp(ms: int) -> str:
    """Agent Teams' ``timestamp``: JavaScript's ``toISOString()`` (always milliseconds)."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _time(value: object, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return parse_iso(value)
        except ValueError:
            pass
    raise TeamFormatError(f"{where}: timestamp must be ISO 8601 or ms, not {value!r}")


EntryKey = tuple[str, int, str, str | None, str | None]  # sender, time, text, summary, color


@attrs.frozen
class Entry:
    """One element of one inbox file."""

    receiver: str
    sender: str
    text: str
    time: int
    summary: str | None
    color: str | None
    read: bool
    msg_id: str | None = None

    def key(self) -> EntryKey:
        return (self.sender, self.time, self.text, self.summary, self.color)


def _optional_str(d: dict[str, Any], name: str, where: str) -> str | None:
    value = d.get(name)
    if value is not None and not isinstance(value, str):
        raise TeamFormatError(f"{where}: {name} must be a string")
    return value


def read_inboxes(root: Path) -> list[Entry]:
    """Every entry of every ``inboxes/*.json``, in file order (files by name)."""
    entries: list[Entry] = []
    for path in sorted((root / "inboxes").glob("*.json")):
        if path.is_symlink() or not path.resolve().is_relative_to(root.resolve()):
            raise TeamFormatError(f"{path}: leaves the team directory")
        try:
            items = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise TeamFormatError(f"{path}: not JSON ({exc})") from None
        if not isinstance(items, list):
            raise TeamFormatError(f"{path}: an inbox is a JSON array")
        for n, d in enumerate(items):
            where = f"{path}[{n}]"
            if not isinstance(d, dict) or not isinstance(d.get("from"), str) or not isinstance(
                    d.get("text"), str):
                raise TeamFormatError(f"{where}: needs string from and text")
            entries.append(Entry(receiver=path.stem, sender=d["from"], text=d["text"],
                                 time=_time(d.get("timestamp"), where),
                                 summary=_optional_str(d, "summary", where),
                                 color=_optional_str(d, "color", where),
                                 read=d.get("read") is True,
                                 msg_id=_optional_str(d, "msg_id", where) or None))
    return entries


def read_config(root: Path) -> dict[str, Any]:
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TeamFormatError(f"{root / 'config.json'}: not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise TeamFormatError(f"{root / 'config.json'}: a team config is a JSON object")
    return config


@attrs.frozen
class TeamMessage:
    id: str
    sender: str
    receivers: list[str]
    read_by: list[str]
    text: str
    time: int
    summary: str | None
    color: str | None


def messages_of(entries: list[Entry]) -> list[TeamMessage]:
    """Entries grouped into messages: equal entries in different inboxes are one
    broadcast; the n-th equal entry of an inbox pairs with the n-th of the others."""
    groups: dict[str | tuple[EntryKey, int], list[Entry]] = {}
    seen: dict[tuple[EntryKey, str], int] = {}
    for e in entries:
        if e.msg_id is not None:
            groups.setdefault(e.msg_id, []).append(e)
            continue
        nth = seen.get((e.key(), e.receiver), 0)
        seen[(e.key(), e.receiver)] = nth + 1
        groups.setdefault((e.key(), nth), []).append(e)
    out = []
    for group, members in groups.items():
        first = members[0]
        if isinstance(group, str):
            mid = group
        else:
            digest = hashlib.sha256(json.dumps([*group[0], group[1]],
                                               ensure_ascii=False).encode()).hexdigest()
            mid = str(uuid.uuid5(_IDS, digest))
        if len({m.key() for m in members}) > 1 or len({m.receiver for m in members}) < len(
                members):
            raise TeamFormatError(f"msg_id {mid}: entries under one id differ")
        out.append(TeamMessage(id=mid, sender=first.sender,
                               receivers=[m.receiver for m in members],
                               read_by=[m.receiver for m in members if m.read],
                               text=first.text, time=first.time, summary=first.summary,
                               color=first.color))
    out.sort(key=lambda m: m.time)  # log order is sending order
    return out


@attrs.define
class TeamImportReport:
    imported: int = 0
    already: int = 0
    read: int = 0  # read flags logged
    config: bool = False  # the team's config.json was logged (new or changed)
    conflicts: list[str] = attrs.field(factory=list)
    plan: dict[str, Any] = attrs.field(factory=dict)
    changed: dict[str, Any] = attrs.field(factory=dict)


def import_team(mailbox: Mailbox, root: Path, *, assign: bool = False) -> TeamImportReport:
    """Read a team directory into ``mailbox``'s project. Membership (the project,
    its agents) changes only with ``assign``; without it the changes needed are
    returned in ``plan`` and nothing is written."""
    report = TeamImportReport()
    config = read_config(root)
    messages = messages_of(read_inboxes(root))
    members = config.get("members")
    names = {m["name"] for m in members if isinstance(m, dict) and isinstance(m.get("name"), str)
             } if isinstance(members, list) else set()
    agents = names | {m.sender for m in messages} | {r for m in messages for r in m.receivers}
    cwd = next((m.get("cwd") for m in members or () if isinstance(m, dict)
                and isinstance(m.get("cwd"), str) and m.get("cwd")), None) if isinstance(
        members, list) else None
    plan = membership_plan(mailbox, agents, cwd or str(root.resolve()))
    if plan and not assign:
        report.plan = plan
        return report
    if "create_project" in plan and isinstance(config.get("name"), str):
        mailbox.create_project(plan.pop("create_project")["working_directory"],
                               config["name"])
        report.changed["create_project"] = mailbox.project_id
    apply_plan(mailbox, plan)
    report.changed.update(plan)
    report.config = mailbox.set_team_config(config)
    for msg in messages:
        try:
            new = mailbox.record_imported(msg.id, msg.sender, msg.receivers, msg.text,
                                          created_at=msg.time, summary=msg.summary,
                                          color=msg.color)
        except MailboxError as exc:
            report.conflicts.append(f"{msg.sender} at {team_timestamp(msg.time)}: {exc.code}: "
                                    f"{exc.detail}")
            continue
        report.imported += new
        report.already += not new
        for agent in msg.read_by:
            report.read += mailbox.record_read(msg.id, agent)
    return report


def export_team(mailbox: Mailbox, root: Path) -> list[Path]:
    """Write ``root/config.json`` and ``root/inboxes/<agent>.json`` from the log: every
    member of the project gets an inbox (``[]`` when nothing came), entries in log
    order. Each file is replaced whole."""
    view = mailbox.refresh()
    state = mailbox.log.session.lifecycle.mailbox
    project = mailbox.project_id
    members = list(state.members.get(project, {}))
    colors: dict[str, str] = {}
    inboxes: dict[str, list[dict[str, Any]]] = {a: [] for a in members}
    for msg in view.messages.values():
        if msg.project_id != project:
            continue
        if msg.color is not None:
            colors[msg.sender_id] = msg.color
        for receiver in msg.receivers:
            entry: dict[str, Any] = {"from": msg.sender_id, "text": msg.content}
            if msg.summary is not None:
                entry["summary"] = msg.summary
            entry["timestamp"] = team_timestamp(msg.created_at)
            if msg.color is not None:
                entry["color"] = msg.color
            # Claude Code 2.1's envelope: a version, the entry's id, its kind.
            entry.update(msgV=1, msg_id=msg.id, type="message")
            entry["read"] = view.states[(msg.id, receiver)] == "read"
            inboxes.setdefault(receiver, []).append(entry)
    created = state.projects.get(project)
    logged = state.team_configs.get(project)
    name = getattr(created, "name", "") or project
    if isinstance(logged, dict) and isinstance(logged.get("name"), str):
        name = logged["name"]
    config = _config(logged, name, created.time if created is not None else 0,
                     [*members, *inboxes], colors)
    written = [_write(root / "config.json", config)]
    for agent, entries in sorted(inboxes.items()):
        if agent in ("", ".", "..") or "/" in agent or "\\" in agent:
            raise TeamFormatError(f"agent id {agent!r} cannot name a file")
        written.append(_write(root / "inboxes" / f"{agent}.json", entries))
    return written


def _config(logged: dict[str, Any] | None, name: str, created: int, agents: list[str],
            colors: dict[str, str]) -> dict[str, Any]:
    """The config an export writes: the one imported last, verbatim, with a member
    added for each agent of the project it does not list; without one, a config
    built from the project (its name, creation time, members and their colours)."""
    config = dict(logged) if logged is not None else {"name": name, "createdAt": created}
    listed = config.get("members")
    members = list(listed) if isinstance(listed, list) else []
    named = {m.get("name") for m in members if isinstance(m, dict)}
    members += [{"agentId": f"{a}@{name}", "name": a,
                 **({"color": colors[a]} if a in colors else {})}
                for a in dict.fromkeys(agents) if a not in named]
    config["members"] = members
    return config


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    # Claude Code writes JSON.stringify(x, null, 2): two-space indent, no final
    # newline; json.dumps with indent=2 and these separators gives the same bytes.
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)  # a reader (a running team) never sees half a file
    return path
