"""A project with three agents on each store: the seed's agent-a, agent-b, agent-c."""

from __future__ import annotations

import pytest

from engine.session import StepClock
from engine.store import Store
from projections.mailbox import Mailbox


@pytest.fixture
def mailbox(store: Store, clock: StepClock) -> Mailbox:
    mb = Mailbox(store, "project-1", clock=clock)
    mb.create_project("/work/project-1")
    for agent in ("agent-a", "agent-b", "agent-c"):
        mb.register_agent(agent)
        mb.assign(agent)
    return mb
