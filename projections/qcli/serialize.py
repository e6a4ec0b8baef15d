"""ConversationState as JSON, in Q CLI's own shape, through cattrs.

The format is Q CLI's saved-conversation JSON (serde defaults: snake_case
fields, externally tagged enums such as ``{"Prompt": {"prompt": ...}}``,
``null`` for an absent option, ``model`` / ``model_info`` / ``tangent_state``
left out when absent) plus one key Q CLI ignores, ``convlog_schema_version``.
Only serialized fields exist here: ``tool_manager`` and ``agents`` are runtime
objects that whoever sends rebuilds.

Mappings convlog has to choose:

- ``tools`` keys: builtin ↔ ``native___`` (Q CLI's spelling), an MCP server ↔ its
  name, custom ↔ ``custom___``, an unnamed MCP origin ↔ ``mcp___``.
- times: checkpoint ``timestamp`` is RFC 3339; ``tangent_start_time`` is the
  ``time`` crate's array ``[year, ordinal day, hour, minute, second, nanosecond,
  offset h, m, s]``.
- each checkpoint's ``history_snapshot`` is written out in full, as Q CLI
  expects; the fold itself only keeps a reference (see docs/conversation.md).

Reading accepts files without ``convlog_schema_version`` (written by Q CLI) and
files that only have the legacy ``model`` string, which then fills ``model_info``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

import cattrs
import msgspec

from projections.qcli import messages as m
from projections.qcli.as_sent import (
    as_json_blocks,
    blocks_from_json,
    format_timestamp,
    timestamp_ms,
)

T = TypeVar("T")

SCHEMA_VERSION: Final = 1
SCHEMA_KEY: Final = "convlog_schema_version"

_ORIGIN_TO_QCLI: Final = {"builtin": "native___", "custom": "custom___", "mcp": "mcp___"}
_QCLI_TO_ORIGIN: Final = {v: k for k, v in _ORIGIN_TO_QCLI.items()}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def origin_to_qcli(key: str) -> str:
    return _ORIGIN_TO_QCLI.get(key) or key.removeprefix("mcp:")


def origin_from_qcli(key: str) -> str:
    return _QCLI_TO_ORIGIN.get(key) or f"mcp:{key}"


def time_array(ms: int) -> list[int]:
    """The ``time`` crate's serde array for a UTC ``OffsetDateTime``."""
    t = _EPOCH + timedelta(milliseconds=ms)
    return [t.year, t.timetuple().tm_yday, t.hour, t.minute, t.second,
            t.microsecond * 1000, 0, 0, 0]


def time_from_array(data: Any) -> int:
    if isinstance(data, str):
        return timestamp_ms(data)
    year, day, hour, minute, second, nanos, *offset = data
    off = offset + [0] * (3 - len(offset))
    t = (datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=day - 1, hours=hour,
                                                      minutes=minute, seconds=second))
    t -= timedelta(hours=off[0], minutes=off[1], seconds=off[2])
    ms: int = (t - _EPOCH) // timedelta(milliseconds=1)
    return ms + int(nanos) // 1_000_000


def _optional(conv: cattrs.Converter, data: Any, cls: type[T]) -> T | None:
    return None if data is None else conv.structure(data, cls)


def _tagged(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {name: fields}


def _one_key(data: Any, what: str) -> tuple[str, Any]:
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"{what} is an object with one key (the variant), not {data!r}")
    (key, value), = data.items()
    return key, value


def make_converter() -> cattrs.Converter:
    conv = cattrs.Converter()

    # Tool result blocks and results.
    conv.register_unstructure_hook(m.TextBlock, lambda b: {"Text": b.text})
    conv.register_unstructure_hook(m.JsonBlock, lambda b: {"Json": b.value})
    conv.register_unstructure_hook(m.ToolUseResult, lambda r: {
        "tool_use_id": r.tool_use_id, "content": as_json_blocks(r.content), "status": r.status})
    conv.register_structure_hook(m.ToolUseResult, lambda d, _: m.ToolUseResult(
        d["tool_use_id"], blocks_from_json(d.get("content") or []), d["status"]))

    def results(data: Any) -> tuple[m.ToolUseResult, ...]:
        return tuple(conv.structure(r, m.ToolUseResult) for r in data)

    # User message content (Rust enum, externally tagged).
    conv.register_unstructure_hook(m.Prompt, lambda c: _tagged("Prompt", {"prompt": c.prompt}))
    conv.register_unstructure_hook(m.CancelledToolUses, lambda c: _tagged(
        "CancelledToolUses", {"prompt": c.prompt, "tool_use_results": [
            conv.unstructure(r) for r in c.tool_use_results]}))
    conv.register_unstructure_hook(m.ToolUseResults, lambda c: _tagged(
        "ToolUseResults", {"tool_use_results": [conv.unstructure(r)
                                                for r in c.tool_use_results]}))

    def structure_content(data: Any, _: Any) -> m.UserMessageContent:
        kind, body = _one_key(data, "UserMessageContent")
        if kind == "Prompt":
            return m.Prompt(body["prompt"])
        if kind == "CancelledToolUses":
            return m.CancelledToolUses(body.get("prompt"), results(body["tool_use_results"]))
        if kind == "ToolUseResults":
            return m.ToolUseResults(results(body["tool_use_results"]))
        raise ValueError(f"unknown user message content {kind!r}")

    conv.register_structure_hook_func(lambda t: t == m.UserMessageContent, structure_content)

    # Assistant message (Rust enum).
    def tool_use(u: m.AssistantToolUse) -> dict[str, Any]:
        return {"id": u.id, "name": u.name, "orig_name": u.orig_name, "args": u.args,
                "orig_args": u.orig_args}

    def thinking(a: m.AssistantMessage) -> dict[str, Any]:
        """``thinking`` only when the save had it: older saves have no such field."""
        return {} if a.thinking is None else {"thinking": a.thinking}

    conv.register_unstructure_hook(m.Response, lambda a: _tagged(
        "Response", {"message_id": a.message_id, "content": a.content, **thinking(a)}))
    conv.register_unstructure_hook(m.ToolUse, lambda a: _tagged(
        "ToolUse", {"message_id": a.message_id, "content": a.content,
                    "tool_uses": [tool_use(u) for u in a.tool_uses], **thinking(a)}))

    def structure_assistant(data: Any, _: Any) -> m.AssistantMessage:
        kind, body = _one_key(data, "AssistantMessage")
        read = body.get("thinking")
        thought = read if isinstance(read, dict) else None
        if kind == "Response":
            return m.Response(body.get("message_id"), body.get("content", ""), thought)
        if kind == "ToolUse":
            uses = tuple(m.AssistantToolUse(
                u["id"], u["name"], u.get("orig_name") or u["name"], u.get("args"),
                u.get("orig_args", u.get("args"))) for u in body.get("tool_uses", []))
            return m.ToolUse(body.get("message_id"), body.get("content", ""), uses, thought)
        raise ValueError(f"unknown assistant message {kind!r}")

    conv.register_structure_hook_func(lambda t: t == m.AssistantMessage, structure_assistant)

    # Tool specifications: Q CLI wraps them as Tool::ToolSpecification.
    conv.register_unstructure_hook(m.ToolSpec, lambda t: {"ToolSpecification": {
        "name": t.name, "description": t.description, "input_schema": {"json": t.input_schema}}})

    def structure_tool(data: Any, _: Any) -> m.ToolSpec:
        _, spec = _one_key(data, "Tool")
        schema = spec.get("input_schema") or {}
        return m.ToolSpec(spec["name"], spec.get("description", ""),
                          schema.get("json", {}) if isinstance(schema, dict) else {})

    conv.register_structure_hook(m.ToolSpec, structure_tool)

    # Optional model fields are left out when absent (serde skip_serializing_if); the
    # names are the event value's own, so the hooks read its declared fields.
    model_fields = [f.name for f in msgspec.structs.fields(m.ModelInfo)]
    conv.register_unstructure_hook(m.ModelInfo, lambda info: {
        name: value for name in model_fields
        if (value := getattr(info, name)) is not None or name == "model_id"})
    conv.register_structure_hook(m.ModelInfo, lambda d, _: m.ModelInfo(
        **{name: d[name] for name in model_fields if name in d}))

    # Checkpoints: timestamps as RFC 3339, the snapshot written out in full.
    conv.register_unstructure_hook(m.Checkpoint, lambda c: {
        "tag": c.tag, "timestamp": format_timestamp(c.timestamp),
        "description": c.description,
        "history_snapshot": [conv.unstructure(e) for e in c.history_snapshot],
        "is_turn": c.is_turn, "tool_name": c.tool_name})
    conv.register_structure_hook(m.Checkpoint, lambda d, _: m.Checkpoint(
        d["tag"], timestamp_ms(d["timestamp"]), d.get("description", ""),
        d.get("is_turn", True), d.get("tool_name"),
        m.HistorySnapshot.of([conv.structure(e, m.HistoryEntry)
                              for e in d.get("history_snapshot", [])])))
    conv.register_unstructure_hook(m.CheckpointManager, lambda c: {
        "checkpoints": [conv.unstructure(x) for x in c.checkpoints],
        "tag_index": c.tag_index(), "current_turn": c.current_turn()})
    conv.register_structure_hook(m.CheckpointManager, lambda d, _: m.CheckpointManager(
        tuple(conv.structure(x, m.Checkpoint) for x in d.get("checkpoints", []))))

    def summary(value: tuple[str, m.JSON] | None) -> Any:
        return None if value is None else [value[0], value[1]]

    def structure_summary(data: Any) -> tuple[str, m.JSON] | None:
        if data is None:
            return None
        if isinstance(data, str):  # some files store the summary text alone
            return (data, {})
        text, metadata = data
        return (text, dict(metadata or {}))

    conv.register_unstructure_hook(m.ConversationCheckpoint, lambda c: {
        "main_history": [conv.unstructure(e) for e in c.main_history],
        "main_next_message": conv.unstructure(c.main_next_message),
        "main_transcript": list(c.main_transcript),
        "main_latest_summary": summary(c.main_latest_summary),
        "tangent_start_time": time_array(c.tangent_start_time)})
    conv.register_structure_hook(m.ConversationCheckpoint, lambda d, _: m.ConversationCheckpoint(
        tuple(conv.structure(e, m.HistoryEntry) for e in d.get("main_history", [])),
        _optional(conv, d.get("main_next_message"), m.UserMessage),
        tuple(d.get("main_transcript", [])),
        structure_summary(d.get("main_latest_summary")),
        time_from_array(d["tangent_start_time"]) if "tangent_start_time" in d else 0))

    def unstructure_state(s: m.ConversationState) -> dict[str, Any]:
        out: dict[str, Any] = {
            "conversation_id": s.conversation_id,
            "next_message": conv.unstructure(s.next_message),
            "history": [conv.unstructure(e) for e in s.history],
            "valid_history_range": list(s.valid_history_range),
            "transcript": list(s.transcript),
            "tools": {origin_to_qcli(k): [conv.unstructure(t) for t in v]
                      for k, v in s.tools.items()},
            "context_manager": conv.unstructure(s.context_manager),
            "context_message_length": s.context_message_length,
            "latest_summary": summary(s.latest_summary),
        }
        if s.model is not None:
            out["model"] = s.model
        if s.model_info is not None:
            out["model_info"] = conv.unstructure(s.model_info)
        out["file_line_tracker"] = {k: conv.unstructure(v)
                                    for k, v in s.file_line_tracker.items()}
        out["checkpoint_manager"] = conv.unstructure(s.checkpoint_manager)
        out["mcp_enabled"] = s.mcp_enabled
        if s.tangent_state is not None:
            out["tangent_state"] = conv.unstructure(s.tangent_state)
        out[SCHEMA_KEY] = SCHEMA_VERSION
        return out

    def structure_state(d: dict[str, Any], _: Any) -> m.ConversationState:
        version = d.get(SCHEMA_KEY, SCHEMA_VERSION)
        if version > SCHEMA_VERSION:
            raise ValueError(f"{SCHEMA_KEY} {version} is newer than this convlog "
                             f"({SCHEMA_VERSION})")
        model = d.get("model")
        start, end = d.get("valid_history_range") or (0, 0)
        model_info = (conv.structure(d["model_info"], m.ModelInfo) if d.get("model_info")
                      else None if model is None else m.ModelInfo(model))
        return m.ConversationState(
            conversation_id=d["conversation_id"],
            next_message=_optional(conv, d.get("next_message"), m.UserMessage),
            history=tuple(conv.structure(e, m.HistoryEntry) for e in d.get("history", [])),
            valid_history_range=(int(start), int(end)),
            transcript=tuple(d.get("transcript", [])),
            tools={origin_from_qcli(k): tuple(conv.structure(t, m.ToolSpec) for t in v)
                   for k, v in (d.get("tools") or {}).items()},
            context_manager=_optional(conv, d.get("context_manager"), m.ContextManager),
            context_message_length=d.get("context_message_length"),
            latest_summary=structure_summary(d.get("latest_summary")),
            model=model,
            model_info=model_info,
            file_line_tracker={k: conv.structure(v, m.FileLineTracker)
                               for k, v in (d.get("file_line_tracker") or {}).items()},
            checkpoint_manager=_optional(conv, d.get("checkpoint_manager"), m.CheckpointManager),
            mcp_enabled=d.get("mcp_enabled", True),
            tangent_state=_optional(conv, d.get("tangent_state"), m.ConversationCheckpoint),
        )

    conv.register_unstructure_hook(m.ConversationState, unstructure_state)
    conv.register_structure_hook(m.ConversationState, structure_state)
    return conv


converter: Final = make_converter()


def to_json_obj(state: m.ConversationState) -> dict[str, Any]:
    out = converter.unstructure(state)
    assert isinstance(out, dict)
    return out


def from_json_obj(data: dict[str, Any]) -> m.ConversationState:
    return converter.structure(data, m.ConversationState)


def to_json(state: m.ConversationState, *, indent: int | None = None) -> str:
    """Q CLI's JSON for ``state`` (plus ``convlog_schema_version``)."""
    return json.dumps(to_json_obj(state), ensure_ascii=False, indent=indent)


def from_json(text: str | bytes) -> m.ConversationState:
    return from_json_obj(json.loads(text))


def export_qcli(state: m.ConversationState) -> dict[str, Any]:
    """The JSON object Q CLI itself would save (no convlog key)."""
    out = to_json_obj(state)
    del out[SCHEMA_KEY]
    return out


def user_message_from_json(data: Any) -> m.UserMessage:
    return converter.structure(data, m.UserMessage)


def history_entry_from_json(data: Any) -> m.HistoryEntry:
    return converter.structure(data, m.HistoryEntry)


__all__ = ["SCHEMA_VERSION", "converter", "export_qcli", "from_json",
           "from_json_obj", "history_entry_from_json", "to_json", "to_json_obj",
           "user_message_from_json"]
