"""Agent-to-agent messages: the Python API, the read-side fold, the seed's file layout."""

from projections.mailbox.mailbox import MAILBOX_SESSION, Mailbox, MailboxLog
from projections.mailbox.view import MailboxView, Message

__all__ = ["MAILBOX_SESSION", "Mailbox", "MailboxLog", "MailboxView", "Message"]
