"""A call's context: the request recorded as a user message, and read back whole.

Each model call is a user message whose ``metadata.proxy`` holds the request
(secrets dropped), followed by the assistant message the response streams into
(``parent_id`` = the context message). Clients resend the whole conversation
and the same system prompt and tools with every call, so a context that
continues an earlier call of its session stores only what changed:
``base`` names the earlier context message, ``keep`` how many of its
conversation items this request repeats, and ``same`` the request fields equal
to its (the conversation field then holds only the new items).
:func:`full_requests` puts every request of a log back together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine import events as ev
from engine.proxy.routes import CONVERSATION_FIELD

JSON = dict[str, Any]
KEY = "proxy"


def delta_request(provider: str, body: JSON, base: JSON | None, keep: int) -> JSON:
    """What to store of ``body`` given the full ``base`` request it continues."""
    if base is None:
        return {"request": body}
    field = CONVERSATION_FIELD[provider]
    stored: JSON = {}
    same = []
    for name, value in body.items():
        if name == field:
            continue
        if name in base and base[name] == value:
            same.append(name)
        else:
            stored[name] = value
    items = body.get(field)
    if isinstance(items, list):
        stored[field] = items[keep:]
    elif field in body:
        stored[field] = items
        keep = 0
    return {"request": stored, "keep": keep, "same": same}


def rebuild(provider: str, record: JSON, base: JSON | None) -> JSON:
    """The full request from a stored context and its base's full request."""
    stored: JSON = record.get("request") or {}
    if base is None or "keep" not in record:
        return dict(stored)
    field = CONVERSATION_FIELD[provider]
    body = {name: base[name] for name in record.get("same") or () if name in base}
    body.update(stored)
    items = stored.get(field)
    if isinstance(items, list):
        prior = base.get(field)
        prior_items = prior if isinstance(prior, list) else []
        body[field] = prior_items[:record["keep"]] + items
    return body


def is_context(event: Any) -> bool:
    return (isinstance(event, ev.MessageStarted) and event.role == "user"
            and isinstance(event.metadata, dict) and KEY in event.metadata)


def full_requests(events: Iterable[Any]) -> dict[str, JSON]:
    """Every context message of a log (message id -> its proxy record, with
    ``request`` the full request)."""
    out: dict[str, JSON] = {}
    for event in events:
        if not is_context(event):
            continue
        record = dict(event.metadata[KEY])
        base_id = record.get("base")
        base = out[base_id]["request"] if base_id in out else None
        record["request"] = rebuild(record["provider"], record, base)
        out[event.message_id] = record
    return out
