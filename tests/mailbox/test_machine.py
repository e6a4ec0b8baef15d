"""The mailbox against a plain model, over random interleavings of every command."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.support.mailbox_machine import MAILBOX_EVENTS, WRITTEN, MailboxMachine


@pytest.fixture(autouse=True)
def cheap_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """scrypt's cost parameter is recorded in each verifier, so a low one still
    checks the same code path; the default (16 MiB a check) made this run 18x slower."""
    monkeypatch.setattr("engine.mailbox_credentials.N", 16)


def test_mailbox_matches_its_model() -> None:
    run_state_machine_as_test(MailboxMachine, settings=settings(max_examples=60,
                                                               stateful_step_count=40,
                                                               deadline=None))


def test_the_machine_writes_every_mailbox_event_type() -> None:
    """One fixed walk through every rule, so the coverage claim does not hang on luck."""
    m = MailboxMachine()
    m.start()
    m.project("p0", "/w2")
    m.send("p0", "a0", "a1", long=False)
    [(mid, receiver)] = list(m.state)
    m.state[(mid, receiver)] = "sent"
    token = m.tokens[("p0", receiver)]
    assert [x.id for x in m.boxes["p0"].pending(token)] == [mid]
    m.state[(mid, receiver)] = "delivered"
    assert m.boxes["p0"].mark_read(token, [mid]) == 1
    m.state[(mid, receiver)] = "read"
    m.receipts_match()
    m.credential("a0")
    m.token("p0", "a0", revoke=False)  # now with its credential
    m.token("p0", "a0", revoke=True)
    m.membership("p0", "a0", join=False)
    m.teardown()
    assert set(MAILBOX_EVENTS) == WRITTEN
