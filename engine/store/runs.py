"""Runs: consecutive appends to one part, handed to a reader as one value.

Most of a streamed session is text, reasoning and tool-input deltas, each an
event of a dozen characters. A bulk read (``SQLStore.read_runs``) hands a
fold each stretch of consecutive deltas of one kind to one part as a single
:class:`Run` holding their text joined, instead of one event object per delta.
A fold that reads runs appends ``text`` where it would have appended each
delta, and reaches the same state; one that does not reads events
(``Store.read``).

A run never spans stored blocks, so it is never longer than ``BLOCK_MAX``. A
read that starts or ends inside a block cuts its runs there
(``engine.store.packed_range``), so a run never goes past the seqs asked for
(``at(seq)`` stays exact).
"""

from __future__ import annotations

from typing import Final

import msgspec

from engine import events as ev
from engine.events import Event

# The kinds whose consecutive events to one part form a run: each appends its one
# string field (``delta``, ``fragment``) to the part.
RUN_KINDS: Final[frozenset[type[Event]]] = frozenset(
    {ev.TextDelta, ev.ReasoningDelta, ev.ToolInputDelta})


class Run(msgspec.Struct, frozen=True, gc=False):
    """Events ``first..seq`` of one session: all of type ``kind``, to the same
    message and part, with the default actor and schema version 1. ``text`` is their
    strings joined; ``time`` is the last event's time. ``seq`` is the last seq, as
    an event's is, so a fold that records the seq it has reached needs no case."""

    kind: type[Event]
    message_id: str
    part_id: str
    text: str
    first: int
    seq: int
    time: int

    @property
    def count(self) -> int:
        return self.seq - self.first + 1
