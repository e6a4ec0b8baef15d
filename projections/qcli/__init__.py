"""Q CLI's conversation state, rebuilt from the event log (see docs/conversation.md).

- :mod:`~projections.qcli.messages`: the seed's message and state structures.
- :mod:`~projections.qcli.as_sent`: ``content_with_context``, truncation, conversions.
- :mod:`~projections.qcli.fold`: the :class:`ConversationFold` over the log.
- :mod:`~projections.qcli.window`: the O(1)-shareable windows its history lives in.
- :mod:`~projections.qcli.limits`: Q CLI's caps and the valid (sendable) history range.
- :mod:`~projections.qcli.timetravel`: :func:`conversation_at`, the fold read from a store.
- :mod:`~projections.qcli.sendable`: the repaired view that would be sent.
- :mod:`~projections.qcli.serialize`: Q CLI's JSON, via cattrs.
"""

from projections.qcli.fold import ConversationFold
from projections.qcli.limits import valid_history_range
from projections.qcli.messages import ConversationState, HistoryEntry, UserMessage
from projections.qcli.sendable import Repair, SendableConversation, sendable
from projections.qcli.serialize import export_qcli, from_json, to_json
from projections.qcli.timetravel import conversation_at

__all__ = [
    "ConversationFold",
    "ConversationState",
    "HistoryEntry",
    "Repair",
    "SendableConversation",
    "UserMessage",
    "conversation_at",
    "export_qcli",
    "from_json",
    "sendable",
    "to_json",
    "valid_history_range",
]
