"""Llama chat messages (the seed's conversion): plain ``role`` / ``content`` strings.

A tool result is a user message whose content is the JSON string
``{"tool_result": {"name": ..., "result": ...}}``, one message per result (the
seed's converter reads one result per message). An assistant's tool call is a
line ``{"name": ..., "parameters": {...}}`` in its content (Llama 3's JSON tool
calling). Cannot carry: call ids (results follow their calls in order), error
flags (a failed result's text is prefixed ``Error: ``), reasoning, files (sent as
a note), server tools and opaque blocks, metadata.
"""

from __future__ import annotations

import json
from typing import Any

from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


def messages(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    for turn in c.turns(history):
        if turn.role == "tool":
            for r in turn.items:
                assert isinstance(r, c.ToolResult)
                result = f"Error: {r.output}" if r.is_error else r.output
                # json.dumps with its defaults, as the seed's converter writes it: non-ASCII
                # is escaped (\uXXXX), so the string is byte for byte the seed's.
                out.append({"role": "user", "content": json.dumps(
                    {"tool_result": {"name": r.name, "result": result}})})
            continue
        lines: list[str] = []
        for i in turn.items:
            if isinstance(i, c.Text):
                lines.append(i.text)
            elif isinstance(i, c.File):
                lines.append(c.file_note(i))
            elif isinstance(i, c.ToolCall) and not i.server:
                lines.append(json.dumps({"name": i.name, "parameters": i.input},
                                        ensure_ascii=False))
        text = "\n".join(lines)
        if text:
            out.append({"role": turn.role, "content": text})
    return out
