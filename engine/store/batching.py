"""Group commit for ``durability=batched``.

The store keeps one write transaction (SQLite) or one locked buffer (JSONL) open
across appends and commits it when the window is ``max_ms`` old or holds
``max_events`` events, whichever comes first, or on ``flush()`` / ``close()``.
A crash therefore loses at most the open window, and never part of an append:
the window commits or vanishes whole. The deadline is kept on two paths: the
writer commits a window that is past due at the end of its next append, and a
background thread commits the window of a writer that went quiet. So an append
acknowledged more than ``max_ms`` plus one append's duration before a crash is
committed. While a window is open the store holds its
write lock, so no other writer can slip in between an acknowledgement and the
commit (other writers wait at most ``max_ms``).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

DEFAULT_BATCH_MS = 50.0
DEFAULT_BATCH_EVENTS = 1000


class GroupCommit:
    def __init__(self, commit: Callable[[], None], lock: threading.RLock, *,
                 max_ms: float = DEFAULT_BATCH_MS,
                 max_events: int = DEFAULT_BATCH_EVENTS) -> None:
        if max_ms <= 0 or max_events <= 0:
            raise ValueError("batch window must be positive")
        self._commit = commit
        self._lock = lock
        self.max_ms = max_ms
        self.max_events = max_events
        self.pending = 0
        self.opened = 0.0
        self._wake = threading.Condition(threading.Lock())
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def open(self) -> bool:
        return self.pending > 0

    def added(self, count: int) -> None:
        """Called with the store lock held after an append joined the window. The
        writer enforces the deadline itself: the background thread needs the store
        lock, which a writer appending in a loop takes back before a waiting thread
        runs (measured: windows of 50 ms stayed open 0.5-0.9 s), so the first append
        that ends after the deadline commits the window it joined."""
        now = time.monotonic()
        if self.pending == 0:
            self.opened = now
            self._start()
            with self._wake:
                self._wake.notify()
        self.pending += count
        if self.pending >= self.max_events or now - self.opened >= self.max_ms / 1000:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if self.pending:
                self._commit()
                self.pending = 0

    def close(self) -> None:
        self.flush()
        self._closed = True
        with self._wake:
            self._wake.notify()

    def _start(self) -> None:
        if self._thread is None:
            # The thread holds only a weak reference, so a store that is dropped
            # without close() is still collected (and its thread ends).
            ref = weakref.ref(self)
            self._thread = threading.Thread(target=_run, args=(ref,), daemon=True,
                                            name="convlog-group-commit")
            self._thread.start()


def _run(ref: weakref.ReferenceType[GroupCommit]) -> None:
    while True:
        gc = ref()
        if gc is None or gc._closed:
            return
        wake = gc._wake
        if not gc.pending:
            with wake:
                del gc
                wake.wait(0.5)
            continue
        due = gc.opened + gc.max_ms / 1000 - time.monotonic()
        if due > 0:
            del gc
            time.sleep(min(due, 0.5))
            continue
        try:
            gc.flush()
        except Exception:  # the next append or flush() reports the failure
            time.sleep(gc.max_ms / 1000)
        del gc
