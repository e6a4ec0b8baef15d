"""Terminal niceties with no dependency: quiet exits on a closed pipe, progress on a tty."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO


def silence_stdout() -> None:
    """After the reader of stdout went away: point stdout at /dev/null so the flush at
    interpreter exit does not raise a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (captured in tests)
        pass


class Progress:
    """``label: N events`` rewritten in place on stderr, at most ten times a second, and
    only when stderr is a terminal: piped or redirected output stays clean."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.enabled = _isatty(self.stream)
        self._last = 0.0
        self._shown = False

    def __call__(self, count: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._shown = True
        self.stream.write(f"\r{self.label}: {count} events")
        self.stream.flush()

    def done(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")  # erase the progress line
            self.stream.flush()
            self._shown = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def one_line(text: str) -> str:
    """One printable line: messages can quote damaged bytes (control characters)."""
    flat = " ".join(str(text).split()) or "(no message)"
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in flat)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """Ctrl-C (SIGINT) inside the block is noted instead of raised: the block runs to
    its end (a write and the report of it), and the function yielded says whether an
    interrupt came. Outside the main thread (no signal handlers there) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)
