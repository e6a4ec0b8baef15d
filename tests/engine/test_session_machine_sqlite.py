"""The session machine on a SQLite store: the same rules and invariants, on disk."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from engine.store import SQLiteStore, Store
from tests.engine.test_session_machine import STATEFUL, SessionMachine


class SQLiteSessionMachine(SessionMachine):
    def new_store(self) -> Store:
        return SQLiteStore(str(self.tmp / "log.db"), synchronous="OFF")


def test_session_machine_sqlite() -> None:
    run_state_machine_as_test(
        SQLiteSessionMachine, settings=settings(STATEFUL, max_examples=15, stateful_step_count=30)
    )
