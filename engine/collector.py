"""Python's cyclic garbage collector paused while a large state is built.

A fold replaying a log and an import reading a transcript only ever add to what
they build: a collection meanwhile frees nothing of it and each full one walks all
of it. The write side (imports) and the read side (projections) pause it the same
way, so the one definition lives here, in the engine, which projections may import.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# How many pauses are open (a replay, an import, nested or in other threads), and
# whether the collector was on before the first of them (the last one to finish turns
# it back on only then).
_paused = [0, False]
_pause_lock = threading.Lock()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a fold builds its state, and back
    as it was on every way out (nested and concurrent uses included).

    A fold's state is only ever added to while it replays: a collection then frees
    nothing of it, but each full one walks all of it (at a million events, a state of
    85 MB and about 0.1 s per walk, its objects scattered through memory). With the
    collector off, no collection runs over a half-built state. The collector is
    process-wide: another thread's cyclic garbage also waits for the end of the
    replay, and a thread that turns the collector off meanwhile has it turned back
    on then.

    On the way out, what was made meanwhile moves to the oldest generation without
    a walk (``gc.freeze()`` then ``gc.unfreeze()``: two list splices): left to the
    collector, its first young collection would walk the whole new state to move it
    to the middle generation, and one a few thousand allocations later would walk it
    all again, to find nothing (a state only grows while it is built): two walks,
    about 10% of a fresh ``at(store, id).messages()``. Young cyclic garbage (made
    during the pause, or just before it) then waits for the next full collection.
    Not done while the program keeps objects frozen itself (``gc.get_freeze_count()``):
    unfreezing would hand them back to the collector."""
    with _pause_lock:
        if not _paused[0]:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _paused[0] -= 1
            if not _paused[0] and _paused[1]:
                if not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
