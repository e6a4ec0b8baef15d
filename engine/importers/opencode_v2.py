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

import msgspec

from engine.importers.base import ImportReport

Message = tuple[dict[str, Any], list[dict[str, Any]]]
_SWITCHES: Final = {"agent-switched": "agent", "model-switched": "model",
                    "location-switched": "location"}
_UNSET: Final = msgspec.UNSET

# The shapes read, as msgspec Structs converted once per row (a field of another type
# is a shape error naming its path). Lenient as OpenCode is across its versions: unknown
# fields ignored, missing ones defaulted, and where rows of several versions spell a
# field differently (``url``/``uri``, ``mime``/``mediaType``, a number or a string) the
# field takes any JSON value and the reader picks what it understands. UNSET marks a
# field kept only when the row has it.


class _Time(msgspec.Struct):
    created: Any = None
    completed: Any = None
    ran: Any = None
    pruned: Any = None


class _File(msgspec.Struct):
    url: Any = None
    uri: Any = None
    mime: Any = None
    mediaType: Any = None  # noqa: N815 - OpenCode's spelling
    filename: Any = None
    name: Any = None


class _Model(msgspec.Struct):
    id: Any = None
    modelID: Any = None  # noqa: N815
    providerID: Any = None  # noqa: N815


class _ToolState(msgspec.Struct):
    status: Any = None
    input: Any = None
    structured: Any = None
    result: Any = None
    outputPaths: Any = None  # noqa: N815
    metadata: Any = None
    content: Any = None
    attachments: Any = None
    error: Any = None


class _Block(msgspec.Struct):
    type: Any = None
    text: Any = None
    synthetic: Any = None
    ignored: Any = None
    # A part's provider state, by the names rows of each version carry (newest first).
    native: Any = None
    providerMetadata: Any = None  # noqa: N815
    providerState: Any = None  # noqa: N815
    state: Any = None
    time: _Time = msgspec.field(default_factory=_Time)
    id: Any = None
    name: Any = None
    provider: Any = None
    executed: Any = None
    providerResultState: Any = None  # noqa: N815


class _Data(msgspec.Struct):
    """A row's ``data``, every row type's fields (a row holds its type's)."""

    time: _Time = msgspec.field(default_factory=_Time)
    text: Any = None
    description: Any = _UNSET
    skill: Any = _UNSET
    name: Any = _UNSET
    files: Any = None
    agents: Any = None
    references: Any = None
    skills: Any = None
    output: Any = None
    callID: Any = None  # noqa: N815
    shellID: Any = None  # noqa: N815
    command: Any = None
    exit: Any = _UNSET
    status: Any = _UNSET
    reason: Any = None
    error: Any = None
    summary: Any = None
    recent: Any = None
    model: Any = None
    agent: Any = None
    cost: Any = None
    tokens: Any = None
    finish: Any = None
    content: Any = None


def _native(block: _Block) -> dict[str, Any] | None:
    """A part's provider state: ``native`` (newest), ``providerMetadata`` or ``state``
    (the names rows written before the rename carry)."""
    for found in (block.native, block.providerMetadata, block.providerState, block.state):
        if isinstance(found, dict):
            return found
    return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ms(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0  # not a bool


def _text_of(content: Any) -> str:
    """The text of a tool's ``content`` (``[{type: "text", text}, ...]``) or a string."""
    if isinstance(content, str):
        return content
    texts = (c["text"] for c in _list(content) if isinstance(c, dict) and "text" in c)
    return "\n".join(t for t in texts if isinstance(t, str))


def _first_str(value: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` whose value in ``value`` is a string."""
    return next((value[k] for k in keys if isinstance(value.get(k), str)), None)


def _shell_output(output: Any) -> str:
    """A shell row's output: a string, or (newer) an object whose text field is taken when
    it has one, its JSON otherwise (never a repr)."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        found = _first_str(output, ("text", "output", "stdout"))
        if found is not None:
            return found
    return _text_of(output) or ("" if output is None else json.dumps(output))


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        found = next((error[k] for k in ("message", "name", "type")
                      if isinstance(error.get(k), str) and error[k]), None)
        return found if found is not None else json.dumps(error)
    return str(error or "error")


def _tool_state(raw: Any, start: int, end: int) -> dict[str, Any]:
    """A V2 ``ToolState`` as the older tool part's state."""
    state = msgspec.convert(raw if isinstance(raw, dict) else {}, _ToolState)
    status = state.status
    args = state.input if isinstance(state.input, dict) else {}
    times = {"start": start} | ({"end": end} if end else {})
    meta = {k: v for k, v in (("structured", state.structured), ("result", state.result),
                              ("outputPaths", state.outputPaths)) if v is not None}
    if isinstance(state.metadata, dict):
        meta |= state.metadata
    if status in ("pending", "streaming"):  # the arguments still streaming (a JSON string)
        return {"status": "pending", "input": {},
                "raw": state.input if isinstance(state.input, str) else ""}
    if status == "running":
        return {"status": "running", "input": args, "time": {"start": start},
                "metadata": meta}
    if status == "completed":
        return {"status": "completed", "input": args, "output": _text_of(state.content),
                "title": "", "metadata": meta, "time": times,
                "attachments": [a for a in _list(state.attachments) if isinstance(a, dict)]}
    if status == "error":
        return {"status": "error", "input": args, "error": _error_text(state.error),
                "metadata": meta, "time": times}
    return {"status": str(status), "input": args}


def _assistant(mid: str, data: _Data, created: int, report: ImportReport
               ) -> list[dict[str, Any]]:
    completed = _ms(data.time.completed)
    parts: list[dict[str, Any]] = []
    for i, raw in enumerate(_list(data.content)):
        pid = f"{mid}-{i:04d}"
        block = msgspec.convert(raw, _Block) if isinstance(raw, dict) else None
        kind = block.type if block is not None else None
        if block is not None and kind == "text":
            part: dict[str, Any] = {
                "id": pid, "type": "text", "text": str(block.text or ""),
                "time": {"start": created} | ({"end": completed} if completed else {})}
            if block.synthetic:
                part["synthetic"] = True
            if block.ignored:
                part["ignored"] = True
            parts.append(part)
        elif block is not None and kind == "reasoning":
            part = {"id": pid, "type": "reasoning", "text": str(block.text or ""),
                    "time": {"start": created} | ({"end": completed} if completed else {})}
            native = _native(block)
            if native is not None:  # the provider's state: a thinking block's signature
                part["metadata"] = native
            parts.append(part)
        elif block is not None and kind == "tool":
            times = block.time
            start = _ms(times.ran) or _ms(times.created) or created
            state = _tool_state(block.state, start, _ms(times.completed))
            if _ms(times.pruned):
                state.setdefault("time", {})["compacted"] = _ms(times.pruned)
            part = {"id": pid, "type": "tool", "callID": str(block.id or pid),
                    "tool": str(block.name or "unknown"), "state": state}
            provider = {k: v for k, v in (
                ("provider", block.provider), ("executed", block.executed),
                ("native", block.native), ("providerResultState", block.providerResultState),
                ("providerState", block.providerState)) if v is not None}
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
    for mid, kind, raw in rows:
        data = msgspec.convert(raw, _Data)
        created = _ms(data.time.created) or 1
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
                                    "text": str(data.text or "")}
            if kind != "user":
                text["synthetic"] = True
            extra = {k: v for k, v in (("description", data.description),
                                       ("skill", data.skill), ("name", data.name))
                     if v is not _UNSET}
            if extra:
                text["metadata"] = {"opencode": {"type": kind, **extra}}
            parts.append(text)
            for i, one in enumerate(_list(data.files)):
                f = msgspec.convert(one, _File) if isinstance(one, dict) else None
                if f is not None and (f.url or f.uri):
                    parts.append({"id": f"{mid}-{i + 1:04d}", "type": "file",
                                  "mime": str(f.mime or f.mediaType
                                              or "application/octet-stream"),
                                  "url": str(f.url or f.uri),
                                  "filename": next((v for v in (f.filename, f.name)
                                                    if isinstance(v, str)), None)})
                else:
                    report.note("a session_message user file without a url: not imported")
            for key, value in (("agents", data.agents), ("references", data.references),
                               ("skills", data.skills)):
                if value:
                    report.note(f"a session_message user {key}: not imported")
            if kind == "user":
                last_user = mid
        elif kind == "shell":  # the user's own shell command (! in the prompt) and its output
            info["role"] = "user"
            end = _ms(data.time.completed)
            parts.append({"id": f"{mid}-0000", "type": "tool",
                          "callID": str(data.callID or data.shellID or mid),
                          "tool": "bash",
                          "state": {"status": "completed" if end else "running",
                                    "input": {"command": str(data.command or "")},
                                    "output": _shell_output(data.output),
                                    "title": "",
                                    "metadata": {k: v for k, v in (("exit", data.exit),
                                                                   ("status", data.status))
                                                 if v is not _UNSET},
                                    "time": {"start": created} | ({"end": end} if end else {})}})
            if not end:
                report.note("a session_message shell command without an end: left running")
        elif kind == "compaction":
            info["role"] = "user"
            parts.append({"id": f"{mid}-0000", "type": "compaction",
                          "auto": data.reason == "auto"})
            if data.status == "failed":
                report.note("a session_message compaction that failed: kept as a compaction "
                            f"({_error_text(data.error)})")
            for i, value in enumerate((data.summary, data.recent)):
                if value:
                    parts.append({"id": f"{mid}-{i + 1:04d}", "type": "text", "synthetic": True,
                                  "text": str(value)})
        elif kind == "assistant":
            model = msgspec.convert(data.model if isinstance(data.model, dict) else {}, _Model)
            completed = _ms(data.time.completed)
            info |= {"role": "assistant", "agent": str(data.agent or ""),
                     "modelID": model.id or model.modelID,
                     "providerID": model.providerID, "parentID": last_user or None}
            if completed:
                info["time"]["completed"] = completed
            for key, value in (("cost", data.cost), ("tokens", data.tokens),
                               ("finish", data.finish)):
                if value is not None:
                    info[key] = value
            if data.error is not None:
                error = data.error
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
