"""The seed's common history format (``MessageHistory``): what provider clients convert from.

- user: ``{"role": "user", "content": "<text>"}``
- assistant: ``{"role": "assistant", "content": [{"type": "text", "text": ...},
  {"type": "tool_use", "id": ..., "name": ..., "input": {...}}]}``
- tool results: ``{"role": "user", "content": [{"type": "tool_result",
  "tool_use_id": ..., "tool_name": ..., "content": "<output>"}]}`` (one message
  holds the results of one assistant turn; ``is_error`` marks failures).

Cannot carry: reasoning, files (sent as a note in the text), server tools and
opaque provider blocks, metadata.
"""

from __future__ import annotations

from typing import Any

from projections import views as v
from projections.render import common as c

JSON = dict[str, Any]


def messages(history: list[v.WithParts]) -> list[JSON]:
    out: list[JSON] = []
    for turn in c.turns(history):
        if turn.role == "user":
            text = "\n\n".join(i.text if isinstance(i, c.Text) else c.file_note(i)
                               for i in turn.items if isinstance(i, c.Text | c.File))
            out.append({"role": "user", "content": text})
        elif turn.role == "tool":
            results: list[JSON] = []
            for r in turn.items:
                assert isinstance(r, c.ToolResult)
                item: JSON = {"type": "tool_result", "tool_use_id": r.call_id,
                              "tool_name": r.name, "content": r.output}
                if r.is_error:
                    item["is_error"] = True
                results.append(item)
            out.append({"role": "user", "content": results})
        else:
            blocks: list[JSON] = []
            for i in turn.items:
                if isinstance(i, c.Text):
                    blocks.append({"type": "text", "text": i.text})
                elif isinstance(i, c.File):
                    blocks.append({"type": "text", "text": c.file_note(i)})
                elif isinstance(i, c.ToolCall) and not i.server:
                    blocks.append({"type": "tool_use", "id": i.call_id, "name": i.name,
                                   "input": i.input})
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    return out
