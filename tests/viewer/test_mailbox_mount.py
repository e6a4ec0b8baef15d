"""`convlog serve` carries the mailbox's HTTP API when the store has a mailbox."""

from __future__ import annotations

from starlette.testclient import TestClient

from engine.store import MemoryStore
from projections.mailbox import Mailbox
from projections.mailbox.mailbox import MAILBOX_SESSION
from projections.serve.app import create_app
from tests.support.browser import LOOPBACK

URL = "/projects/p1/agents/agent-b/chat/messages"


def _store_with_mailbox() -> tuple[MemoryStore, str]:
    store = MemoryStore()
    mb = Mailbox(store, "p1")
    mb.create_project("/w")
    for agent in ("agent-a", "agent-b"):
        mb.register_agent(agent)
        mb.assign(agent)
    mb.send(mb.authenticate("agent-a"), "agent-b", "hello")
    return store, mb.authenticate("agent-a")


def test_listing_is_served_and_sending_needs_writes_on() -> None:
    store, token = _store_with_mailbox()
    auth = {"Authorization": f"Bearer {token}"}
    reader = TestClient(create_app(store), base_url=LOOPBACK)
    listed = reader.get(URL, headers=auth)
    assert listed.status_code == 200
    assert [m["content"] for m in listed.json()["messages"]] == ["hello"]
    assert reader.get(URL).status_code == 401
    assert reader.post(URL, json={"content": "x"}, headers=auth).status_code == 405
    writer = TestClient(create_app(store, allow_writes=True, token="t"),
                        base_url=LOOPBACK)
    assert writer.post(URL, json={"content": "again"}, headers=auth).status_code == 201


def test_a_store_without_a_mailbox_gets_none_and_is_not_written() -> None:
    store = MemoryStore()
    client = TestClient(create_app(store), base_url=LOOPBACK)
    assert client.get(URL).status_code == 404
    assert MAILBOX_SESSION not in {s.id for s in store.sessions()}
