"""OpenCode's newer message table, ``session_message``, read as the ``{info, parts}`` messages
the rest of the OpenCode importer maps.

Newer OpenCode versions record a session as rows of ``session_message(id, session_id, type,
seq, time_created, data)`` (``SessionMessage.Message`` in ``packages/core/src/session/
message.ts``; ``data`` leaves out ``id`` and ``type``) and backfill older sessions from
``message``/``part`` once. A row's ``type`` is one of ``user {text, files, agents,
references}``, ``synthetic {text}``, ``system {text}``, ``shell {callID, command, output}``,
``assistant {agent, model, content: [text | reasoning | tool], finish, cost, tokens, error}``,
``compaction {status?, reason, summary, recent}``, ``skill {skill, name, text}``, ``idle``
(a turn's end), ``agent-switched``, ``model-switched``, ``location-switched``. Each becomes
the message OpenCode's older tables would hold for it (part ids ``<row id>-<n>`` keep the
content's order); what has no such message (a switch of agent or model, a prompt's agent
mentions and references) is reported.
"""

from __future__ import annotations

import json
from typing import Any, Final

from engine.importers.base import ImportReport

Message = tuple[dict[str, Any], list[dict[str, Any]]]
_SWITCHES: Final = {"agent-switched": "agent", "model-switched": "model",
                    "location-switched": "location"}


def _native(block: dict[str, Any]) -> dict[str, Any] | None:
    """A part's provider state: ``native`` (newest), ``providerMetadata`` or ``state``
    (the names rows written before the rename carry)."""
    for key in ("native", "providerMetadata", "providerState", "state"):
        if isinstance(block.get(key), dict):
            found: dict[str, Any] = block[key]
            return found
    return None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ms(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0  # not a bool


def _text_of(content: Any) -> str:
    """The text of a tool's ``content`` (``[{type: "text", text}, ...]``) or a string."""
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else []
    return "\n".join(str(c.get("text") or "") for c in items
                     if isinstance(c, dict) and isinstance(c.get("text"), str))


def _shell_output(output: Any) -> str:
    """A shell row's output: a string, or (newer) an object whose text field is taken when
    it has one, its JSON otherwise (never a repr)."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        for key in ("text", "output", "stdout"):
            if isinstance(output.get(key), str):
                return str(output[key])
    return _text_of(output) or ("" if output is None else json.dumps(output))


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        for key in ("message", "name", "type"):
            if isinstance(error.get(key), str) and error[key]:
                return str(error[key])
        return json.dumps(error)
    return str(error or "error")


def _tool_state(state: Any, start: int, end: int) -> dict[str, Any]:
    """A V2 ``ToolState`` as the older tool part's state."""
    state = state if isinstance(state, dict) else {}
    status = state.get("status")
    raw_input = state.get("input")
    args = raw_input if isinstance(raw_input, dict) else {}
    times = {"start": start} | ({"end": end} if end else {})
    meta = {k: state[k] for k in ("structured", "result", "outputPaths")
            if state.get(k) is not None}
    if isinstance(state.get("metadata"), dict):
        meta |= state["metadata"]
    if status in ("pending", "streaming"):  # the arguments still streaming (a JSON string)
        return {"status": "pending", "input": {},
                "raw": raw_input if isinstance(raw_input, str) else ""}
    if status == "running":
        return {"status": "running", "input": args, "time": {"start": start},
                "metadata": meta}
    if status == "completed":
        return {"status": "completed", "input": args, "output": _text_of(state.get("content")),
                "title": "", "metadata": meta, "time": times,
                "attachments": [a for a in _list(state.get("attachments"))
                                if isinstance(a, dict)]}
    if status == "error":
        return {"status": "error", "input": args, "error": _error_text(state.get("error")),
                "metadata": meta, "time": times}
    return {"status": str(status), "input": args}


def _assistant(mid: str, data: dict[str, Any], created: int, report: ImportReport
               ) -> list[dict[str, Any]]:
    completed = _ms(_obj(data.get("time")).get("completed"))
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(_list(data.get("content"))):
        pid = f"{mid}-{i:04d}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            part: dict[str, Any] = {
                "id": pid, "type": "text", "text": str(block.get("text") or ""),
                "time": {"start": created} | ({"end": completed} if completed else {})}
            for flag in ("synthetic", "ignored"):
                if block.get(flag):
                    part[flag] = True
            parts.append(part)
        elif kind == "reasoning":
            part = {"id": pid, "type": "reasoning", "text": str(block.get("text") or ""),
                    "time": {"start": created} | ({"end": completed} if completed else {})}
            native = _native(block)
            if native is not None:  # the provider's state: a thinking block's signature
                part["metadata"] = native
            parts.append(part)
        elif kind == "tool":
            times = _obj(block.get("time"))
            start = _ms(times.get("ran")) or _ms(times.get("created")) or created
            state = _tool_state(block.get("state"), start, _ms(times.get("completed")))
            if _ms(times.get("pruned")):
                state.setdefault("time", {})["compacted"] = _ms(times["pruned"])
            part = {"id": pid, "type": "tool", "callID": str(block.get("id") or pid),
                    "tool": str(block.get("name") or "unknown"), "state": state}
            provider = {k: block[k] for k in ("provider", "executed", "native",
                                              "providerResultState", "providerState")
                        if block.get(k) is not None}
            if provider:
                part["metadata"] = provider
            parts.append(part)
        else:
            report.note(f"a session_message assistant content {kind!r}: not imported")
    return parts


def v2_messages(rows: list[tuple[str, str, dict[str, Any]]], report: ImportReport
                ) -> list[Message]:
    """``(id, type, data)`` rows of one session, in their ``seq`` order, as messages."""
    out: list[Message] = []
    last_user = ""
    for mid, kind, data in rows:
        created = _ms(_obj(data.get("time")).get("created")) or 1
        info: dict[str, Any] = {"id": mid, "time": {"created": created}}
        parts: list[dict[str, Any]] = []
        if kind in _SWITCHES:
            report.note(f"a session_message {kind} ({_SWITCHES[kind]} changed): not imported")
            continue
        if kind == "idle":  # a turn's end marker: no content
            report.note("a session_message idle (the end of a turn): nothing to import")
            continue
        if kind in ("user", "synthetic", "system", "skill"):
            info["role"] = "user"
            text: dict[str, Any] = {"id": f"{mid}-0000", "type": "text",
                                    "text": str(data.get("text") or "")}
            if kind != "user":
                text["synthetic"] = True
            extra = {k: data[k] for k in ("description", "skill", "name") if k in data}
            if extra:
                text["metadata"] = {"opencode": {"type": kind, **extra}}
            parts.append(text)
            for i, f in enumerate(_list(data.get("files"))):
                if isinstance(f, dict) and (f.get("url") or f.get("uri")):
                    parts.append({"id": f"{mid}-{i + 1:04d}", "type": "file",
                                  "mime": str(f.get("mime") or f.get("mediaType")
                                              or "application/octet-stream"),
                                  "url": str(f.get("url") or f.get("uri")),
                                  "filename": next((str(f[k]) for k in ("filename", "name")
                                                    if isinstance(f.get(k), str)), None)})
                else:
                    report.note("a session_message user file without a url: not imported")
            for key in ("agents", "references", "skills"):
                if data.get(key):
                    report.note(f"a session_message user {key}: not imported")
            if kind == "user":
                last_user = mid
        elif kind == "shell":  # the user's own shell command (! in the prompt) and its output
            info["role"] = "user"
            end = _ms(_obj(data.get("time")).get("completed"))
            output = data.get("output")
            parts.append({"id": f"{mid}-0000", "type": "tool",
                          "callID": str(data.get("callID") or data.get("shellID") or mid),
                          "tool": "bash",
                          "state": {"status": "completed" if end else "running",
                                    "input": {"command": str(data.get("command") or "")},
                                    "output": _shell_output(output),
                                    "title": "",
                                    "metadata": {k: data[k] for k in ("exit", "status")
                                                 if k in data},
                                    "time": {"start": created} | ({"end": end} if end else {})}})
            if not end:
                report.note("a session_message shell command without an end: left running")
        elif kind == "compaction":
            info["role"] = "user"
            parts.append({"id": f"{mid}-0000", "type": "compaction",
                          "auto": data.get("reason") == "auto"})
            if data.get("status") == "failed":
                report.note("a session_message compaction that failed: kept as a compaction "
                            f"({_error_text(data.get('error'))})")
            for i, key in enumerate(("summary", "recent")):
                if data.get(key):
                    parts.append({"id": f"{mid}-{i + 1:04d}", "type": "text", "synthetic": True,
                                  "text": str(data[key])})
        elif kind == "assistant":
            found = data.get("model")
            model: dict[str, Any] = found if isinstance(found, dict) else {}
            completed = _ms(_obj(data.get("time")).get("completed"))
            info |= {"role": "assistant", "agent": str(data.get("agent") or ""),
                     "modelID": model.get("id") or model.get("modelID"),
                     "providerID": model.get("providerID"), "parentID": last_user or None}
            if completed:
                info["time"]["completed"] = completed
            for key in ("cost", "tokens", "finish"):
                if data.get(key) is not None:
                    info[key] = data[key]
            if data.get("error") is not None:
                error = data["error"]
                info["error"] = {"name": str(error.get("name") or "UnknownError"),
                                 "data": {"message": _error_text(error)}} if isinstance(
                                     error, dict) else {"name": "UnknownError",
                                                        "data": {"message": str(error)}}
            info = {k: v for k, v in info.items() if v is not None}
            parts = _assistant(mid, data, created, report)
        else:
            report.note(f"a session_message of type {kind!r}: not imported")
            continue
        out.append((info, parts))
    return out
