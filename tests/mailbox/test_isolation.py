"""A message is never delivered across projects, whatever the agents and tokens."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.mailbox import MailboxError
from engine.session import StepClock
from engine.store import MemoryStore
from projections.mailbox import Mailbox, MailboxLog

PROJECTS = ["p0", "p1", "p2"]
AGENTS = [f"a{i}" for i in range(6)]

assignments = st.dictionaries(st.sampled_from(AGENTS),
                              st.sets(st.sampled_from(PROJECTS), max_size=3), min_size=1)
sends = st.lists(st.tuples(st.sampled_from(PROJECTS), st.sampled_from(AGENTS),
                           st.sampled_from(PROJECTS), st.sampled_from([*AGENTS, "ghost"]),
                           st.booleans()), max_size=25)


@settings(max_examples=60, deadline=None)
@given(assignments, sends)
def test_no_delivery_crosses_a_project(
        members: dict[str, set[str]],
        attempts: list[tuple[str, str, str, str, bool]]) -> None:
    log = MailboxLog(MemoryStore(), StepClock())
    boxes = {p: Mailbox(log, p) for p in PROJECTS}
    for p, box in boxes.items():
        box.create_project(f"/work/{p}")
    for agent, projects in members.items():
        boxes[PROJECTS[0]].register_agent(agent)
        for p in projects:
            boxes[p].assign(agent)
    tokens: dict[tuple[str, str], str] = {}
    for agent, projects in members.items():
        for p in projects:
            tokens[(p, agent)] = boxes[p].authenticate(agent)
    refusals: list[tuple[bool, int]] = []
    for token_project, sender, via, target, broadcast in attempts:
        token = tokens.get((token_project, sender), "not-a-token")
        box = boxes[via]
        legit = token_project == via and via in members.get(sender, set())
        try:
            msg = (box.broadcast(token, "hi") if broadcast
                   else box.send(token, target, "hi"))
        except MailboxError as err:
            refusals.append((legit, err.status))
            continue
        # Accepted: the sender's token was for this very project, every receiver is in it.
        assert token_project == via
        assert via in members[sender]
        assert all(via in members.get(r, set()) for r in msg.receivers)
        assert msg.project_id == via
        assert sender not in msg.receivers
    # A token works in its own project only: elsewhere it is refused as unknown.
    assert all(status == 401 for legit, status in refusals if not legit)
    view = log.view
    for msg in view.messages.values():
        for receiver in msg.receivers:
            assert msg.project_id in members[receiver]
        assert msg.project_id in members[msg.sender_id]
    for (project, agent), ids in view.history.items():
        assert all(view.messages[i].project_id == project for i in ids)
        assert project in members[agent]
    # The reading tools stay inside the token's project too: another project's
    # message is not found, its agents are not listed.
    for (p, _agent), token in tokens.items():
        box = boxes[p]
        assert {a.id for a in box.agents()} <= {a for a, ps in members.items() if p in ps}
        for msg in view.messages.values():
            if msg.project_id == p:
                assert msg in box.thread(token, msg.id)
                continue
            with pytest.raises(MailboxError, match="message_not_found"):
                box.thread(token, msg.id)
            with pytest.raises(MailboxError, match="message_not_found"):
                box.sent_receipts(token, [msg.id])
