"""A stateful model of the mailbox: random set-up, sends, fetches and reads against a
plain-Python oracle. Shared so the engine's catalog test can see which event types
it generates."""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from engine import events as ev
from engine.mailbox import MailboxError
from engine.session import StepClock
from engine.store import MemoryStore
from projections.mailbox import MAILBOX_SESSION, Mailbox, MailboxLog

PROJECTS: Final = ("p0", "p1")
AGENTS: Final = ("a0", "a1", "a2")

# Every mailbox event type this machine writes (checked by tests/engine).
MAILBOX_EVENTS: Final = (ev.ProjectCreated, ev.ProjectDirectorySet, ev.ProjectTeamConfigSet,
                         ev.AgentRegistered,
                         ev.AgentCredentialSet, ev.AgentAssigned, ev.AgentUnassigned,
                         ev.TokenIssued, ev.TokenRevoked, ev.MailSent, ev.MailDelivered,
                         ev.MailRead)


# The event types the runs so far have written (the test checks it covers MAILBOX_EVENTS).
WRITTEN: set[type[ev.Event]] = set()


class MailboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.log = MailboxLog(self.store, StepClock())
        self.boxes = {p: Mailbox(self.log, p) for p in PROJECTS}
        self.dirs: dict[str, str] = {}
        self.agents: set[str] = set()
        self.members: dict[str, set[str]] = {p: set() for p in PROJECTS}
        self.tokens: dict[tuple[str, str], str] = {}
        self.state: dict[tuple[str, str], str] = {}  # (message, receiver) -> state
        self.project_of: dict[str, str] = {}
        self.keys: dict[str, str] = {}  # agent -> its credential, once one is set

    @initialize()
    def start(self) -> None:
        """Both projects with a directory, every agent, two members each, their tokens:
        the random rules then move away from a state where sends succeed."""
        for p, members in zip(PROJECTS, (AGENTS[:2], AGENTS[1:]), strict=True):
            self.project(p, "/w")
            for a in members:
                self.register(a)
                self.membership(p, a, join=True)
                self.token(p, a, revoke=False)

    def _refused(self, code: str, call: object) -> None:
        before = self.store.version(MAILBOX_SESSION)
        assert callable(call)
        got = None
        try:
            call()
        except MailboxError as err:
            got = err.code
        assert got == code
        assert self.store.version(MAILBOX_SESSION) == before

    @rule(p=st.sampled_from(PROJECTS), d=st.sampled_from(["", "/w"]))
    def project(self, p: str, d: str) -> None:
        if p in self.dirs:
            self.boxes[p].set_working_directory(d)
        else:
            self.boxes[p].create_project(d)
        self.dirs[p] = d

    @rule(p=st.sampled_from(PROJECTS), n=st.integers(0, 2))
    def team_config(self, p: str, n: int) -> None:
        """An Agent Teams config: logged when it differs from the last one, else nothing."""
        if p not in self.dirs:
            return
        config = {"name": p, "members": [{"name": a} for a in AGENTS[:n]]}
        before = self.store.version(MAILBOX_SESSION)
        logged = self.boxes[p].set_team_config(config)
        assert self.store.version(MAILBOX_SESSION) == before + logged
        assert not self.boxes[p].set_team_config(config)  # the same again writes nothing

    @rule(a=st.sampled_from(AGENTS))
    def register(self, a: str) -> None:
        if a not in self.agents:
            self.boxes[PROJECTS[0]].register_agent(a)
            self.agents.add(a)

    @rule(a=st.sampled_from([*AGENTS, "ghost"]))
    def credential(self, a: str) -> None:
        box = self.boxes[PROJECTS[0]]
        if a not in self.agents:
            self._refused("agent_not_found", lambda: box.set_credential(a, "k"))
            return
        key = f"key-{a}-{len(self.keys)}"
        box.set_credential(a, key)
        self.keys[a] = key

    @rule(p=st.sampled_from(PROJECTS), a=st.sampled_from(AGENTS), join=st.booleans())
    def membership(self, p: str, a: str, join: bool) -> None:
        if p not in self.dirs or a not in self.agents or join == (a in self.members[p]):
            return
        if join:
            self.boxes[p].assign(a)
            self.members[p].add(a)
        else:
            self.boxes[p].unassign(a)
            self.members[p].discard(a)

    @rule(p=st.sampled_from(PROJECTS), a=st.sampled_from(AGENTS), revoke=st.booleans())
    def token(self, p: str, a: str, revoke: bool) -> None:
        if revoke and (p, a) in self.tokens:
            self.boxes[p].revoke(self.tokens.pop((p, a)))
        elif a in self.members[p]:
            if a in self.keys:  # a credential, once set, is asked for
                self._refused("invalid_credentials",
                              lambda: self.boxes[p].authenticate(a, "wrong"))
            self.tokens[(p, a)] = self.boxes[p].authenticate(a, self.keys.get(a))

    @rule(p=st.sampled_from(PROJECTS), a=st.sampled_from(AGENTS),
          to=st.sampled_from([*AGENTS, "ghost"]), long=st.booleans())
    def send(self, p: str, a: str, to: str, long: bool) -> None:
        token = self.tokens.get((p, a))
        box = self.boxes[p]
        content = "x" * (4001 if long else 3)
        if token is None or a not in self.members[p]:
            self._refused("invalid_session_token", lambda: box.send(token or "?", to, content))
            return
        expected = ("content_too_long" if long else "cannot_message_self" if to == a
                    else "agent_not_found" if to not in self.agents
                    else "target_agent_not_in_project" if to not in self.members[p]
                    else "working_directory_not_set" if not self.dirs[p] else None)
        if expected is not None:
            self._refused(expected, lambda: box.send(token, to, content))
            return
        msg = box.send(token, to, content)
        self.state[(msg.id, to)] = "sent"
        self.project_of[msg.id] = p

    @precondition(lambda self: bool(self.state))
    @rule(data=st.data())
    def fetch(self, data: st.DataObject) -> None:
        m, a = data.draw(st.sampled_from(sorted(self.state)))
        p = self.project_of[m]
        token = self.tokens.get((p, a))
        if token is None or a not in self.members[p]:
            return
        got = {m.id for m in self.boxes[p].pending(token)}
        assert got == {m for (m, r), s in self.state.items()
                       if r == a and s == "sent" and self.project_of[m] == p}
        for m in got:
            self.state[(m, a)] = "delivered"

    @precondition(lambda self: bool(self.state))
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        m, a = data.draw(st.sampled_from(sorted(self.state)))
        p = self.project_of[m]
        token = self.tokens.get((p, a))
        if token is None or a not in self.members[p]:
            return
        unread = self.state[(m, a)] != "read"
        assert self.boxes[p].mark_read(token, [m]) == int(unread)
        self.state[(m, a)] = "read"

    @invariant()
    def receipts_match(self) -> None:
        view = self.log.view
        assert view.states == self.state

    def teardown(self) -> None:
        WRITTEN.update(type(e) for e in self.store.read(MAILBOX_SESSION))
