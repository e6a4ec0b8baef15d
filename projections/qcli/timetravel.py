"""The conversation as of any event of a stored session (time travel for Q CLI's view)."""

from __future__ import annotations

from engine.store.base import Store
from projections.qcli.fold import ConversationFold


def conversation_at(store: Store, session_id: str, seq: int | None = None,
                    **caps: int) -> ConversationFold:
    """The conversation as of event ``seq`` (the latest when None): time travel.

    An earlier view (before a compaction, a clear or a restore) stays reachable
    here because the log keeps every event.
    """
    last = store.version(session_id) if seq is None else seq
    return ConversationFold(session_id, **caps).apply_all(store.read(session_id, 1, last))
