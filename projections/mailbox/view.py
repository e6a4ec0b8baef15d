"""The mailbox read side: one pure fold of the mailbox log.

Outboxes, inboxes, pending and unread sets and read receipts are all views of
the same ``mail.*`` events; nothing here reads a clock, a disk or randomness.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from engine import events as ev
from engine.events import Event

HANDLED: Final[frozenset[type[Event]]] = frozenset(
    {ev.MailSent, ev.MailDelivered, ev.MailRead}
)


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A sent message as readers see it; ``cursor`` is its position in the log."""

    id: str
    project_id: str
    sender_id: str
    receivers: tuple[str, ...]
    content: str
    created_at: int  # ms since the epoch
    cursor: int
    related_task_id: str | None = None
    reply_to: str | None = None
    broadcast: bool = False
    summary: str | None = None
    color: str | None = None


def message_of(e: ev.MailSent) -> Message:
    return Message(id=e.message_id, project_id=e.project_id, sender_id=e.sender_id,
                   receivers=tuple(e.receivers), content=e.content, created_at=e.time,
                   cursor=e.seq, related_task_id=e.related_task_id, reply_to=e.reply_to,
                   broadcast=e.broadcast, summary=e.summary, color=e.color)


class MailboxView:
    """Every project's messages, their delivery states and each agent's history."""

    def __init__(self) -> None:
        self.messages: dict[str, Message] = {}
        self.states: dict[tuple[str, str], str] = {}  # (message, receiver) -> state
        # (project, agent) -> ids of the messages it sent or received, in log order
        self.history: dict[tuple[str, str], list[str]] = {}
        # (project, agent) -> ids of received messages not yet read, in log order
        self.unread_ids: dict[tuple[str, str], dict[str, None]] = {}

    @classmethod
    def of(cls, events: Iterable[Event]) -> MailboxView:
        view = cls()
        for e in events:
            view.apply(e)
        return view

    def apply(self, e: Event) -> None:
        if type(e) not in HANDLED:
            return
        if isinstance(e, ev.MailSent):
            msg = message_of(e)
            self.messages[msg.id] = msg
            self.history.setdefault((e.project_id, e.sender_id), []).append(msg.id)
            for r in e.receivers:
                self.states[(msg.id, r)] = "sent"
                self.history.setdefault((e.project_id, r), []).append(msg.id)
                self.unread_ids.setdefault((e.project_id, r), {})[msg.id] = None
        elif isinstance(e, ev.MailDelivered | ev.MailRead):
            target = "read" if isinstance(e, ev.MailRead) else "delivered"
            self.states[(e.message_id, e.agent_id)] = target
            if target == "read":
                project = self.messages[e.message_id].project_id
                self.unread_ids.get((project, e.agent_id), {}).pop(e.message_id, None)

    # ------------------------------------------------------------------ queries

    def inbox(self, project_id: str, agent_id: str) -> list[Message]:
        return [m for m in self.conversation(project_id, agent_id) if agent_id in m.receivers]

    def outbox(self, project_id: str, agent_id: str) -> list[Message]:
        return [m for m in self.conversation(project_id, agent_id) if m.sender_id == agent_id]

    def conversation(self, project_id: str, agent_id: str) -> list[Message]:
        """What the agent sent and received, in log order (its ``chat.jsonl``)."""
        return [self.messages[i] for i in self.history.get((project_id, agent_id), ())]

    def unread(self, project_id: str, agent_id: str) -> list[Message]:
        return [self.messages[i] for i in self.unread_ids.get((project_id, agent_id), ())]

    def pending(self, project_id: str, agent_id: str) -> list[Message]:
        """Received, never fetched nor read."""
        return [m for m in self.unread(project_id, agent_id)
                if self.states[(m.id, agent_id)] == "sent"]

    def root(self, message_id: str) -> str:
        """The message a ``reply_to`` chain starts from (stops on a loop or a gap)."""
        msg, seen = self.messages[message_id], {message_id}
        while msg.reply_to is not None and msg.reply_to in self.messages:
            if msg.reply_to in seen:
                break
            seen.add(msg.reply_to)
            msg = self.messages[msg.reply_to]
        return msg.id

    def thread(self, message_id: str) -> list[Message]:
        """Every message whose chain starts where ``message_id``'s does, in log order."""
        root = self.root(message_id)
        project = self.messages[message_id].project_id
        return [m for m in self.messages.values()
                if m.project_id == project and self.root(m.id) == root]

    def receipts(self, message_id: str) -> dict[str, str]:
        """Each receiver's delivery state: sent, delivered or read."""
        msg = self.messages[message_id]
        return {r: self.states[(message_id, r)] for r in msg.receivers}
