"""The MCP server's doors, each through the SDK's own client over stdio: parameter
descriptions, JSON refusals that echo no secret, limits, credentials, racing
retries, and the tools agents need beyond the seed (docs/mailbox.md's session)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from engine import events as ev
from engine.cli.app import main
from engine.store import open_store
from projections.mailbox import MAILBOX_SESSION, Mailbox

Call = Callable[..., Awaitable[tuple[bool, Any]]]


def _setup(url: str) -> None:
    store = open_store(url)
    try:
        mb = Mailbox(store, "project-1")
        mb.create_project("/work/project-1")
        for agent in ("agent-a", "agent-b", "agent-c"):
            mb.register_agent(agent, passkey=f"key-{agent}")
            mb.assign(agent)
        mb.register_agent("no-credential")
        mb.assign("no-credential")
        other = Mailbox(store, "project-2")
        other.create_project("/work/project-2")
        other.register_agent("agent-x")  # imported agents have no credential
        other.assign("agent-x")
    finally:
        store.close()


@asynccontextmanager
async def _client(url: str, *extra: str,
                  modern: bool = False) -> AsyncIterator[tuple[ClientSession, Call]]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "engine", "mcp", "--store", url, *extra])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        if modern:  # the 2026-07-28 protocol: subscriptions/listen
            await client.discover()
        else:
            await client.initialize()

        async def call(name: str, **args: Any) -> tuple[bool, Any]:
            result = await client.call_tool(name, args)
            first = result.content[0]
            assert isinstance(first, TextContent)
            text = first.text
            if result.is_error:  # the SDK's prefix, then our JSON: always JSON at the end
                assert text.startswith(f"Error executing tool {name}: {{"), text
                return True, json.loads(text[text.index("{"):])
            return False, json.loads(text)

        yield client, call


def _version(url: str) -> int:
    store = open_store(url)
    try:
        return store.version(MAILBOX_SESSION)
    finally:
        store.close()


async def _doors(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _client(url) as (client, call):
        out["tools"] = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        _, a = await call("authenticate", agent_id="agent-a", project_id="project-1",
                          passkey="key-agent-a")
        token = a["session_token"]
        out["token"] = token
        version = _version(url)
        out["args"] = [
            await call("send_message", session_token=token, target_agent_id="agent-b"),
            await call("send_message", session_token=token, target_agent_id=["agent-b"],
                       content="x"),
            await call("mark_read", session_token=token, message_ids=token),
            await call("list_messages", session_token=token, limit="many"),
            await call("no_such_tool", session_token=token),
        ]
        out["limits"] = [await call("list_messages", session_token=token, limit=n)
                         for n in (-1, 0, 1001)]
        out["auth"] = [
            await call("authenticate", agent_id="agent-x", project_id="project-2"),
            await call("authenticate", agent_id="no-credential", project_id="project-1"),
            await call("authenticate", agent_id="agent-a", project_id="project-1"),
            await call("authenticate", agent_id="agent-a", project_id="project-1",
                       passkey="wrong"),
        ]
        out["written_by_refusals"] = _version(url) - version
    return out


def test_every_door_refuses_with_json_and_no_secret(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    out = asyncio.run(_doors(url))
    # Defect 1: every parameter of every tool carries a description.
    for name, schema in out["tools"].items():
        for param, spec in schema["properties"].items():
            assert spec.get("description"), (name, param)
    props = out["tools"]["send_message"]["properties"]
    assert "authenticate" in props["session_token"]["description"]
    assert "same project" in props["target_agent_id"]["description"]
    assert "4,000" in props["content"]["description"]
    # Defect 2: argument errors end with the JSON, name fields, echo nothing.
    for is_error, body in out["args"]:
        assert is_error
        assert (body["error"], body["status"]) == ("invalid_request", 400)
        assert out["token"][:6] not in json.dumps(body)
    assert "content" in out["args"][0][1]["message"]
    assert "target_agent_id" in out["args"][1][1]["message"]
    assert "unknown tool" in out["args"][4][1]["message"]
    # Defect 3: limit is validated, never sliced.
    assert [(e, b["error"]) for e, b in out["limits"]] == [(True, "invalid_request")] * 3
    # Trust: no credential, no token (another project's agent, or this one's).
    assert [(e, b["error"]) for e, b in out["auth"]] == [
        (True, "credential_required"), (True, "credential_required"),
        (True, "invalid_credentials"), (True, "invalid_credentials")]
    assert out["written_by_refusals"] == 0


async def _session(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _client(url) as (_, call):
        async def login(agent: str) -> str:
            _, got = await call("authenticate", agent_id=agent, project_id="project-1",
                                passkey=f"key-{agent}")
            token: str = got["session_token"]
            return token

        ta = await login("agent-a")
        out["agents_before"] = (await call("list_agents", session_token=ta))[1]
        tb = await login("agent-b")
        waiting = asyncio.ensure_future(call("wait_for_messages", session_token=tb,
                                             timeout_seconds=20))
        await asyncio.sleep(0.5)
        _, sent = await call("send_message", session_token=ta, target_agent_id="agent-b",
                             content="Can you review task X?", client_message_id="ask-1")
        out["again"] = (await call("send_message", session_token=ta,
                                   target_agent_id="agent-b", content="Can you review task X?",
                                   client_message_id="ask-1"))[1]
        out["waited"] = (await waiting)[1]
        out["idle"] = (await call("wait_for_messages", session_token=tb,
                                  timeout_seconds=0.2))[1]
        mid = sent["message_id"]
        out["sent"] = sent
        out["receipts_delivered"] = (await call("get_read_receipts", session_token=ta,
                                                message_ids=[mid]))[1]
        _, answer = await call("respond_chat", session_token=tb, message_id=mid,
                               content="Done")
        out["receipts"] = (await call("get_read_receipts", session_token=ta))[1]
        out["thread"] = (await call("read_thread", session_token=ta,
                                    message_id=answer["message_id"]))[1]
        out["not_mine"] = await call("get_read_receipts", session_token=tb,
                                     message_ids=[mid])
        out["broadcast"] = (await call("broadcast", session_token=ta,
                                       content="standup in 5"))[1]
        out["agents_after"] = (await call("list_agents", session_token=ta))[1]
    return out


def test_the_documented_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    out = asyncio.run(_session(url))
    before = {a["id"]: a for a in out["agents_before"]["agents"]}
    assert before["agent-a"]["status"] == "online"
    assert before["agent-b"]["status"] == "offline"
    assert "agent-x" not in before  # another project's agents are not listed
    mid = out["sent"]["message_id"]
    assert out["again"]["message_id"] == mid
    assert out["waited"]["timed_out"] is False
    assert [m["id"] for m in out["waited"]["pending_messages"]] == [mid]
    assert out["idle"] == {"pending_messages": [], "timed_out": True}
    assert out["receipts_delivered"]["messages"][0]["receipts"] == {"agent-b": "delivered"}
    [receipt] = out["receipts"]["messages"]
    assert (receipt["id"], receipt["receipts"]) == (mid, {"agent-b": "read"})
    assert out["thread"]["root"] == mid
    assert [m["content"] for m in out["thread"]["messages"]] == [
        "Can you review task X?", "Done"]
    assert out["not_mine"][0] is True
    assert out["not_mine"][1]["error"] == "message_not_found"
    assert sorted(out["broadcast"]["target_agent_ids"]) == ["agent-b", "agent-c",
                                                            "no-credential"]
    after = {a["id"]: a for a in out["agents_after"]["agents"]}
    assert after["agent-b"]["status"] == "online"
    assert after["agent-c"]["pending"] == 1
    assert after["agent-b"]["lastSeen"] is not None


async def _race(url: str, servers: int, sends: int) -> list[list[tuple[bool, Any]]]:
    async def one() -> list[tuple[bool, Any]]:
        async with _client(url) as (_, call):
            _, got = await call("authenticate", agent_id="agent-a", project_id="project-1",
                                passkey="key-agent-a")
            token = got["session_token"]
            await ready.wait()
            return [await call("send_message", session_token=token,
                               target_agent_id="agent-b", content=f"retry {n}",
                               client_message_id=f"retry-{n}") for n in range(sends)]

    ready = asyncio.Event()
    tasks = [asyncio.ensure_future(one()) for _ in range(servers)]
    await asyncio.sleep(4)  # every server started and authenticated
    ready.set()
    return list(await asyncio.gather(*tasks))


def test_racing_retries_through_mcp(tmp_path: Path) -> None:
    """Issue 29, defect 4: servers in separate processes send the same client message
    ids at the same moment; every call answers, with one message id per client id."""
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    results = asyncio.run(_race(url, servers=3, sends=30))
    for calls in results:
        assert [is_error for is_error, _ in calls] == [False] * 30, calls
    ids = [[body["message_id"] for _, body in calls] for calls in results]
    assert ids[0] == ids[1] == ids[2]
    store = open_store(url)
    try:
        sent = [e for e in store.read(MAILBOX_SESSION) if isinstance(e, ev.MailSent)]
        assert sorted(e.message_id for e in sent) == sorted(ids[0])
    finally:
        store.close()


async def _open_agents(url: str) -> tuple[bool, Any]:
    async with _client(url, "--allow-open-agents") as (_, call):
        return await call("authenticate", agent_id="no-credential", project_id="project-1")


def test_open_agents_only_when_the_server_allows_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    is_error, body = asyncio.run(_open_agents(url))
    assert not is_error
    assert body["agent_id"] == "no-credential"


async def _subscribed(url: str) -> dict[str, Any]:
    from mcp.client.subscriptions import listen  # noqa: PLC0415 - 2026-07-28 clients

    from projections.mailbox.mcp_server import inbox_uri  # noqa: PLC0415

    out: dict[str, Any] = {}
    async with _client(url, modern=True) as (client, call):
        uri = inbox_uri("project-1", "agent-b")
        out["templates"] = [t.uri_template for t in
                            (await client.list_resource_templates()).resource_templates]
        async with listen(client, resource_subscriptions=[uri]) as sub:
            out["honored"] = sub.honored.resource_subscriptions
            # Mail from another writer (this process, straight into the store).
            store = open_store(url)
            try:
                mb = Mailbox(store, "project-1")
                mb.send(mb.authenticate("agent-a", "key-agent-a"), "agent-b", "wake up")
            finally:
                store.close()
            event = await asyncio.wait_for(sub.__anext__(), 20)
            out["event"] = getattr(event, "uri", None)
        read = await client.read_resource(uri)
        first = read.contents[0]
        out["inbox"] = json.loads(getattr(first, "text", "{}"))
        _ = call
    return out


def test_an_inbox_subscription_is_notified_of_new_mail(tmp_path: Path) -> None:
    """Resource subscriptions (subscriptions/listen, the SDK's 2026-07-28 protocol):
    mail written by any writer notifies the receiver's inbox resource."""
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    out = asyncio.run(_subscribed(url))
    assert out["templates"] == ["mailbox://{project_id}/inbox/{agent_id}"]
    assert out["honored"] == ["mailbox://project-1/inbox/agent-b"]
    assert out["event"] == "mailbox://project-1/inbox/agent-b"
    assert out["inbox"] == {"project_id": "project-1", "agent_id": "agent-b", "pending": 1,
                            "unread": 1}


def _wrong(schema: dict[str, Any], secret: str) -> list[Any]:
    """Values of a type the parameter does not take, each carrying the secret."""
    kinds = {t.get("type") for t in schema.get("anyOf", [schema])}
    out: list[Any] = [{"secret": secret}]
    if "array" not in kinds:
        out.append([secret])
    if "string" not in kinds:
        out.append(f"{secret}-not-a-number")
    return out


def _valid(schema: dict[str, Any]) -> Any:
    kinds = {t.get("type") for t in schema.get("anyOf", [schema])}
    if "string" in kinds:
        return "x"
    if "array" in kinds:
        return ["x"]
    return 1


async def _every_argument(url: str) -> tuple[str, list[tuple[str, str, bool, Any, str]]]:
    out = []
    async with _client(url) as (client, call):
        _, got = await call("authenticate", agent_id="agent-a", project_id="project-1",
                            passkey="key-agent-a")
        token = got["session_token"]
        for tool in (await client.list_tools()).tools:
            props = tool.input_schema["properties"]
            required = tool.input_schema.get("required", [])
            base = {p: _valid(s) for p, s in props.items() if p in required}
            for param, schema in props.items():
                tries = [{**base, param: bad} for bad in _wrong(schema, token)]
                if param in required:
                    tries.append({k: v for k, v in base.items() if k != param})
                for args in tries:
                    result = await client.call_tool(tool.name, args)
                    first = result.content[0]
                    assert isinstance(first, TextContent)
                    body = json.loads(first.text[first.text.index("{"):])
                    out.append((tool.name, param, result.is_error, body, first.text))
    return token, out


def test_every_wrong_argument_of_every_tool_is_a_json_refusal_without_the_secret(
        tmp_path: Path) -> None:
    """The class of defect 2: for every parameter of every tool, a value of the wrong
    type (carrying a live session token) and a missing required one are refused with
    invalid_request, and the token never comes back."""
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    token, calls = asyncio.run(_every_argument(url))
    assert len(calls) > 40
    for tool, param, is_error, body, text in calls:
        assert is_error, (tool, param)
        assert (body["error"], body["status"]) == ("invalid_request", 400), (tool, param, body)
        assert param in body["message"], (tool, param, body)
        assert token[:8] not in text, (tool, param)  # not even its first characters


async def _intruder_logs_in(url: str) -> tuple[bool, Any]:
    async with _client(url) as (_, call):
        return await call("authenticate", agent_id="agent-x", project_id="project-1",
                          passkey="key-agent-x")


def test_an_imported_file_does_not_let_another_projects_agent_in(tmp_path: Path) -> None:
    """Issue 29, defect 5, end to end: a file written by project-2's agent-x is
    imported into project-1 without --assign; agent-x (with its own credential)
    still cannot authenticate in project-1 over MCP."""
    url = f"sqlite:///{tmp_path}/mcp.db"
    _setup(url)
    store = open_store(url)
    try:
        Mailbox(store, "project-2").set_credential("agent-x", "key-agent-x")
    finally:
        store.close()
    tree = tmp_path / "tree" / ".ai-pm" / "agents"
    line = {"id": "m9", "senderId": "agent-x", "content": "hi",
            "createdAt": "2026-01-23T10:00:00Z"}
    for owner, extra in (("agent-x", {"receiverId": "agent-a"}), ("agent-a", {})):
        (tree / owner).mkdir(parents=True)
        (tree / owner / "chat.jsonl").write_text(json.dumps({**line, **extra}) + "\n")
    assert main(["mailbox", "import", str(tmp_path / "tree"), "--store", url,
                 "--project", "project-1"]) == 3
    is_error, body = asyncio.run(_intruder_logs_in(url))
    assert is_error
    assert (body["error"], body["status"]) == ("sender_not_in_project", 403)
