"""What is never stored: credentials in headers and in the query string.

The proxy forwards them to the upstream unchanged (the client needs them to
work) but drops them before anything reaches the recorder, so no event, log
line or error report can hold one.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode

SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key",
    "cookie", "set-cookie",
})
# Gemini accepts its key as ``?key=``.
SECRET_PARAMS = frozenset({"key", "api_key", "access_token"})


def safe_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The headers worth recording, lowercased; secrets dropped (repeated ones joined)."""
    kept: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in SECRET_HEADERS:
            continue
        value = raw_value.decode("latin-1")
        kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept


def safe_query(query: str) -> str:
    """The query string without credential parameters."""
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if k.lower() not in SECRET_PARAMS])
