"""Q CLI's conversation state, rebuilt from the event log (see docs/conversation.md).

- :mod:`~projections.qcli.messages`: the seed's message and state structures.
- :mod:`~projections.qcli.render`: ``content_with_context``, truncation, conversions.
- :mod:`~projections.qcli.state`: the :class:`ConversationFold` over the log.
- :mod:`~projections.qcli.sendable`: the repaired view that would be sent.
- :mod:`~projections.qcli.serialize`: Q CLI's JSON, via cattrs.
"""

from projections.qcli.messages import ConversationState, HistoryEntry, UserMessage
from projections.qcli.sendable import Repair, SendableConversation, sendable
from projections.qcli.serialize import export_qcli, from_json, to_json
from projections.qcli.state import ConversationFold, conversation_at, valid_history_range

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
