"""``Mailbox(store, project_id)``: the agents' commands and queries on one project.

Commands become checked events on the store's mailbox log (the deciders of
:mod:`engine.mailbox` judge them); queries read :class:`MailboxView`. Several
``Mailbox`` objects, threads or processes may write the same log: an append
names the version it expects, and a writer that lost the race catches up and
decides again, so nothing is lost and nothing is written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final

from engine import events as ev
from engine.errors import ConcurrencyError, EventIdConflict, SessionExists
from engine.events import Event
from engine.ids import uuid7
from engine.lifecycle import Lifecycle
from engine.mailbox import MailboxError, MailboxLife
from engine.session import Clock, Session, system_clock
from engine.store.base import Store
from projections.mailbox.view import MailboxView, Message

# The one mailbox log of a store (session ids are UUIDs; this one is fixed).
MAILBOX_SESSION: Final = str(uuid.uuid5(uuid.NAMESPACE_URL, "convlog:mailbox"))
_IDS: Final = uuid.uuid5(uuid.NAMESPACE_URL, "convlog:mailbox:client-message-id")
DEFAULT_TTL_MS: Final = 24 * 3600 * 1000


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def client_message_uuid(project_id: str, sender_id: str, client_message_id: str) -> str:
    """The message id a client message id stands for: a retry finds the same id."""
    return str(uuid.uuid5(_IDS, f"{project_id}\x00{sender_id}\x00{client_message_id}"))


class MailboxLog:
    """The write side's state of the mailbox log and a view of it, kept in step."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or system_clock
        self.lock = threading.Lock()  # a Session has one writer: threads take turns
        with contextlib.suppress(SessionExists):  # another writer created it first
            store.create_session(MAILBOX_SESSION, created=self.clock())
        lc = Lifecycle(MAILBOX_SESSION)
        self.view = MailboxView()
        self.session = Session(store, store.session_info(MAILBOX_SESSION), lc, self.clock)
        self.session.subscribe(self.view.apply)
        self.catch_up()

    def catch_up(self) -> None:
        """Fold what other writers appended since this object last looked."""
        lc = self.session.lifecycle
        for e in self.store.read(MAILBOX_SESSION, lc.version + 1):
            lc.replay(e)
            self.view.apply(e)

    def write(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        """Append what ``decide`` returns against the latest state; on a lost race,
        catch up and decide again. ``decide`` may raise to refuse (nothing written)."""
        with self.lock:
            while True:
                self.catch_up()
                events = list(decide())
                if not events:
                    return []
                version = self.session.lifecycle.version
                try:
                    self.session.append(events)
                except ConcurrencyError:
                    continue
                except EventIdConflict:
                    # A retry racing its original (same client message id) lost: the
                    # original committed after we decided, under the same derived id
                    # with another timestamp. Deciding again finds it; a conflict
                    # with nothing new in the log is a real one.
                    self.catch_up()
                    if self.session.lifecycle.version == version:
                        raise
                    continue
                return events


class Mailbox:
    """One project's mailbox: set-up commands, the seed's tools, queries, a live feed."""

    def __init__(self, store: Store | MailboxLog, project_id: str, *,
                 clock: Clock | None = None) -> None:
        self.log = store if isinstance(store, MailboxLog) else MailboxLog(store, clock)
        self.project_id = project_id

    @property
    def view(self) -> MailboxView:
        return self.log.view

    @property
    def _state(self) -> MailboxLife:
        return self.log.session.lifecycle.mailbox

    def refresh(self) -> MailboxView:
        with self.log.lock:
            self.log.catch_up()
        return self.log.view

    # ------------------------------------------------------------------ set-up

    def create_project(self, working_directory: str = "", name: str = "") -> None:
        self.log.write(lambda: [ev.ProjectCreated(
            project_id=self.project_id, name=name, working_directory=working_directory)])

    def set_working_directory(self, working_directory: str) -> None:
        self.log.write(lambda: [ev.ProjectDirectorySet(
            project_id=self.project_id, working_directory=working_directory)])

    def register_agent(self, agent_id: str, *, name: str = "",
                       passkey: str | None = None) -> None:
        digest = None if passkey is None else token_hash(passkey)
        self.log.write(lambda: [ev.AgentRegistered(agent_id=agent_id, name=name,
                                                   passkey_hash=digest)])

    def assign(self, agent_id: str) -> None:
        self.log.write(lambda: [ev.AgentAssigned(project_id=self.project_id,
                                                 agent_id=agent_id)])

    def unassign(self, agent_id: str) -> None:
        self.log.write(lambda: [ev.AgentUnassigned(project_id=self.project_id,
                                                   agent_id=agent_id)])

    # ------------------------------------------------------------------ tokens

    def authenticate(self, agent_id: str, passkey: str | None = None, *,
                     ttl_ms: int = DEFAULT_TTL_MS) -> str:
        """A new session token for (agent, this project); only its hash is logged."""
        token = secrets.token_urlsafe(32)

        def decide() -> list[Event]:
            agent = self._state.agents.get(agent_id)
            if agent is None or (agent.passkey_hash is not None and (
                    passkey is None or not secrets.compare_digest(
                        agent.passkey_hash, token_hash(passkey)))):
                raise MailboxError("invalid_credentials", f"cannot authenticate {agent_id!r}")
            return [ev.TokenIssued(token_hash=token_hash(token), project_id=self.project_id,
                                   agent_id=agent_id, expires_at=self.log.clock() + ttl_ms)]

        self.log.write(decide)
        return token

    def revoke(self, token: str) -> None:
        self.log.write(lambda: [ev.TokenRevoked(token_hash=token_hash(token))])

    def agent_of(self, token: str) -> str:
        """The agent a token stands for, or ``invalid_session_token`` (401)."""
        with self.log.lock:
            self.log.catch_up()
            return self._agent_of(token)

    def _agent_of(self, token: str) -> str:
        m = self._state
        digest = token_hash(token)
        state = m.tokens.get(digest, ("absent", None))[0]
        issued = m.issued.get(digest)
        if (state != "active" or issued is None or issued.project_id != self.project_id
                or issued.expires_at <= self.log.clock()
                or not m.assigned(self.project_id, issued.agent_id)):
            raise MailboxError("invalid_session_token",
                               "the session token is unknown, expired or revoked")
        return issued.agent_id

    # ------------------------------------------------------------------ the seed's tools

    def send(self, token: str, target_agent_id: str, content: str, *,
             related_task_id: str | None = None,
             client_message_id: str | None = None) -> Message:
        """``send_message``: one event; the checks run in the seed's order."""
        return self._send(token, [target_agent_id], content, related_task_id=related_task_id,
                          client_message_id=client_message_id)

    def broadcast(self, token: str, content: str, receivers: Sequence[str] | None = None, *,
                  related_task_id: str | None = None,
                  client_message_id: str | None = None) -> Message:
        """One message to several agents (default: every agent of the project but the
        sender), one event, one delivery state per receiver."""
        return self._send(token, receivers, content, related_task_id=related_task_id,
                          client_message_id=client_message_id, broadcast=True)

    def reply(self, token: str, message_id: str, content: str, *,
              client_message_id: str | None = None) -> Message:
        """``respond_chat``: answer a message; the answer marks it read, atomically."""
        return self._send(token, None, content, reply_to=message_id,
                          client_message_id=client_message_id)

    def _send(self, token: str, receivers: Sequence[str] | None, content: str, *,
              related_task_id: str | None = None, client_message_id: str | None = None,
              reply_to: str | None = None, broadcast: bool = False) -> Message:
        sent: list[str] = []

        def decide() -> list[Event]:
            sender = self._agent_of(token)
            m = self._state
            if reply_to is not None:
                answered = m.messages.get(reply_to)
                if (answered is None or answered.project_id != self.project_id
                        or sender not in answered.receivers):
                    raise MailboxError("message_not_found",
                                       f"{reply_to!r} is not a message to {sender!r}")
                targets = [answered.sender_id]
            elif receivers is None:
                targets = [a for a in m.members.get(self.project_id, {}) if a != sender]
            else:
                targets = list(receivers)
            if client_message_id is not None:
                mid = client_message_uuid(self.project_id, sender, client_message_id)
            else:
                mid = uuid7(self.log.clock())
            mail = ev.MailSent(
                id=mid, message_id=mid, project_id=self.project_id, sender_id=sender,
                actor=sender, receivers=targets, content=content,
                related_task_id=related_task_id, reply_to=reply_to,
                client_message_id=client_message_id, broadcast=broadcast)
            sent[:] = [mid]
            before = m.messages.get(mid)
            if before is not None:  # a retry: the same message, or a reused client id
                if (before.sender_id, before.receivers, before.content, before.related_task_id,
                        before.reply_to) != (sender, targets, content, related_task_id,
                                             reply_to):
                    raise MailboxError("client_message_id_reused",
                                       f"client message id {client_message_id!r} was used "
                                       "for another message")
                return []
            out: list[Event] = [mail]
            if reply_to is not None and m.deliveries[(reply_to, sender)][0] != "read":
                out.append(ev.MailRead(message_id=reply_to, agent_id=sender, actor=sender))
            return out

        self.log.write(decide)
        return self.log.view.messages[sent[0]]

    def pending(self, token: str) -> list[Message]:
        """``get_pending_messages``: what arrived since the last call; now delivered."""
        got: list[Message] = []

        def decide() -> list[Event]:
            agent = self._agent_of(token)
            got[:] = self.log.view.pending(self.project_id, agent)
            return [ev.MailDelivered(message_id=msg.id, agent_id=agent, actor=agent)
                    for msg in got]

        self.log.write(decide)
        return got

    def mark_read(self, token: str, message_ids: Sequence[str]) -> int:
        """Read receipts for received messages; returns how many were unread."""
        count = [0]

        def decide() -> list[Event]:
            agent = self._agent_of(token)
            m = self._state
            out: list[Event] = []
            for mid in dict.fromkeys(message_ids):
                state = m.deliveries.get((mid, agent), ("absent", None))[0]
                sent = m.messages.get(mid)
                if state == "absent" or sent is None or sent.project_id != self.project_id:
                    raise MailboxError("message_not_found", f"no message {mid!r} to {agent!r}")
                if state != "read":
                    out.append(ev.MailRead(message_id=mid, agent_id=agent, actor=agent))
            count[0] = len(out)
            return out

        self.log.write(decide)
        return count[0]

    def record_imported(self, message_id: str, sender_id: str, receivers: Sequence[str],
                        content: str, *, created_at: int,
                        related_task_id: str | None = None) -> bool:
        """Log a message read from elsewhere (the seed's files) with its own id and
        time. Its event id is derived from the two, so importing twice is a no-op.
        True when it was new."""
        eid = str(uuid.uuid5(_IDS, f"import\x00{self.project_id}\x00{message_id}"))
        mail = ev.MailSent(id=eid, time=created_at, actor=sender_id, message_id=message_id,
                           project_id=self.project_id, sender_id=sender_id,
                           receivers=list(receivers), content=content,
                           related_task_id=related_task_id,
                           broadcast=len(receivers) > 1)

        def decide() -> list[Event]:
            before = self._state.messages.get(message_id)
            if before is None:
                return [mail]
            if (before.sender_id, before.receivers, before.content) != (
                    sender_id, list(receivers), content):
                raise MailboxError("client_message_id_reused",
                                   f"message {message_id!r} is already logged, differently")
            return []

        return bool(self.log.write(decide))

    # ------------------------------------------------------------------ queries

    def messages(self, agent_id: str, *, after: int = 0, since: int | None = None,
                 limit: int | None = None) -> list[Message]:
        """The agent's sent and received messages in log order (the seed's listing):
        ``after`` a cursor, ``since`` a time in ms; at most ``limit``."""
        view = self.refresh()
        out = [m for m in view.conversation(self.project_id, agent_id)
               if m.cursor > after and (since is None or m.created_at > since)]
        return out if limit is None else out[:limit]

    def unread(self, agent_id: str) -> list[Message]:
        return self.refresh().unread(self.project_id, agent_id)

    def receipts(self, message_id: str) -> dict[str, str]:
        return self.refresh().receipts(message_id)

    async def subscribe(self, agent_id: str, *, after: int = 0,
                        poll: float = 0.05) -> AsyncIterator[Message]:
        """New messages to ``agent_id`` as they are committed (by any writer)."""
        cursor = after
        while True:
            view = await asyncio.to_thread(self.refresh)
            fresh = [m for m in view.inbox(self.project_id, agent_id) if m.cursor > cursor]
            for msg in fresh:
                cursor = msg.cursor
                yield msg
            if not fresh:
                await asyncio.sleep(poll)
