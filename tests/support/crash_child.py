"""Child process of the crash and concurrency tests (run as a script).

``crash URL SESSION``: append text deltas to one open message forever, printing
each acknowledged seq on stdout, until killed.
``race URL SESSION N WRITER``: append N events through ``engine.store.retry``,
each from a freshly opened session, and print the seqs it got.
``point URL SESSION N``: as ``crash``, but the process kills itself (SIGKILL) at its
N-th write step: the N-th SQL statement SQLite starts on the store's connection
(a schema migration, a seal, a commit), or the N-th ``os.fsync``/``os.replace`` a
JSONL store makes (intent, lines, head, sealed members, the emptied tail). The
store's code is untouched: the hooks are SQLite's trace callback and the child's own
``os`` functions.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from engine import events as ev
from engine.lifecycle import Lifecycle
from engine.session import PartRef, Session
from engine.store import open_store, retry


def _open_text(s: Session) -> PartRef:
    lc: Lifecycle = s.lifecycle
    for mid, msg in lc.messages.items():
        for pid, part in msg.parts.items():
            if part.kind == "text" and part.state == "streaming":
                return PartRef(mid, pid)
    mid = s.start_message("assistant")
    return s.add_text(mid)


def crash(url: str, sid: str) -> None:
    store = open_store(url)
    s = Session.open_or_create(store, sid)
    text = _open_text(s)
    out = sys.stdout
    n = 0
    while True:
        n += 1
        seq = s.text_delta(text, f"chunk {n} ")
        out.write(f"{seq}\n")
        out.flush()


def _killer(n: int) -> Callable[..., None]:
    left = [n]

    def step(*_: Any) -> None:
        left[0] -= 1
        if left[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    return step


def point(url: str, sid: str, n: int) -> None:
    step = _killer(n)
    if url.startswith("jsonl:"):
        for name in ("fsync", "replace"):
            real = getattr(os, name)

            def hooked(*args: Any, _real: Any = real) -> Any:
                step()
                return _real(*args)

            setattr(os, name, hooked)
        store = open_store(url)
    else:
        store = open_store(url)  # a schema 2 file migrates at its first write, below
        store.recorder._db.set_trace_callback(step)  # type: ignore[attr-defined]
    s = Session.open_or_create(store, sid)
    text = _open_text(s)
    n = 0
    while True:
        n += 1
        sys.stdout.write(f"{s.text_delta(text, f'chunk {n} ')}\n")
        sys.stdout.flush()


def race(url: str, sid: str, count: int, writer: str) -> None:
    store = open_store(url)
    out = sys.stdout
    for i in range(count):
        def once(i: int = i) -> int:
            s = Session.open(store, sid)  # re-read: the version may have moved
            return s.append([ev.TranscriptNoted(text=f"{writer}-{i}")])[0]

        out.write(f"{retry(once, attempts=200, backoff=0.001)}\n")
        out.flush()
    store.close()


if __name__ == "__main__":
    from engine.logging import configure

    configure("error")  # stdout carries only seqs
    if sys.argv[1] == "crash":
        crash(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "point":
        point(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        race(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
