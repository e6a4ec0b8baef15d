"""Gemini ``contents``: roles ``user`` and ``model``, ``function_call`` / ``function_response``.

Tool results are ``function_response`` parts of a user content (``{"result": output}``,
or ``{"error": text}`` for a failed call), carrying the call's name and id.
Adjacent contents of one role merge. Cannot carry: reasoning and thought
signatures, server tools and opaque blocks of other providers, files that are
neither data URLs nor URIs Gemini can fetch (sent as ``file_data``), metadata.
"""

from __future__ import annotations

from typing import Any

from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


def _file(f: c.File) -> JSON:
    decoded = c.data_url(f.url)
    if decoded is not None:
        return {"inline_data": {"mime_type": decoded[0], "data": decoded[1]}}
    return {"file_data": {"mime_type": f.mime, "file_uri": f.url}}


def contents(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    for turn in c.turns(history):
        parts: list[JSON] = []
        for i in turn.items:
            if isinstance(i, c.Text):
                parts.append({"text": i.text})
            elif isinstance(i, c.File):
                parts.append(_file(i))
            elif isinstance(i, c.ToolCall) and not i.server:
                parts.append({"function_call": {"id": i.call_id, "name": i.name,
                                                "args": i.input}})
            elif isinstance(i, c.ToolResult):
                body = {"error": i.output} if i.is_error else {"result": i.output}
                parts.append({"function_response": {"id": i.call_id, "name": i.name,
                                                    "response": body}})
        if parts:
            out.append({"role": "model" if turn.role == "assistant" else "user",
                        "parts": parts})
    return c.merge_adjacent(out, items="parts")
