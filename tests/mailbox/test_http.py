"""The REST listing and send routes, mounted in an app built here (as the viewer does)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.testclient import TestClient

from engine.store import MemoryStore
from projections.mailbox import Mailbox
from projections.mailbox.http import mailbox_routes

URL = "/projects/project-1/agents/{}/chat/messages"


def _app() -> tuple[TestClient, Mailbox]:
    store = MemoryStore()
    mb = Mailbox(store, "project-1")
    mb.create_project("/w")
    for agent in ("agent-a", "agent-b"):
        mb.register_agent(agent)
        mb.assign(agent)
    other = Mailbox(store, "project-2")
    other.create_project("/w2")
    other.register_agent("agent-x")
    other.assign("agent-x")
    return TestClient(Starlette(routes=mailbox_routes(store))), mb


def test_send_then_list_with_paging() -> None:
    client, mb = _app()
    auth = {"Authorization": f"Bearer {mb.authenticate('agent-a')}"}
    ids = []
    for n in range(3):
        r = client.post(URL.format("agent-b"), json={"content": f"m{n}",
                                                     "related_task_id": "t"}, headers=auth)
        assert r.status_code == 201
        assert r.json()["target_agent_id"] == "agent-b"
        ids.append(r.json()["message_id"])
    first = client.get(URL.format("agent-b"), params={"limit": 2}, headers=auth).json()
    assert [m["id"] for m in first["messages"]] == ids[:2]
    assert first["messages"][0]["relatedTaskId"] == "t"
    rest = client.get(URL.format("agent-b"), params={"after": first["next_cursor"]},
                      headers=auth).json()
    assert [m["id"] for m in rest["messages"]] == ids[2:]
    since = first["messages"][1]["createdAt"]
    assert [m["id"] for m in client.get(URL.format("agent-b"), params={"since": since},
                                        headers=auth).json()["messages"]] == ids[2:]


def test_errors_carry_the_seeds_codes_and_statuses() -> None:
    client, mb = _app()
    auth = {"Authorization": f"Bearer {mb.authenticate('agent-a')}"}
    cases = [
        ("agent-b", {"content": "x" * 4001}, auth, 400, "content_too_long"),
        ("agent-a", {"content": "x"}, auth, 400, "cannot_message_self"),
        ("nobody", {"content": "x"}, auth, 404, "agent_not_found"),
        ("agent-x", {"content": "x"}, auth, 403, "target_agent_not_in_project"),
        ("agent-b", {"content": "x"}, {}, 401, "invalid_session_token"),
        ("agent-b", {"content": "x"}, {"Authorization": "Bearer forged"}, 401,
         "invalid_session_token"),
        ("agent-b", {"nothing": 1}, auth, 400, "invalid_request"),
    ]
    for target, body, headers, status, code in cases:
        r = client.post(URL.format(target), json=body, headers=headers)
        assert (r.status_code, r.json()["error"]) == (status, code), target
    assert mb.messages("agent-b") == []  # nothing written on any error


def test_a_token_only_opens_its_own_project() -> None:
    client, mb = _app()
    token = Mailbox(mb.log, "project-2").authenticate("agent-x")
    r = client.get("/projects/project-1/agents/agent-a/chat/messages",
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401
    ok = client.get("/projects/project-2/agents/agent-x/chat/messages",
                    headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    assert ok.json() == {"messages": [], "next_cursor": 0}


def test_limit_is_validated_not_clamped() -> None:
    """Issue 29, defect 3, at the HTTP door: a limit outside 1..1000 is refused the
    same way as over MCP and in Python, with the JSON error shape."""
    client, mb = _app()
    auth = {"Authorization": f"Bearer {mb.authenticate('agent-a')}"}
    for bad in ("-1", "0", "1001", "x"):
        r = client.get(URL.format("agent-a"), params={"limit": bad}, headers=auth)
        assert r.status_code == 400, bad
        assert (r.json()["error"], r.json()["status"]) == ("invalid_request", 400)
    assert client.get(URL.format("agent-a"), params={"after": "-3"},
                      headers=auth).status_code == 400
