"""An HTTP error answer as a typed message error (OpenCode's kinds)."""

from __future__ import annotations

from typing import Any

from engine import events as ev

_OVERFLOW = ("context length", "context_length", "too long", "maximum context",
             "context window", "too many tokens")


def _message(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    if isinstance(body, list) and body:  # Gemini sometimes wraps its error in a list
        return _message(body[0])
    return body if isinstance(body, str) else str(body)


def message_error(status: int, body: Any, *, kind: str | None = None) -> ev.MessageError:
    """The error of an answer with HTTP ``status`` and ``body`` (parsed JSON or text)."""
    text = _message(body)[:2000] or f"HTTP {status}"
    if kind is None:
        lowered = text.lower()
        if status in (401, 403):
            kind = "auth"
        elif status in (408, 504):
            kind = "timeout"
        elif status in (400, 413) and any(k in lowered for k in _OVERFLOW):
            kind = "context_overflow"
        else:
            kind = "api"
    retryable = status in (408, 409, 429) or status >= 500 if status else None
    return ev.MessageError(kind=kind, message=text,  # type: ignore[arg-type]
                           status_code=status or None, retryable=retryable)
