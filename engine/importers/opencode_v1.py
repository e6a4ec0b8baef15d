"""OpenCode's first message format (0.x, mid 2025), read as the later ``{info, parts}``.

A first-format message keeps its parts inside: ``{id, role, parts, metadata: {time,
error, sessionID, tool: {<call id>: {title, time: {start, end}, ...}}, assistant: {system,
modelID, providerID, path, cost, summary, tokens}, snapshot}}`` (``Message`` in OpenCode's
``session/message.ts``). Its parts: ``text``, ``reasoning``, ``tool-invocation
{toolInvocation: {state: call | partial-call | result, toolCallId, toolName, args,
result}}``, ``file {mediaType, url, filename}``; ``step-start`` (no step-finish closes it)
and ``source-url`` are reported. Such messages are still on disk where OpenCode's storage
migration skipped a project. The converted parts get ids ``<message id>-<n>`` in order.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from engine.importers.base import ImportReport

# The shapes read (OpenCode 0.x, session/message.ts). Lenient as OpenCode's own reader:
# unknown fields are ignored, missing ones default. A field of another type is a shape
# error naming its path (msgspec's ValidationError: ``at `$.parts[0].text```).
# What is given back whole (a tool's metadata, the assistant's extra fields, the
# message times) stays a dict.


class _Times(msgspec.Struct):
    start: Any = None  # an int where OpenCode wrote one; else the message's time
    end: Any = None


class _ToolMeta(msgspec.Struct):
    title: str | None = None
    time: _Times = msgspec.field(default_factory=_Times)


class _Invocation(msgspec.Struct):
    state: str | None = None  # call | partial-call | result
    toolCallId: str | None = None  # noqa: N815 - OpenCode's spelling
    toolName: str | None = None  # noqa: N815
    args: dict[str, Any] | None = None
    result: Any = None


class _Block(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    providerMetadata: Any = None  # noqa: N815
    toolInvocation: _Invocation = msgspec.field(default_factory=_Invocation)  # noqa: N815
    mediaType: str | None = None  # noqa: N815
    url: str | None = None
    filename: Any = None


class _Created(msgspec.Struct):
    created: Any = None


class _Meta(msgspec.Struct):
    time: dict[str, Any] = msgspec.field(default_factory=dict)
    error: Any = None
    sessionID: Any = msgspec.UNSET  # noqa: N815 - kept only when present
    tool: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    assistant: dict[str, Any] = msgspec.field(default_factory=dict)
    snapshot: Any = None


class _Message(msgspec.Struct):
    id: str | None = None
    role: Any = None
    parts: list[Any] = msgspec.field(default_factory=list)
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_CARRIED: Final = ("modelID", "providerID", "path", "cost", "tokens")  # into the later info


def is_v1(info: dict[str, Any]) -> bool:
    return ("time" not in info and isinstance(info.get("parts"), list)
            and isinstance(info.get("metadata"), dict))


def _tool(pid: str, block: _Block, calls: dict[str, dict[str, Any]], created: int,
          report: ImportReport) -> dict[str, Any]:
    call = block.toolInvocation
    call_id = call.toolCallId or pid
    kept = calls.get(call_id) or {}
    meta = msgspec.convert(kept, _ToolMeta)
    start = meta.time.start if isinstance(meta.time.start, int) else created
    state: dict[str, Any]
    if call.state == "result":
        state = {"status": "completed", "input": call.args or {},
                 "output": str(call.result or ""), "title": meta.title or "",
                 "metadata": {k: v for k, v in kept.items() if k not in ("title", "time")},
                 "time": {"start": start, "end": meta.time.end if isinstance(
                     meta.time.end, int) else start}}
    elif call.state == "call":
        state = {"status": "running", "input": call.args or {}, "time": {"start": start}}
    else:  # partial-call: the arguments were still streaming
        if call.state != "partial-call":
            report.note(f"a first-format tool state {call.state!r}: left pending")
        state = {"status": "pending", "input": {}}
    return {"id": pid, "type": "tool", "callID": call_id,
            "tool": call.toolName or "unknown", "state": state}


def v1_message(info: dict[str, Any], report: ImportReport
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A first-format message as the later message info and its parts."""
    message = msgspec.convert(info, _Message)
    meta = message.metadata
    mid = message.id or ""
    found = msgspec.convert(meta.time, _Created).created
    created = found if isinstance(found, int) else 1
    out: dict[str, Any] = {"id": mid, "role": message.role, "time": meta.time}
    if meta.sessionID is not msgspec.UNSET:
        out["sessionID"] = meta.sessionID
    if meta.error is not None:
        out["error"] = meta.error
    out.update({k: meta.assistant[k] for k in _CARRIED if k in meta.assistant})
    # What the later info has no field for, kept (export gives it back) under "v1".
    rest = {k: v for k, v in meta.assistant.items() if k not in _CARRIED}
    if meta.snapshot is not None:
        rest["snapshot"] = meta.snapshot
    if rest:
        out["v1"] = rest
    parts: list[dict[str, Any]] = []
    for i, raw in enumerate(message.parts):
        pid = f"{mid}-{i:04d}"
        if not isinstance(raw, dict):
            report.note("a first-format part that is not an object: not imported")
            continue
        block = msgspec.convert(raw, _Block)
        kind = block.type
        if kind == "text":
            parts.append({"id": pid, "type": "text", "text": block.text or ""})
        elif kind == "reasoning":
            part = {"id": pid, "type": "reasoning", "text": block.text or "",
                    "time": {"start": created, "end": created}}
            if isinstance(block.providerMetadata, dict):
                part["metadata"] = block.providerMetadata
            parts.append(part)
        elif kind == "tool-invocation":
            parts.append(_tool(pid, block, meta.tool, created, report))
        elif kind == "file":
            parts.append({"id": pid, "type": "file",
                          "mime": block.mediaType or "application/octet-stream",
                          "url": block.url or "",
                          **({"filename": block.filename}
                             if isinstance(block.filename, str) else {})})
        elif kind == "step-start":  # the first format writes no step-finish to close it
            report.note("a first-format step-start: not imported (no step-finish closes it)")
        else:
            report.note(f"a first-format part {kind!r}: not imported")
    return out, parts
