"""LISTEN/NOTIFY wakeups for PostgreSQL subscribers.

Every append's transaction sends one ``NOTIFY convlog`` whose payload names what
it committed: ``"<first position> <last position> <session sid>"`` (a store
created before the payload carried the range sends only ``"<last position>"``).
A notification is only a wakeup: the subscriber always reads by position
(``read_all(after=last seen)``), so a notification that is lost, late, merged or
never sent costs latency, never an event. What the payload buys is skipping
work: after a read, the notifications of commits that read already covered are
dropped without a query, and a subscriber of one session ignores commits of
other sessions. Without any notification (a dropped listener connection, a
server that discards them), the subscriber still re-reads every ``poll``
seconds; a broken listener is reopened (LISTEN before the next read, so nothing
committed in between is missed). Closing the store ends its subscriptions,
whatever thread they run on: a waiting one within :data:`CLOSED_CHECK` seconds,
a reading one at its next read (the closed connection's error ends it cleanly).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg

CHANNEL = "convlog"
# The longest a waiting subscriber takes to see that its store was closed (seconds).
CLOSED_CHECK = 0.5


class Announcement(NamedTuple):
    """What one commit's notification says."""

    first: int
    last: int
    sid: int | None  # None: an older payload that names no session


def parse(payload: str) -> Announcement | None:
    """The payload of a ``convlog`` notification; None when it is not one of ours."""
    parts = payload.split()
    try:
        if len(parts) == 3:
            return Announcement(int(parts[0]), int(parts[1]), int(parts[2]))
        if len(parts) == 1:
            last = int(parts[0])
            return Announcement(last, last, None)
    except ValueError:
        return None
    return None


def wakes(note: Announcement | None, after: int, sid: int | None) -> bool:
    """Whether a subscriber that has read up to ``after`` (of session ``sid``, or of
    every session) has something to read after this notification. An unreadable
    payload wakes it: reading is always safe, sleeping through a commit is not."""
    if note is None:
        return True
    if note.last <= after:
        return False  # a commit the last read already returned
    return sid is None or note.sid is None or note.sid == sid


class Listener:
    """One LISTEN connection of one subscription (not shared between threads)."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], *,
                 closed: Callable[[], bool] = lambda: False) -> None:
        self._connect = connect
        self._closed = closed  # the store's: a closed store's subscriber stops waiting
        self._conn: psycopg.Connection[Any] | None = None
        self.reopened = 0  # how often the connection was replaced (for the tests)
        self._open()

    def _open(self) -> None:
        conn = self._connect()
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def wait(self, after: int, sid: int | None, timeout: float) -> None:
        """Return when a commit that the subscriber has not read may exist: an
        announcement that concerns it (then every queued one is drained, since one
        read covers them all), or ``timeout`` seconds (the fallback re-read)."""
        deadline = time.monotonic() + timeout
        try:
            if self._conn is None:
                self._open()
            assert self._conn is not None
            while (left := deadline - time.monotonic()) > 0 and not self._closed():
                # In slices: a store closed by another thread is seen within one.
                notes = list(self._conn.notifies(timeout=min(left, CLOSED_CHECK),
                                                 stop_after=1))
                if any(wakes(parse(n.payload), after, sid) for n in notes):
                    list(self._conn.notifies(timeout=0))  # drain: one read covers them
                    return
        except psycopg.Error:
            # A dropped connection: reopen it for the next wait (or fall back to
            # the timeout), and let the caller read by position now.
            with contextlib.suppress(psycopg.Error):
                self.close()
            if self._closed():
                return
            self.reopened += 1
            with contextlib.suppress(psycopg.Error):
                self._open()
