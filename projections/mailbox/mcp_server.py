"""``convlog mcp --store URL``: the agents' mailbox tools as an MCP server over stdio.

Uses the official MCP Python SDK (the optional extra ``convlog[mcp]``). Every tool
is a command or query of :class:`Mailbox`. Every refusal, whether the mailbox's
own or the SDK's argument validation, becomes an MCP tool error whose text ends
with one JSON object ``{"error", "status", "message"}`` carrying the seed's code
and HTTP status, so a client can branch on ``error`` without parsing prose. The
text never repeats an argument's value (a session token or passkey sent in the
wrong place must not come back in an error).

Every parameter carries a description (the seed gives one for each of
``send_message``'s): an LLM choosing arguments sees what each one is, not only
its name.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import quote, unquote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated
from pydantic import Field, ValidationError

from engine import events as ev
from engine.mailbox import MAX_CONTENT, MAX_PAGE, MailboxError
from engine.store.base import Store
from projections.mailbox.aipm import iso
from projections.mailbox.mailbox import (
    MAILBOX_SESSION,
    MAX_WAIT_S,
    Mailbox,
    MailboxLog,
    token_hash,
)
from projections.mailbox.wire import wire

log = logging.getLogger(__name__)

Token = Annotated[str, Field(description=(
    "The session token returned by the authenticate tool; it names your agent and "
    "its project."))]
Content = Annotated[str, Field(description=(
    f"The message text: at most {MAX_CONTENT:,} characters (counted as user-perceived "
    "characters, so an emoji is one)."))]
RelatedTask = Annotated[str | None, Field(description=(
    "The id of the task this message is about (optional)."))]
ClientId = Annotated[str | None, Field(description=(
    "Your own id for this message (optional). Sending again with the same id (a retry "
    "after a lost answer) returns the original message instead of sending twice."))]
MessageId = Annotated[str, Field(description="A message id (as returned by send_message "
                                             "or listed by the other tools).")]


def error_json(code: str, status: int, message: str) -> str:
    return json.dumps({"error": code, "status": status, "message": message},
                      ensure_ascii=False)


def error_text(err: MailboxError) -> str:
    return error_json(err.code, err.status, err.detail)


def _argument_errors(exc: ValidationError) -> str:
    """What is wrong with the arguments, by field name only: pydantic's own text
    quotes the values given (a token, a passkey), which must never be echoed."""
    parts = []
    for item in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "invalid arguments: " + "; ".join(parts)


class MailboxServer(MCPServer[Any]):
    """The SDK's server, with every refusal spelled as the mailbox's JSON error."""

    @property
    def subscriptions_bus(self) -> SubscriptionBus:
        return self._subscriptions

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        prefix = f"Error executing tool {name}: "
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:  # a crash: its text stays in the server's log
            log.error("tool %r crashed", name, exc_info=exc.__cause__ or exc)
            raise ToolError(prefix + error_json(
                "internal_error", 500, "the server could not complete the call")) from exc
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(prefix + error_json(
                    "invalid_request", 400, _argument_errors(cause))) from None
            if isinstance(cause, MailboxError) or (
                    isinstance(cause, ToolError) and str(exc).endswith("}")):
                raise
            if self._tool_manager.get_tool(name) is None:
                raise ToolError(prefix + error_json(
                    "invalid_request", 400, f"unknown tool {name!r}")) from None
            raise ToolError(prefix + error_json("invalid_request", 400, str(cause or exc))) \
                from exc


class Tools:
    """The tools' shared state: one mailbox log; a token names its own project."""

    def __init__(self, store: Store, *, require_credential: bool = True) -> None:
        self.log = MailboxLog(store)
        self.require_credential = require_credential

    def box(self, token: str) -> Mailbox:
        with self.log.lock:
            self.log.catch_up()
            issued = self.log.session.lifecycle.mailbox.issued.get(token_hash(token))
        if issued is None:
            raise MailboxError("invalid_session_token", "the session token is unknown")
        return Mailbox(self.log, issued.project_id)

    @staticmethod
    def call(fn: Callable[[], dict[str, Any]]) -> str:
        try:
            return json.dumps(fn(), ensure_ascii=False)
        except MailboxError as err:
            raise ToolError(error_text(err)) from err


def inbox_uri(project_id: str, agent_id: str) -> str:
    """The resource a client subscribes to for an agent's new mail."""
    return f"mailbox://{quote(project_id, safe='')}/inbox/{quote(agent_id, safe='')}"


def _touched(e: ev.Event) -> list[tuple[str, str]]:
    """The inboxes (project, agent) an event changes."""
    if isinstance(e, ev.MailSent):
        return [(e.project_id, r) for r in e.receivers]
    return []


async def _publish_mail(tools: Tools, bus: SubscriptionBus, poll: float) -> None:
    """Tell subscribers of an inbox when mail arrives in it, from any writer (another
    server process, the CLI, Python): the log is the source, watched from its head
    at start-up."""
    store = tools.log.store

    def head() -> int:
        with tools.log.lock:
            return store.version(MAILBOX_SESSION)

    def since(seq: int) -> list[ev.Event]:
        with tools.log.lock:
            return list(store.read(MAILBOX_SESSION, seq + 1))

    seen = await asyncio.to_thread(head)
    while True:
        fresh = await asyncio.to_thread(since, seen)
        for e in fresh:
            seen = e.seq
            for project_id, agent_id in _touched(e):
                await bus.publish(ResourceUpdated(uri=inbox_uri(project_id, agent_id)))
        await asyncio.sleep(poll)


def build_server(store: Store, *, require_credential: bool = True,
                 poll: float = 0.1) -> MCPServer[Any]:
    """The server over ``store``. ``require_credential`` (the default): an agent
    without a credential cannot authenticate. Inbox resources notify their
    subscribers (``subscriptions/listen``) within ``poll`` seconds of new mail."""
    tools = Tools(store, require_credential=require_credential)

    @asynccontextmanager
    async def watching(app: MCPServer[Any]) -> AsyncIterator[None]:
        task = asyncio.create_task(_publish_mail(tools, server.subscriptions_bus, poll))
        try:
            yield None
        finally:
            task.cancel()

    server = MailboxServer("convlog-mailbox", lifespan=watching)

    @server.resource("mailbox://{project_id}/inbox/{agent_id}", mime_type="application/json",
                     description="An agent's inbox: how many messages wait for it. Subscribe "
                                 "(subscriptions/listen) to be told when mail arrives, then "
                                 "fetch it with get_pending_messages (which needs the token).")
    def inbox(project_id: str, agent_id: str) -> str:
        # Counts only: the messages themselves need the agent's session token.
        project, agent = unquote(project_id), unquote(agent_id)
        with tools.log.lock:
            tools.log.catch_up()
            view = tools.log.view
            return json.dumps({"project_id": project, "agent_id": agent,
                               "pending": len(view.pending(project, agent)),
                               "unread": len(view.unread(project, agent))})

    @server.tool(structured_output=False)
    def authenticate(
        agent_id: Annotated[str, Field(description="Your agent id.")],
        project_id: Annotated[str, Field(description="The project you work in.")],
        passkey: Annotated[str | None, Field(description=(
            "Your agent's credential (its passkey), as set by the operator."))] = None,
    ) -> str:
        """Authenticate an agent in a project; returns a session token for the other
        tools (valid 24 hours, only in this project)."""
        def run() -> dict[str, Any]:
            box = Mailbox(tools.log, project_id)
            token = box.authenticate(agent_id, passkey,
                                     require_credential=tools.require_credential)
            return {"session_token": token, "agent_id": agent_id, "project_id": project_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def send_message(
        session_token: Token,
        target_agent_id: Annotated[str, Field(description=(
            "The agent to send to: only an agent assigned to the same project."))],
        content: Content,
        related_task_id: RelatedTask = None,
        client_message_id: ClientId = None,
    ) -> str:
        """Send a message to another agent of the same project (asynchronous: it does
        not wait for an answer). The receiver reads it with get_pending_messages or
        wait_for_messages."""
        def run() -> dict[str, Any]:
            msg = tools.box(session_token).send(session_token, target_agent_id, content,
                                                related_task_id=related_task_id,
                                                client_message_id=client_message_id)
            return {"success": True, "message_id": msg.id, "target_agent_id": target_agent_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def broadcast(
        session_token: Token,
        content: Content,
        target_agent_ids: Annotated[list[str] | None, Field(description=(
            "The agents to send to, all of the same project (optional; default: every "
            "other agent of the project)."))] = None,
        related_task_id: RelatedTask = None,
        client_message_id: ClientId = None,
    ) -> str:
        """Send one message to several agents of the project at once (one message, one
        read receipt per receiver)."""
        def run() -> dict[str, Any]:
            msg = tools.box(session_token).broadcast(
                session_token, content, target_agent_ids, related_task_id=related_task_id,
                client_message_id=client_message_id)
            return {"success": True, "message_id": msg.id,
                    "target_agent_ids": list(msg.receivers)}
        return tools.call(run)

    @server.tool(structured_output=False)
    def get_pending_messages(session_token: Token) -> str:
        """Messages to you not fetched yet; fetching marks them delivered."""
        def run() -> dict[str, Any]:
            got = tools.box(session_token).pending(session_token)
            return {"pending_messages": [wire(m, receiver=False) for m in got]}
        return tools.call(run)

    @server.tool(structured_output=False)
    async def wait_for_messages(
        session_token: Token,
        timeout_seconds: Annotated[float, Field(description=(
            f"How long to wait, 0 to {MAX_WAIT_S} seconds."))] = 30,
    ) -> str:
        """Wait for new messages without polling: returns as soon as any message to you
        is pending (fetching it, as get_pending_messages does), or after the timeout
        with an empty list and timed_out true."""
        try:
            box = tools.box(session_token)
            got = await box.wait(session_token, timeout_seconds)
        except MailboxError as err:
            raise ToolError(error_text(err)) from err
        return json.dumps({"pending_messages": [wire(m, receiver=False) for m in got],
                           "timed_out": not got}, ensure_ascii=False)

    @server.tool(structured_output=False)
    def respond_chat(
        session_token: Token,
        message_id: Annotated[str, Field(description="The id of the message you answer.")],
        content: Content,
        client_message_id: ClientId = None,
    ) -> str:
        """Answer a message you received; the answer goes to its sender and marks the
        message read."""
        def run() -> dict[str, Any]:
            msg = tools.box(session_token).reply(session_token, message_id, content,
                                                 client_message_id=client_message_id)
            return {"success": True, "message_id": msg.id, "reply_to": message_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def mark_read(
        session_token: Token,
        message_ids: Annotated[list[str], Field(description=(
            "Ids of messages you received, to mark read (their senders see the receipt)."))],
    ) -> str:
        """Mark received messages read (read receipts)."""
        def run() -> dict[str, Any]:
            count = tools.box(session_token).mark_read(session_token, message_ids)
            return {"success": True, "marked": count}
        return tools.call(run)

    @server.tool(structured_output=False)
    def list_messages(
        session_token: Token,
        after: Annotated[int, Field(description=(
            "A cursor: list messages after it (0: from the first; pass next_cursor "
            "to read the next page)."))] = 0,
        limit: Annotated[int, Field(description=(
            f"At most this many messages, 1 to {MAX_PAGE}."))] = 100,
    ) -> str:
        """Your sent and received messages in order, a page at a time."""
        def run() -> dict[str, Any]:
            box = tools.box(session_token)
            agent = box.agent_of(session_token)
            page = box.messages(agent, after=after, limit=limit)
            return {"messages": [wire(m) for m in page],
                    "next_cursor": page[-1].cursor if page else after}
        return tools.call(run)

    @server.tool(structured_output=False)
    def list_agents(session_token: Token) -> str:
        """The agents of your project with their status (online: holds an active
        session token), when each was last seen, and how many messages each has
        unread and not yet fetched."""
        def run() -> dict[str, Any]:
            box = tools.box(session_token)
            box.agent_of(session_token)
            return {"agents": [{"id": a.id, "name": a.name, "status": a.status,
                                "lastSeen": iso_or_none(a.last_seen), "unread": a.unread,
                                "pending": a.pending} for a in box.agents()]}
        return tools.call(run)

    @server.tool(structured_output=False)
    def get_read_receipts(
        session_token: Token,
        message_ids: Annotated[list[str] | None, Field(description=(
            "Ids of messages you sent (optional; default: your latest ones)."))] = None,
        limit: Annotated[int, Field(description=(
            f"Without message_ids: how many of your latest sent messages, 1 to "
            f"{MAX_PAGE}."))] = 20,
    ) -> str:
        """Read receipts of messages you sent: each receiver's state (sent, delivered:
        fetched, read)."""
        def run() -> dict[str, Any]:
            box = tools.box(session_token)
            got = box.sent_receipts(session_token, message_ids, limit=limit)
            return {"messages": [{**wire(m), "receipts": r} for m, r in got]}
        return tools.call(run)

    @server.tool(structured_output=False)
    def read_thread(session_token: Token, message_id: MessageId) -> str:
        """A message's whole thread in order: the message it answers back to the first,
        and every answer to any of them."""
        def run() -> dict[str, Any]:
            box = tools.box(session_token)
            thread = box.thread(session_token, message_id)
            return {"root": box.view.root(message_id), "messages": [wire(m) for m in thread]}
        return tools.call(run)

    return server


def iso_or_none(ms: int) -> str | None:
    return iso(ms) if ms else None


def serve_stdio(store: Store, *, require_credential: bool = True) -> None:
    build_server(store, require_credential=require_credential).run("stdio")
