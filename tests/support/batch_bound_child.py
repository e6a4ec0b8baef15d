"""Child of the batched loss-bound test (run as a script).

``URL SESSION BIG``: stream text deltas into one session of a ``batched`` store
forever, every tenth one ``BIG`` bytes long, printing ``seq monotonic-time`` after
each acknowledgement (the clock is system-wide, so the parent can compare it with
the time it sends SIGKILL).
"""

from __future__ import annotations

import sys
import time

from engine.session import Session
from engine.store import open_store


def main(url: str, sid: str, big: int) -> None:
    store = open_store(url)
    s = Session.open_or_create(store, sid)
    text = s.add_text(s.start_message("assistant"))
    out = sys.stdout
    filler = "x" * big
    n = 0
    while True:
        n += 1
        seq = s.text_delta(text, filler if n % 10 == 0 else f"chunk {n} ")
        out.write(f"{seq} {time.monotonic()!r}\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
