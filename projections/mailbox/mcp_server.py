"""``convlog mcp --store URL``: the seed's chat tools as an MCP server over stdio.

Uses the official MCP Python SDK (the optional extra ``convlog[mcp]``). Every tool
is a command of :class:`Mailbox`; a refusal becomes an MCP tool error whose text
is a JSON object carrying the seed's code and HTTP status, so a client can branch
on ``error`` without parsing prose.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from engine.mailbox import MailboxError
from engine.store.base import Store
from projections.mailbox.mailbox import Mailbox, MailboxLog, token_hash
from projections.mailbox.wire import wire


def error_text(err: MailboxError) -> str:
    return json.dumps({"error": err.code, "status": err.status, "message": err.detail},
                      ensure_ascii=False)


class Tools:
    """The tools, over one mailbox log; a token names its own project."""

    def __init__(self, store: Store) -> None:
        self.log = MailboxLog(store)

    def box(self, token: str) -> Mailbox:
        with self.log.lock:
            self.log.catch_up()
            issued = self.log.session.lifecycle.mailbox.issued.get(token_hash(token))
        if issued is None:
            raise MailboxError("invalid_session_token", "the session token is unknown")
        return Mailbox(self.log, issued.project_id)

    def call(self, fn: Callable[[], dict[str, Any]]) -> str:
        try:
            return json.dumps(fn(), ensure_ascii=False)
        except MailboxError as err:
            raise ToolError(error_text(err)) from err


def build_server(store: Store) -> MCPServer[Any]:
    tools = Tools(store)
    server: MCPServer[Any] = MCPServer("convlog-mailbox")

    @server.tool(structured_output=False)
    def authenticate(agent_id: str, project_id: str, passkey: str | None = None) -> str:
        """Authenticate an agent in a project; returns a session token for the other tools."""
        def run() -> dict[str, Any]:
            box = Mailbox(tools.log, project_id)
            token = box.authenticate(agent_id, passkey)
            return {"session_token": token, "agent_id": agent_id, "project_id": project_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def send_message(session_token: str, target_agent_id: str, content: str,
                     related_task_id: str | None = None,
                     client_message_id: str | None = None) -> str:
        """Send a message to another agent of the same project (asynchronous; at most
        4,000 characters). The receiver reads it with get_pending_messages."""
        def run() -> dict[str, Any]:
            msg = tools.box(session_token).send(session_token, target_agent_id, content,
                                                related_task_id=related_task_id,
                                                client_message_id=client_message_id)
            return {"success": True, "message_id": msg.id, "target_agent_id": target_agent_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def get_pending_messages(session_token: str) -> str:
        """Messages to this agent not fetched yet; fetching marks them delivered."""
        def run() -> dict[str, Any]:
            got = tools.box(session_token).pending(session_token)
            return {"pending_messages": [wire(m, receiver=False) for m in got]}
        return tools.call(run)

    @server.tool(structured_output=False)
    def respond_chat(session_token: str, message_id: str, content: str) -> str:
        """Answer a received message; the answer marks it read."""
        def run() -> dict[str, Any]:
            msg = tools.box(session_token).reply(session_token, message_id, content)
            return {"success": True, "message_id": msg.id, "reply_to": message_id}
        return tools.call(run)

    @server.tool(structured_output=False)
    def mark_read(session_token: str, message_ids: list[str]) -> str:
        """Mark received messages read (read receipts)."""
        def run() -> dict[str, Any]:
            count = tools.box(session_token).mark_read(session_token, message_ids)
            return {"success": True, "marked": count}
        return tools.call(run)

    @server.tool(structured_output=False)
    def list_messages(session_token: str, after: int = 0, limit: int = 100) -> str:
        """This agent's sent and received messages in order; page with the cursor."""
        def run() -> dict[str, Any]:
            box = tools.box(session_token)
            agent = box.agent_of(session_token)
            page = box.messages(agent, after=after, limit=limit)
            return {"messages": [wire(m) for m in page],
                    "next_cursor": page[-1].cursor if page else after}
        return tools.call(run)

    return server


def serve_stdio(store: Store) -> None:
    build_server(store).run("stdio")
