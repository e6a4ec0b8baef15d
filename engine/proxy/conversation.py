"""A request's conversation, normalized so that two providers' requests compare.

Each API sends the whole conversation with every call (Anthropic ``messages``,
Responses ``input``, Chat ``messages``, Gemini ``contents``). An *entry* is one
element of that list reduced to what identifies it: its role and its keys
(``("text", text)``, ``("call", id, name)``, ``("result", id)``,
``("media", type)``). What a client rewrites between calls without changing the
conversation is left out: cache markers, thinking signatures and reasoning items
(opaque, the provider's), a tool result's content (it depends on the machine the
tool ran on; its call id identifies it), system prompts (kept in the context,
not in the conversation).

:func:`extends` decides session grouping (a request continues a call whose
conversation it extends); :func:`match` decides replay (a recorded call answers a
request whose conversation holds the recorded one's entries in order, with as
many assistant turns; a recorded text matches a request text that holds it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from engine.proxy.routes import ANTHROPIC, CHAT, CONVERSATION_FIELD, GEMINI, RESPONSES

Key = tuple[str, ...]
ASSISTANT_ROLES = frozenset({"assistant", "model"})


@attrs.frozen
class Entry:
    role: str
    keys: tuple[Key, ...]

    @property
    def assistant(self) -> bool:
        return self.role in ASSISTANT_ROLES

    def summary(self) -> str:
        shown = []
        for key in self.keys:
            if key[0] == "text":
                text = key[1]
                shown.append(repr(text if len(text) <= 60 else text[:57] + "..."))
            else:
                shown.append(":".join(key))
        return f"{self.role}[{', '.join(shown)}]"


def conversation(provider: str, body: dict[str, Any]) -> list[Any]:
    """The request's conversation list as sent (a Responses string input is one item)."""
    items = body.get(CONVERSATION_FIELD[provider])
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


def entries(provider: str, items: Sequence[Any]) -> list[Entry]:
    """The normalized entries of a conversation list (items that identify nothing
    are left out)."""
    read = _READERS[provider]
    out = []
    for item in items:
        entry = read(item) if isinstance(item, dict) else None
        if entry is not None:
            out.append(entry)
    return out


def _text_keys(content: Any, *, skip_system: bool = False) -> list[Key]:
    if isinstance(content, str):
        return [("text", content)] if content else []
    keys: list[Key] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type", "")
        text = block.get("text")
        if isinstance(text, str) and kind in ("text", "input_text", "output_text", ""):
            if text:
                keys.append(("text", text))
        elif kind in ("image", "document", "input_image", "input_file", "image_url", "file"):
            keys.append(("media", kind))
    return keys


def _anthropic(item: dict[str, Any]) -> Entry | None:
    role = str(item.get("role", ""))
    content = item.get("content")
    if isinstance(content, str):
        return Entry(role, (("text", content),) if content else ())
    keys: list[Key] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            keys.append(("text", str(block["text"])))
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            keys.append(("call", str(block.get("id", "")), str(block.get("name", ""))))
        elif kind == "tool_result":
            keys.append(("result", str(block.get("tool_use_id", ""))))
        elif kind in ("image", "document"):
            keys.append(("media", str(kind)))
    return Entry(role, tuple(keys))


def _responses(item: dict[str, Any]) -> Entry | None:
    kind = item.get("type", "message")
    if kind == "message":
        return Entry(str(item.get("role", "")), tuple(_text_keys(item.get("content"))))
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        return Entry("assistant", (("call", str(item.get("call_id", "")),
                                    str(item.get("name", kind))),))
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        return Entry("tool", (("result", str(item.get("call_id", ""))),))
    if kind in ("reasoning", "compaction", "compaction_summary"):
        return None
    return Entry(str(kind), ())


def _chat(item: dict[str, Any]) -> Entry | None:
    role = str(item.get("role", ""))
    if role in ("system", "developer"):
        return None
    if role == "tool":
        return Entry("tool", (("result", str(item.get("tool_call_id", ""))),))
    keys = _text_keys(item.get("content"))
    for call in item.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") or {}
            keys.append(("call", str(call.get("id", "")), str(function.get("name", ""))))
    return Entry(role, tuple(keys))


def _gemini(item: dict[str, Any]) -> Entry | None:
    keys: list[Key] = []
    for part in item.get("parts") or ():
        if not isinstance(part, dict) or part.get("thought"):
            continue
        if isinstance(part.get("text"), str) and part["text"]:
            keys.append(("text", part["text"]))
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            keys.append(("call", str(call.get("id") or call.get("name", "")),
                         str(call.get("name", ""))))
        elif isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"]
            keys.append(("result", str(response.get("id") or response.get("name", ""))))
        elif "inlineData" in part or "fileData" in part:
            keys.append(("media", "inlineData" if "inlineData" in part else "fileData"))
    return Entry(str(item.get("role", "user")), tuple(keys))


_READERS = {ANTHROPIC: _anthropic, RESPONSES: _responses, CHAT: _chat, GEMINI: _gemini}


def system_text(provider: str, body: dict[str, Any]) -> str | None:
    """The system prompt as text (blocks joined), or None."""
    if provider == ANTHROPIC:
        return _joined(body.get("system"))
    if provider == RESPONSES:
        return _joined(body.get("instructions"))
    if provider == CHAT:
        parts = [_joined(m.get("content")) for m in body.get("messages") or ()
                 if isinstance(m, dict) and m.get("role") in ("system", "developer")]
        kept = [p for p in parts if p]
        return "\n\n".join(kept) if kept else None
    instruction = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(instruction, dict):
        return _joined(instruction.get("parts"))
    return _joined(instruction)


def _joined(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b.get("text") for b in value if isinstance(b, dict)]
        kept = [t for t in texts if isinstance(t, str)]
        return "\n\n".join(kept) if kept else None
    return None


def extends(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """``new`` holds ``old`` as its prefix (the same conversation, carried on)."""
    return len(new) >= len(old) and list(new[:len(old)]) == list(old)


def common_prefix(old: Sequence[Any], new: Sequence[Any]) -> int:
    n = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        n += 1
    return n


@attrs.frozen
class Match:
    """How far a recorded conversation is found in a request's."""

    matched: int  # recorded entries found, in order
    total: int  # recorded entries
    turns_equal: bool  # as many assistant entries in both
    request_at: int  # the request entry where the recorded one was looked for (or after all)

    @property
    def complete(self) -> bool:
        return self.matched == self.total and self.turns_equal


def _key_holds(got: Key, want: Key) -> bool:
    if want[0] == "text" and got[0] == "text":
        return want[1] in got[1]
    return got == want


def _holds(got: Entry, want: Entry) -> bool:
    """``got`` holds every key of ``want``, in order: a client may add text blocks
    (reminders, environment notes) and text around a prompt (aider appends its
    format reminder), so a recorded text is found in a request text that contains it."""
    if got.role != want.role and not (got.assistant and want.assistant):
        return False
    keys = iter(got.keys)
    return all(any(_key_holds(k, want_key) for k in keys) for want_key in want.keys)


def match(recorded: Sequence[Entry], request: Sequence[Entry]) -> Match:
    """Find ``recorded``'s entries in ``request``, in order.

    An assistant entry of the request is never skipped: every model turn the
    client sends back must be one the recording has (else the conversation took
    another path). User-side entries the recording lacks may be skipped (a client
    adds context messages of its own), so a scripted recording can name only
    what matters.
    """
    i = 0
    matched = 0
    for want in recorded:
        found = False
        begin = i
        while i < len(request):
            got = request[i]
            i += 1
            if _holds(got, want):
                found = True
                break
            if got.assistant:
                i -= 1
                break
        if not found:
            i = begin  # where the request left the recording
            break
        matched += 1
    turns = sum(e.assistant for e in recorded) == sum(e.assistant for e in request)
    return Match(matched, len(recorded), turns, i)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
