"""Folds for :meth:`engine.aio.AsyncSession.subscribe`: the WithParts projection, live.

The engine's subscriptions are generic (a fold is any ``Callable[[Event], S]``);
these give a subscriber the WithParts read model, updated by each event as it is
committed, never re-folded from the log.
"""

from __future__ import annotations

from collections.abc import Callable

from engine import events as ev
from engine.events import Event
from projections import views as v
from projections.withparts import WithPartsProjection


def withparts_fold(session_id: str) -> Callable[[Event], WithPartsProjection]:
    """The live projection itself, O(1) per delta.

    The same object is delivered with every update: a subscriber that lags sees
    it at a later seq (``state.seq >= update.event.seq``). Use
    :func:`message_fold` for an immutable view per update.
    """
    proj = WithPartsProjection(session_id)

    def fold(e: Event) -> WithPartsProjection:
        proj.apply(e)
        return proj

    return fold


def message_fold(session_id: str) -> Callable[[Event], v.WithParts | None]:
    """The frozen WithParts view of the message each event touched (None for others).

    Views are cached per part, but a text part's view is rebuilt after each of
    its deltas (O(text length)): meant for UIs, not for megabyte streams.
    """
    proj = WithPartsProjection(session_id)

    def fold(e: Event) -> v.WithParts | None:
        proj.apply(e)
        if isinstance(e, ev.MessageEvent):
            return proj.message(e.message_id)
        return None

    return fold
