"""Which provider API a request path belongs to."""

from __future__ import annotations

import re

import attrs

ANTHROPIC = "anthropic"
RESPONSES = "openai-responses"
CHAT = "openai-chat"
GEMINI = "gemini"
PROVIDERS = (ANTHROPIC, RESPONSES, CHAT, GEMINI)

# The conversation field of each API's request body.
CONVERSATION_FIELD = {ANTHROPIC: "messages", RESPONSES: "input", CHAT: "messages",
                      GEMINI: "contents"}

_GEMINI = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$")


@attrs.frozen
class Route:
    provider: str
    model: str | None = None  # Gemini names the model in the path
    streaming: bool | None = None  # Gemini says it in the path; the others in the body


def route(method: str, path: str) -> Route | None:
    """The model-call route of ``path`` (no query), or None for anything else
    (``HEAD /``, model lists, ...: forwarded, not recorded). A prefix before the
    API's own path (``/v1`` of a base URL, a gateway's) is allowed."""
    if method != "POST":
        return None
    if path.endswith("/v1/messages"):
        return Route(ANTHROPIC)
    if path.endswith("/responses"):
        return Route(RESPONSES)
    if path.endswith("/chat/completions"):
        return Route(CHAT)
    at = path.find("/v1")
    match = _GEMINI.match(path[at:]) if at >= 0 else None
    if match:
        return Route(GEMINI, match.group(1), match.group(2) == "streamGenerateContent")
    return None
