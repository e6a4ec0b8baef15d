"""The MCP server end to end: the SDK's own client talks to ``convlog mcp`` over stdio."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from engine.store import open_store
from projections.mailbox import Mailbox


def _setup(url: str) -> None:
    store = open_store(url)
    try:
        mb = Mailbox(store, "project-1")
        mb.create_project("/work/project-1")
        for agent in ("agent-a", "agent-b"):
            mb.register_agent(agent, passkey=f"key-{agent}")
            mb.assign(agent)
        other = Mailbox(store, "project-2")
        other.create_project("/work/project-2")
        other.register_agent("agent-x")
        other.assign("agent-x")
    finally:
        store.close()


async def _conversation(url: str) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "engine", "mcp", "--store", url])
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        out["tools"] = {t.name: t.input_schema for t in (await client.list_tools()).tools}

        async def call(name: str, **args: Any) -> tuple[bool, Any]:
            result = await client.call_tool(name, args)
            first = result.content[0]
            assert isinstance(first, TextContent)
            # An error's text is the SDK's "Error executing tool NAME: " and our JSON.
            return result.is_error, json.loads(first.text[first.text.index("{"):])

        _, auth_a = await call("authenticate", agent_id="agent-a", project_id="project-1",
                               passkey="key-agent-a")
        _, auth_b = await call("authenticate", agent_id="agent-b", project_id="project-1",
                               passkey="key-agent-b")
        ta, tb = auth_a["session_token"], auth_b["session_token"]
        out["sent"] = await call("send_message", session_token=ta, target_agent_id="agent-b",
                                 content="タスクXについて質問があります",
                                 related_task_id="task-x")
        out["pending"] = await call("get_pending_messages", session_token=tb)
        out["pending_again"] = await call("get_pending_messages", session_token=tb)
        mid = out["sent"][1]["message_id"]
        out["reply"] = await call("respond_chat", session_token=tb, message_id=mid,
                                  content="はい")
        out["mark"] = await call("mark_read", session_token=tb, message_ids=[mid])
        out["list"] = await call("list_messages", session_token=ta)
        out["errors"] = [
            await call("send_message", session_token=ta, target_agent_id="agent-b",
                       content="x" * 4001),
            await call("send_message", session_token=ta, target_agent_id="agent-a",
                       content="x"),
            await call("send_message", session_token=ta, target_agent_id="nobody",
                       content="x"),
            await call("send_message", session_token=ta, target_agent_id="agent-x",
                       content="x"),
            await call("send_message", session_token="forged", target_agent_id="agent-b",
                       content="x"),
        ]
    return out


def test_mcp_over_stdio(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    out = asyncio.run(_conversation(url))
    assert {"authenticate", "send_message", "get_pending_messages", "respond_chat",
            "mark_read", "list_messages"} <= set(out["tools"])
    schema = out["tools"]["send_message"]
    assert set(schema["required"]) == {"session_token", "target_agent_id", "content"}
    assert {"related_task_id", "session_token", "target_agent_id", "content"} <= set(
        schema["properties"])
    is_error, sent = out["sent"]
    assert not is_error
    assert sent["success"] is True
    assert sent["target_agent_id"] == "agent-b"
    _, pending = out["pending"]
    [msg] = pending["pending_messages"]
    assert (msg["id"], msg["senderId"], msg["content"], msg["relatedTaskId"]) == (
        sent["message_id"], "agent-a", "タスクXについて質問があります", "task-x")
    assert msg["createdAt"].endswith("Z")
    assert out["pending_again"] == (False, {"pending_messages": []})
    assert out["reply"][1]["reply_to"] == sent["message_id"]
    assert out["mark"] == (False, {"success": True, "marked": 0})  # the reply read it
    listed = out["list"][1]["messages"]
    assert [m["content"] for m in listed] == ["タスクXについて質問があります", "はい"]
    assert [(err, body["error"], body["status"]) for err, body in out["errors"]] == [
        (True, "content_too_long", 400), (True, "cannot_message_self", 400),
        (True, "agent_not_found", 404), (True, "target_agent_not_in_project", 403),
        (True, "invalid_session_token", 401)]
    store = open_store(url)
    try:
        assert [m.content for m in Mailbox(store, "project-1").messages("agent-b")] == [
            "タスクXについて質問があります", "はい"]
    finally:
        store.close()
