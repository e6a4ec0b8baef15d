"""The mailbox as the page shows it: projects, their agents, threads and delivery states.

A read model over the store's mailbox log (``projections.mailbox``), folded
incrementally as the log grows. It only reads: a store without a mailbox has
none shown, and looking never creates one (``MailboxLog`` would).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from engine import events as ev
from engine.errors import UnknownSession
from engine.store.base import Store
from projections.mailbox.mailbox import MAILBOX_SESSION
from projections.mailbox.view import MailboxView, Message

PAGE = 200  # messages per answer; older ones page with ``before``


class MailboxPage:
    """The folded mailbox log of one store, caught up on every question."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.version = 0
        self.view = MailboxView()
        self.projects: dict[str, dict[str, str]] = {}  # id -> name, working directory
        self.agents: dict[str, str] = {}  # id -> name
        self.members: dict[str, dict[str, bool]] = {}  # project -> agent -> assigned now
        self.tokens: dict[str, ev.TokenIssued] = {}  # token hash -> issued (not revoked)
        self._lock = threading.Lock()

    def present(self) -> bool:
        try:
            self.store.session_info(MAILBOX_SESSION)
        except UnknownSession:
            return False
        return True

    def _catch_up(self) -> None:
        if not self.present():
            return
        version = self.store.version(MAILBOX_SESSION)
        if version > self.version:
            for e in self.store.read(MAILBOX_SESSION, self.version + 1, version):
                self._apply(e)
            self.version = version

    def _apply(self, e: ev.Event) -> None:
        self.view.apply(e)
        if isinstance(e, ev.ProjectCreated):
            self.projects[e.project_id] = {"name": e.name,
                                           "working_directory": e.working_directory}
        elif isinstance(e, ev.ProjectDirectorySet) and e.project_id in self.projects:
            self.projects[e.project_id]["working_directory"] = e.working_directory
        elif isinstance(e, ev.AgentRegistered):
            self.agents[e.agent_id] = e.name
        elif isinstance(e, ev.TokenIssued):
            self.tokens[e.token_hash] = e
        elif isinstance(e, ev.TokenRevoked):
            self.tokens.pop(e.token_hash, None)
        elif isinstance(e, ev.AgentAssigned | ev.AgentUnassigned):
            assigned = isinstance(e, ev.AgentAssigned)
            self.members.setdefault(e.project_id, {})[e.agent_id] = assigned

    def opens(self, token: str, project_id: str) -> bool:
        """Whether ``token`` is an active session token of ``project_id`` whose agent
        is still a member (the same test the mailbox's own doors make)."""
        if not token:
            return False
        with self._lock:
            self._catch_up()
            issued = self.tokens.get(hashlib.sha256(token.encode()).hexdigest())
            return (issued is not None and issued.project_id == project_id
                    and issued.expires_at > time.time() * 1000
                    and self.members.get(project_id, {}).get(issued.agent_id, False))

    def summary(self) -> dict[str, Any]:
        """Whether the store has a mailbox, and its projects with their counts."""
        with self._lock:
            self._catch_up()
            counts: dict[str, int] = {}
            for m in self.view.messages.values():
                counts[m.project_id] = counts.get(m.project_id, 0) + 1
            return {"present": self.present(), "session": MAILBOX_SESSION,
                    "version": self.version,
                    "projects": [{"id": pid, **info, "messages": counts.get(pid, 0),
                                  "agents": sum(self.members.get(pid, {}).values())}
                                 for pid, info in self.projects.items()]}

    def project(self, project_id: str, *, agent: str | None = None,
                before: int | None = None, limit: int = PAGE) -> dict[str, Any]:
        """One project: its agents (with unread counts) and its latest messages, each
        with its thread (the message its ``reply_to`` chain starts from) and every
        receiver's state (sent, delivered, read). ``agent`` keeps the messages it sent
        or received; ``before`` a cursor pages back."""
        with self._lock:
            self._catch_up()
            if project_id not in self.projects:
                raise KeyError(project_id)
            view = self.view
            agents = [{"id": a, "name": self.agents.get(a, ""), "assigned": assigned,
                       "unread": len(view.unread(project_id, a))}
                      for a, assigned in self.members.get(project_id, {}).items()]
            if agent is not None:
                chosen = view.conversation(project_id, agent)
            else:
                chosen = [m for m in view.messages.values() if m.project_id == project_id]
            if before is not None:
                chosen = [m for m in chosen if m.cursor < before]
            limit = max(1, min(limit, 1000))
            shown = chosen[-limit:]
            return {"project": {"id": project_id, **self.projects[project_id]},
                    "version": self.version, "agents": agents, "agent": agent,
                    "total": len(chosen), "messages": [self._message(m) for m in shown]}

    def _message(self, m: Message) -> dict[str, Any]:
        root, seen = m, {m.id}
        while root.reply_to is not None and root.reply_to in self.view.messages:
            root = self.view.messages[root.reply_to]
            if root.id in seen:  # never loops on a log that says otherwise
                break
            seen.add(root.id)
        return {"id": m.id, "sender": m.sender_id, "receivers": list(m.receivers),
                "content": m.content, "created_at": m.created_at, "cursor": m.cursor,
                "reply_to": m.reply_to, "related_task_id": m.related_task_id,
                "broadcast": m.broadcast, "thread": root.id,
                "receipts": self.view.receipts(m.id)}
