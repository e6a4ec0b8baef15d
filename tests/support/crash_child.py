"""Child process of the crash and concurrency tests (run as a script).

``crash URL SESSION``: append text deltas to one open message forever, printing
each acknowledged seq on stdout, until killed.
``race URL SESSION N WRITER``: append N events through ``engine.store.retry``,
each from a freshly opened session, and print the seqs it got.
"""

from __future__ import annotations

import sys

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
    else:
        race(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
