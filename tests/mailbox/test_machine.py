"""The mailbox against a plain model, over random interleavings of every command."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.support.mailbox_machine import MAILBOX_EVENTS, WRITTEN, MailboxMachine


def test_mailbox_matches_its_model() -> None:
    run_state_machine_as_test(MailboxMachine, settings=settings(max_examples=60,
                                                               stateful_step_count=40,
                                                               deadline=None))
    assert set(MAILBOX_EVENTS) == WRITTEN
