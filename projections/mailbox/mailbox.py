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
from typing import Any, Final

import msgspec

from engine import events as ev
from engine import mailbox_credentials as credentials
from engine.errors import ConcurrencyError, EventIdConflict, SessionExists
from engine.events import Event
from engine.ids import uuid7
from engine.lifecycle import Lifecycle
from engine.mailbox import MailboxError, MailboxLife, check_cursor, check_limit
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


MAX_WAIT_S: Final = 300  # the longest long poll: clients and proxies time out beyond


class AgentStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One agent of a project as ``list_agents`` shows it."""

    id: str
    name: str
    status: str  # "online" (an active token here) or "offline"
    last_seen: int  # ms since the epoch; 0: never
    unread: int
    pending: int


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

    def set_team_config(self, config: dict[str, Any]) -> bool:
        """Log the Agent Teams ``config.json`` this project mirrors, verbatim; nothing
        when it equals the one logged last. True when it was logged."""
        def decide() -> list[Event]:
            if self._state.team_configs.get(self.project_id) == config:
                return []
            return [ev.ProjectTeamConfigSet(project_id=self.project_id, config=config)]

        return bool(self.log.write(decide))

    def set_working_directory(self, working_directory: str) -> None:
        self.log.write(lambda: [ev.ProjectDirectorySet(
            project_id=self.project_id, working_directory=working_directory)])

    def register_agent(self, agent_id: str, *, name: str = "",
                       passkey: str | None = None) -> None:
        """A new agent; with ``passkey``, its credential (logged as a salted scrypt
        verifier, never in clear)."""
        verifier = None if passkey is None else credentials.make_verifier(passkey)
        self.log.write(lambda: [ev.AgentRegistered(agent_id=agent_id, name=name,
                                                   passkey_hash=verifier)])

    def set_credential(self, agent_id: str, passkey: str) -> None:
        """Set or replace an agent's credential (tokens issued before stay valid
        until they expire or are revoked)."""
        if not isinstance(passkey, str) or not passkey:
            raise MailboxError("invalid_request", "a credential must be a non-empty string")
        verifier = credentials.make_verifier(passkey)

        def decide() -> list[Event]:
            if agent_id not in self._state.agents:
                raise MailboxError("agent_not_found", f"no agent {agent_id!r}")
            return [ev.AgentCredentialSet(agent_id=agent_id, passkey_hash=verifier)]

        self.log.write(decide)

    def assign(self, agent_id: str) -> None:
        self.log.write(lambda: [ev.AgentAssigned(project_id=self.project_id,
                                                 agent_id=agent_id)])

    def unassign(self, agent_id: str) -> None:
        self.log.write(lambda: [ev.AgentUnassigned(project_id=self.project_id,
                                                   agent_id=agent_id)])

    # ------------------------------------------------------------------ tokens

    def authenticate(self, agent_id: str, passkey: str | None = None, *,
                     ttl_ms: int = DEFAULT_TTL_MS, require_credential: bool = False) -> str:
        """A new session token for (agent, this project); only its hash is logged.

        An agent with a credential needs it. An agent without one is refused with
        ``credential_required`` when ``require_credential`` (what the MCP server
        and HTTP doors pass: the default there); in process, holding the store is
        holding every key already. A refusal writes nothing, so failed attempts
        cannot grow the log."""
        token = secrets.token_urlsafe(32)
        checked: dict[str, bool] = {}  # verifier -> passkey matches (scrypt is slow)

        def decide() -> list[Event]:
            m = self._state
            if agent_id not in m.agents:
                raise MailboxError("invalid_credentials", f"cannot authenticate {agent_id!r}")
            verifier = m.credentials.get(agent_id)
            if verifier is None:
                if require_credential:
                    raise MailboxError("credential_required",
                                       f"agent {agent_id!r} has no credential: set one with "
                                       "`convlog mailbox credential`")
            else:
                if verifier not in checked:
                    checked[verifier] = isinstance(passkey, str) and credentials.matches(
                        verifier, passkey)
                if not checked[verifier]:
                    raise MailboxError("invalid_credentials",
                                       f"cannot authenticate {agent_id!r}")
            return [ev.TokenIssued(token_hash=token_hash(token), project_id=self.project_id,
                                   agent_id=agent_id, expires_at=self.log.clock() + ttl_ms)]

        self.log.write(decide)
        return token

    def issue_token(self, agent_id: str, *, ttl_ms: int = DEFAULT_TTL_MS) -> str:
        """An operator's token for an agent (``convlog mailbox token issue``): no
        credential is asked, since the caller holds the store."""
        token = secrets.token_urlsafe(32)

        def decide() -> list[Event]:
            if agent_id not in self._state.agents:
                raise MailboxError("agent_not_found", f"no agent {agent_id!r}")
            return [ev.TokenIssued(token_hash=token_hash(token), project_id=self.project_id,
                                   agent_id=agent_id, expires_at=self.log.clock() + ttl_ms)]

        self.log.write(decide)
        return token

    def revoke(self, token: str) -> None:
        """Revoke a token (its holder's next call is ``invalid_session_token``)."""
        digest = token_hash(token)

        def decide() -> list[Event]:
            state = self._state.tokens.get(digest, ("absent", None))[0]
            if state == "absent":
                raise MailboxError("invalid_session_token", "no such token")
            if state == "revoked":
                return []
            return [ev.TokenRevoked(token_hash=digest)]

        self.log.write(decide)

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
                        related_task_id: str | None = None, summary: str | None = None,
                        color: str | None = None) -> bool:
        """Log a message read from elsewhere (the seed's files, Agent Teams inboxes)
        with its own id and time. Its event id is derived from the two, so importing
        twice is a no-op. True when it was new."""
        eid = str(uuid.uuid5(_IDS, f"import\x00{self.project_id}\x00{message_id}"))
        mail = ev.MailSent(id=eid, time=created_at, actor=sender_id, message_id=message_id,
                           project_id=self.project_id, sender_id=sender_id,
                           receivers=list(receivers), content=content,
                           related_task_id=related_task_id,
                           broadcast=len(receivers) > 1, summary=summary, color=color)

        def decide() -> list[Event]:
            before = self._state.messages.get(message_id)
            if before is None:
                return [mail]
            if (before.project_id, before.sender_id, before.receivers, before.content) != (
                    self.project_id, sender_id, list(receivers), content):
                raise MailboxError("client_message_id_reused",
                                   f"message {message_id!r} is already logged, differently")
            return []

        return bool(self.log.write(decide))

    def record_read(self, message_id: str, agent_id: str) -> bool:
        """Log that ``agent_id`` read an imported message (a file's read flag); a
        no-op when it already has. True when it was new."""
        def decide() -> list[Event]:
            state = self._state.deliveries.get((message_id, agent_id), ("absent", None))[0]
            if state == "read":
                return []
            return [ev.MailRead(message_id=message_id, agent_id=agent_id, actor=agent_id)]

        return bool(self.log.write(decide))

    # ------------------------------------------------------------------ queries

    def messages(self, agent_id: str, *, after: int = 0, since: int | None = None,
                 limit: int | None = None) -> list[Message]:
        """The agent's sent and received messages in log order (the seed's listing):
        ``after`` a cursor, ``since`` a time in ms; at most ``limit`` (1 to
        ``MAX_PAGE``; None: all). A bad ``limit`` or ``after`` is ``invalid_request``."""
        check_cursor(after)
        if limit is not None:
            check_limit(limit)
        view = self.refresh()
        out = [m for m in view.conversation(self.project_id, agent_id)
               if m.cursor > after and (since is None or m.created_at > since)]
        return out if limit is None else out[:limit]

    def agents(self) -> list[AgentStatus]:
        """The project's agents (assigned now) with their status: ``online`` while
        one of its tokens for the project is active and unexpired, else
        ``offline``; ``last_seen`` is the latest time it authenticated, sent, fetched
        or read here (ms; 0: never)."""
        with self.log.lock:
            self.log.catch_up()
            m, view, now = self._state, self.log.view, self.log.clock()
            seen: dict[str, int] = {}
            online: set[str] = set()
            for digest, issued in m.issued.items():
                if issued.project_id != self.project_id:
                    continue
                seen[issued.agent_id] = max(seen.get(issued.agent_id, 0), issued.time)
                if m.tokens[digest][0] == "active" and issued.expires_at > now:
                    online.add(issued.agent_id)
            for (mid, agent), (_, e) in m.deliveries.items():
                if m.messages[mid].project_id == self.project_id:
                    seen[agent] = max(seen.get(agent, 0), e.time if e.actor == agent else 0)
            for msg in m.messages.values():
                if msg.project_id == self.project_id:
                    seen[msg.sender_id] = max(seen.get(msg.sender_id, 0), msg.time)
            return [AgentStatus(id=a, name=m.agents[a].name,
                                status="online" if a in online else "offline",
                                last_seen=seen.get(a, 0),
                                unread=len(view.unread(self.project_id, a)),
                                pending=len(view.pending(self.project_id, a)))
                    for a in m.members.get(self.project_id, {})]

    def sent_receipts(self, token: str, message_ids: Sequence[str] | None = None, *,
                      limit: int = 20) -> list[tuple[Message, dict[str, str]]]:
        """Read receipts of the token's agent's own sent messages: the ones named, or
        its latest ``limit``. Naming a message it did not send is ``message_not_found``."""
        check_limit(limit)
        agent = self.agent_of(token)
        view = self.log.view
        if message_ids is None:
            chosen = view.outbox(self.project_id, agent)[-limit:]
        else:
            chosen = []
            for mid in dict.fromkeys(message_ids):
                msg = view.messages.get(mid)
                if msg is None or msg.project_id != self.project_id or msg.sender_id != agent:
                    raise MailboxError("message_not_found",
                                       f"{agent!r} sent no message {mid!r} in this project")
                chosen.append(msg)
        return [(msg, view.receipts(msg.id)) for msg in chosen]

    def thread(self, token: str, message_id: str) -> list[Message]:
        """A message's thread in log order: the message its ``reply_to`` chain starts
        from and every message answering into that chain. Any message of the
        token's project; another project's is ``message_not_found``."""
        self.agent_of(token)
        view = self.log.view
        msg = view.messages.get(message_id)
        if msg is None or msg.project_id != self.project_id:
            raise MailboxError("message_not_found", f"no message {message_id!r} in this project")
        return view.thread(msg.id)

    async def wait(self, token: str, timeout: float, *, poll: float = 0.05) -> list[Message]:
        """A long poll: ``get_pending_messages`` as soon as anything is pending for the
        token's agent (from any writer), or ``[]`` after ``timeout`` seconds."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
                0 <= timeout <= MAX_WAIT_S):
            raise MailboxError("invalid_request",
                               f"timeout must be from 0 to {MAX_WAIT_S} seconds, not {timeout!r}")
        agent = await asyncio.to_thread(self.agent_of, token)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            view = await asyncio.to_thread(self.refresh)
            if view.pending(self.project_id, agent):
                return await asyncio.to_thread(self.pending, token)
            left = deadline - loop.time()
            if left <= 0:
                return []
            await asyncio.sleep(min(poll, left))

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
