"""Bulk replay: what a fold that reads runs is fed from a store.

A block store hands consecutive deltas to one part as one
:class:`~engine.store.runs.Run` (``read_runs``); any other store hands events
(``read``). A fold fed by :func:`read_bulk` must fold a ``Run`` as the deltas it
joins (``WithPartsProjection`` does); a fold that does not reads ``store.read``.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.collector import collector_paused
from engine.events import Event
from engine.store.base import Store
from engine.store.runs import Run

__all__ = ["collector_paused", "read_bulk"]  # the pause lives in engine.collector


def read_bulk(store: Store, session_id: str, first: int = 1,
              last: int | None = None, *, ids: bool = True) -> Iterator[Event | Run]:
    """Events ``first..last`` of the session (through its fork lineage), with runs of
    deltas as :class:`Run` where the store reads them in bulk. ``ids=False``: the
    fold never reads an event's id, so the store may leave them out (``""``)."""
    read_runs = getattr(store, "read_runs", None)
    if read_runs is None:
        return iter(store.read(session_id, first, last))
    runs: Iterator[Event | Run] = (read_runs(session_id, first, last) if ids
                                   else read_runs(session_id, first, last, ids=False))
    return runs


