"""The sending rules, written once: which parts of a history reach the model, and how.

:func:`turns` applies OpenCode's rules to WithParts messages and returns
provider-neutral turns that every format module renders:

- user text marked ``ignored`` is dropped; empty or whitespace-only text is dropped
  (Anthropic refuses it);
- an assistant message that ended with an error is dropped, except an
  ``aborted`` one that has content (non-empty text or a tool call);
- a pending or running tool is sent as an error result
  ``"[Tool execution was interrupted]"``;
- a completed tool whose output was compacted is sent as
  ``"[Old tool result content cleared]"``;
- step-start, step-finish, snapshot, patch, agent, retry, compaction and subtask
  parts are not sent;
- every tool call gets exactly one result, right after its assistant turn (in a
  ``tool`` turn), and every result has its call; a provider-executed (server)
  tool keeps its result inline in the assistant turn;
- no turn and no result is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import attrs

from projections import views as v

INTERRUPTED: Final = "[Tool execution was interrupted]"
COMPACTED: Final = "[Old tool result content cleared]"
EMPTY_RESULT: Final = "(no output)"

JSON = dict[str, Any]


def provider_data(metadata: JSON | None, name: str) -> JSON:
    """One provider's slice of a part's metadata (signature, ids, blocks), or {}."""
    data = (metadata or {}).get(name)
    return data if isinstance(data, dict) else {}


@attrs.frozen
class Text:
    text: str
    metadata: JSON | None = None


@attrs.frozen
class Reasoning:
    text: str
    metadata: JSON | None = None

    def provider(self, name: str) -> JSON:
        """This reasoning's data for one provider (signature, redacted data, ids)."""
        return provider_data(self.metadata, name)


@attrs.frozen
class File:
    mime: str
    url: str
    filename: str | None = None


@attrs.frozen
class ToolCall:
    call_id: str
    name: str
    input: JSON
    raw: str | None = None  # the arguments as the model wrote them, when it wrote any
    server: bool = False  # executed by the provider; its result is an Opaque item
    metadata: JSON | None = None


@attrs.frozen
class ToolResult:
    call_id: str
    name: str
    output: str
    is_error: bool = False


@attrs.frozen
class Opaque:
    """A provider block convlog keeps whole (only that provider's format sends it)."""

    provider: str
    block: JSON


Item = Text | Reasoning | File | ToolCall | ToolResult | Opaque


@attrs.frozen
class Turn:
    role: Literal["user", "assistant", "tool"]
    items: tuple[Item, ...]


def tool_result(part: v.ToolPart) -> ToolResult:
    """The result a tool part is sent with, by the rules above."""
    s = part.state
    if isinstance(s, v.ToolStateCompleted):
        if s.time.compacted is not None:
            return ToolResult(part.call_id, part.tool, COMPACTED)
        return ToolResult(part.call_id, part.tool, s.output or EMPTY_RESULT)
    if isinstance(s, v.ToolStateError):
        return ToolResult(part.call_id, part.tool, s.error or EMPTY_RESULT, is_error=True)
    return ToolResult(part.call_id, part.tool, INTERRUPTED, is_error=True)


def truncated(p: v.ToolPart) -> bool:
    """The call's arguments were cut short by a token limit (it never ran)."""
    state = p.state
    return isinstance(state, v.ToolStateError) and state.metadata is not None \
        and state.metadata.get("kind") == "truncated"


def _server(part: v.ToolPart) -> bool:
    meta = part.metadata or {}
    return any(isinstance(d, dict) and d.get("server") for d in meta.values())


def _opaque(part: v.TextPart) -> Opaque | None:
    for provider, data in (part.metadata or {}).items():
        if isinstance(data, dict) and isinstance(data.get("block"), dict):
            return Opaque(provider, data["block"])
    return None


def user_items(wp: v.WithParts) -> list[Item]:
    items: list[Item] = []
    for p in wp.parts:
        if isinstance(p, v.TextPart):
            if not p.ignored and p.text.strip():
                items.append(Text(p.text, p.metadata))
        elif isinstance(p, v.FilePart):
            items.append(File(p.mime, p.url, p.filename))
    return items


def assistant_items(wp: v.WithParts) -> tuple[list[Item], list[ToolResult]]:
    """The assistant turn's items and the results that follow it."""
    items: list[Item] = []
    results: list[ToolResult] = []
    for p in wp.parts:
        if isinstance(p, v.TextPart):
            if p.ignored:
                opaque = _opaque(p)
                if opaque is not None:
                    items.append(opaque)
            elif p.text.strip():
                items.append(Text(p.text, p.metadata))
        elif isinstance(p, v.ReasoningPart):
            items.append(Reasoning(p.text, p.metadata))
        elif isinstance(p, v.ToolPart):
            raw = p.state.raw if isinstance(p.state, v.ToolStatePending) else (
                None if truncated(p) else p.raw)  # cut-off text is not sent back
            server = _server(p)
            items.append(ToolCall(p.call_id, p.tool, dict(p.state.input), raw or None, server,
                                  p.metadata))
            if not server:
                results.append(tool_result(p))
        elif isinstance(p, v.FilePart):
            items.append(File(p.mime, p.url, p.filename))
    return items, results


def _has_content(items: Iterable[Item]) -> bool:
    return any(isinstance(i, Text | ToolCall) for i in items)  # Text is never blank


def turns(messages: Sequence[v.WithParts]) -> list[Turn]:
    """The history as it is sent, by the rules of this module."""
    out: list[Turn] = []
    for wp in messages:
        info = wp.info
        if isinstance(info, v.UserInfo):
            items = user_items(wp)
            if items:
                out.append(Turn("user", tuple(items)))
            continue
        a_items, results = assistant_items(wp)
        if info.error is not None and not (info.error.kind == "aborted"
                                           and _has_content(a_items)):
            continue
        if not a_items:
            continue
        out.append(Turn("assistant", tuple(a_items)))
        if results:
            out.append(Turn("tool", tuple(results)))
    return out


def merge_adjacent(messages: list[JSON], key: str = "role", items: str = "content"
                   ) -> list[JSON]:
    """Merge consecutive messages of one role (their ``items`` lists concatenate)."""
    merged: list[JSON] = []
    for m in messages:
        if merged and merged[-1][key] == m[key]:
            merged[-1] = {**merged[-1], items: [*merged[-1][items], *m[items]]}
        else:
            merged.append(m)
    return merged


def data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:...;base64,`` URL, else None."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def file_note(f: File) -> str:
    """The text a format sends for a file it cannot attach."""
    return f"[file {f.filename or f.url} ({f.mime})]"
