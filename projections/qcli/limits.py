"""Q CLI's size limits on a conversation, and the sendable range they imply."""

from __future__ import annotations

from typing import Final

from projections.qcli import messages as m

MAX_CONVERSATION_STATE_HISTORY_LEN: Final = 10_000
MAX_TRANSCRIPT_LEN: Final = 10_000
# Slots Q CLI reserves for its context messages when it decides the valid range.
CONTEXT_MESSAGE_SLOTS: Final = 6


def valid_history_range(history: tuple[m.HistoryEntry, ...] | list[m.HistoryEntry],
                        cap: int = MAX_CONVERSATION_STATE_HISTORY_LEN) -> tuple[int, int]:
    """The sendable range ``[start, end)``, by Q CLI's rule.

    While ``len * 2 > cap - 6`` the start moves to the next entry whose user
    message carries no tool results (one prompt turn at a time); with none left
    the range is ``(0, 0)``. Q CLI checks once per send and drains the history,
    so repeated sends converge to this fixpoint; convlog never drains, so it
    computes the fixpoint directly.
    """
    start, end = 0, len(history)
    while (end - start) * 2 > cap - CONTEXT_MESSAGE_SLOTS:
        nxt = next((i for i in range(start + 1, end)
                    if not history[i].user.has_tool_use_results()), None)
        if nxt is None:
            return (0, 0)
        start = nxt
    return (start, end)
