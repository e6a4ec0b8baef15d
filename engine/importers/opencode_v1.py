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

from typing import Any

from engine.importers.base import ImportReport


def is_v1(info: dict[str, Any]) -> bool:
    return (isinstance(info.get("parts"), list) and isinstance(info.get("metadata"), dict)
            and "time" not in info)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tool(pid: str, block: dict[str, Any], calls: dict[str, Any], created: int,
          report: ImportReport) -> dict[str, Any]:
    call = _obj(block.get("toolInvocation"))
    call_id = str(call.get("toolCallId") or pid)
    meta = _obj(calls.get(call_id))
    times = _obj(meta.get("time"))
    start = times.get("start") if isinstance(times.get("start"), int) else created
    args = call.get("args")
    state: dict[str, Any]
    if call.get("state") == "result":
        state = {"status": "completed", "input": _obj(args),
                 "output": str(call.get("result") or ""), "title": str(meta.get("title") or ""),
                 "metadata": {k: v for k, v in meta.items() if k not in ("title", "time")},
                 "time": {"start": start, "end": times.get("end") if isinstance(
                     times.get("end"), int) else start}}
    elif call.get("state") == "call":
        state = {"status": "running", "input": _obj(args), "time": {"start": start}}
    else:  # partial-call: the arguments were still streaming
        if call.get("state") != "partial-call":
            report.note(f"a first-format tool state {call.get('state')!r}: left pending")
        state = {"status": "pending", "input": {}}
    return {"id": pid, "type": "tool", "callID": call_id,
            "tool": str(call.get("toolName") or "unknown"), "state": state}


def v1_message(info: dict[str, Any], report: ImportReport
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A first-format message as the later message info and its parts."""
    meta = _obj(info.get("metadata"))
    mid = str(info.get("id") or "")
    times = _obj(meta.get("time"))
    found = times.get("created")
    created = found if isinstance(found, int) else 1
    out: dict[str, Any] = {"id": mid, "role": info.get("role"), "time": times}
    if "sessionID" in meta:
        out["sessionID"] = meta["sessionID"]
    if meta.get("error") is not None:
        out["error"] = meta["error"]
    assistant = _obj(meta.get("assistant"))
    for key in ("modelID", "providerID", "path", "cost", "tokens"):
        if key in assistant:
            out[key] = assistant[key]
    # What the later info has no field for, kept (export gives it back) under "v1".
    rest = {k: v for k, v in assistant.items()
            if k not in ("modelID", "providerID", "path", "cost", "tokens")}
    if meta.get("snapshot") is not None:
        rest["snapshot"] = meta["snapshot"]
    if rest:
        out["v1"] = rest
    calls = _obj(meta.get("tool"))
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(info["parts"]):
        pid = f"{mid}-{i:04d}"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict):
            report.note("a first-format part that is not an object: not imported")
        elif kind == "text":
            parts.append({"id": pid, "type": "text", "text": str(block.get("text") or "")})
        elif kind == "reasoning":
            part = {"id": pid, "type": "reasoning", "text": str(block.get("text") or ""),
                    "time": {"start": created, "end": created}}
            if isinstance(block.get("providerMetadata"), dict):
                part["metadata"] = block["providerMetadata"]
            parts.append(part)
        elif kind == "tool-invocation":
            parts.append(_tool(pid, block, calls, created, report))
        elif kind == "file":
            parts.append({"id": pid, "type": "file",
                          "mime": str(block.get("mediaType") or "application/octet-stream"),
                          "url": str(block.get("url") or ""),
                          **({"filename": block["filename"]}
                             if isinstance(block.get("filename"), str) else {})})
        elif kind == "step-start":  # the first format writes no step-finish to close it
            report.note("a first-format step-start: not imported (no step-finish closes it)")
        else:
            report.note(f"a first-format part {kind!r}: not imported")
    return out, parts
