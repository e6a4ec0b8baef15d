"""How a message is spelled on the wire (MCP tools, HTTP): the seed's camelCase."""

from __future__ import annotations

from typing import Any

from projections.mailbox.aipm import iso
from projections.mailbox.view import Message


def wire(msg: Message, *, receiver: bool = True) -> dict[str, Any]:
    """A message as the seed's tools and files spell it (camelCase, ISO time)."""
    out: dict[str, Any] = {"id": msg.id, "senderId": msg.sender_id}
    if receiver:
        out["receiverIds"] = list(msg.receivers)
    out["content"] = msg.content
    out["createdAt"] = iso(msg.created_at)
    if msg.related_task_id is not None:
        out["relatedTaskId"] = msg.related_task_id
    if msg.reply_to is not None:
        out["replyTo"] = msg.reply_to
    return out
