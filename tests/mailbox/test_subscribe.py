"""The live subscription: new messages arrive without the receiver polling a tool."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.store import open_store
from projections.mailbox import Mailbox, Message


def test_a_subscriber_sees_messages_from_another_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/live.db"
    store = open_store(url)
    mb = Mailbox(store, "project-1")
    mb.create_project("/w")
    for agent in ("agent-a", "agent-b", "agent-c"):
        mb.register_agent(agent)
        mb.assign(agent)
    token = mb.authenticate("agent-a")
    early = mb.send(token, "agent-b", "before subscribing")

    async def scenario() -> list[Message]:
        got: list[Message] = []

        async def listen() -> None:
            async for msg in mb.subscribe("agent-b", after=early.cursor, poll=0.01):
                got.append(msg)
                if len(got) == 2:
                    return

        task = asyncio.create_task(listen())
        await asyncio.sleep(0.05)

        def other_writer() -> None:  # another connection, as another process would be
            own = open_store(url)
            try:
                box = Mailbox(own, "project-1")
                box.send(token, "agent-c", "not for b")
                box.send(token, "agent-b", "one")
                box.broadcast(token, "two")
            finally:
                own.close()

        await asyncio.to_thread(other_writer)
        await asyncio.wait_for(task, 10)
        return got

    try:
        got = asyncio.run(scenario())
    finally:
        store.close()
    assert [m.content for m in got] == ["one", "two"]
