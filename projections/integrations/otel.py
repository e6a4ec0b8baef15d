"""A session as OpenTelemetry GenAI spans (pure: no OpenTelemetry import, no clock).

Following the OpenTelemetry semantic conventions for generative AI:

- one trace per session (its trace id is the session's UUID), under a root
  ``invoke_agent`` span (``gen_ai.operation.name``, ``gen_ai.agent.name``,
  ``gen_ai.conversation.id``) from the first message to the last end seen;
- a ``chat {model}`` span (kind CLIENT) per assistant message that has ended:
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens`` and the cache token counts; an error ends it
  with status ERROR and ``error.type`` (the message error's kind);
- an ``execute_tool {tool}`` span per tool that has ended (completed or
  failed): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``;
  a failed tool has status ERROR and ``error.type`` (its failure kind).

A message's span covers the message's life in convlog (created to completed,
which includes the tools it waited for); tool spans are siblings under the root.
Span ids are derived from the message and part ids, so an export is the same
every time and a live exporter's spans equal the exported ones. Open messages
and tools still waiting have not ended: they are left out until they do.
:func:`otlp_json` gives the spans as OTLP/JSON (``convlog export --as otel``);
:mod:`projections.integrations.otel_sdk` hands them to an OpenTelemetry SDK
exporter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Final, Literal

import attrs

from projections import views as v

Attr = str | int | float | bool | list[str]
SpanKind = Literal["INTERNAL", "CLIENT"]
OTLP_KINDS: Final = {"INTERNAL": 1, "CLIENT": 3}
MS: Final = 1_000_000  # ns per ms


@attrs.frozen
class GenAISpan:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str | None
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: dict[str, Attr]
    error: str | None = None  # the status description of a span that failed


def trace_id(session_id: str) -> str:
    return session_id.replace("-", "").lower()


def span_id(*names: str) -> str:
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    return digest if digest.strip("0") else "0000000000000001"


def root_span_id(session_id: str) -> str:
    return span_id(session_id, "invoke_agent")


def message_spans(session_id: str, wp: v.WithParts) -> list[GenAISpan]:
    """The ended spans of one message: its chat span (assistant, completed) and its
    ended tools."""
    info = wp.info
    if not isinstance(info, v.AssistantInfo):
        return []
    trace, root = trace_id(session_id), root_span_id(session_id)
    out: list[GenAISpan] = []
    if info.time.completed is not None:
        model = info.model_id or ""
        attrs_: dict[str, Attr] = {"gen_ai.operation.name": "chat",
                                   "gen_ai.conversation.id": session_id}
        if info.provider_id:
            attrs_["gen_ai.provider.name"] = info.provider_id
        if model:
            attrs_["gen_ai.request.model"] = attrs_["gen_ai.response.model"] = model
        if info.agent:
            attrs_["gen_ai.agent.name"] = info.agent
        if info.finish:
            attrs_["gen_ai.response.finish_reasons"] = [info.finish]
        tokens = info.tokens
        attrs_["gen_ai.usage.input_tokens"] = tokens.input
        attrs_["gen_ai.usage.output_tokens"] = tokens.output
        if tokens.cache.read:
            attrs_["gen_ai.usage.cache_read.input_tokens"] = tokens.cache.read
        if tokens.cache.write:
            attrs_["gen_ai.usage.cache_creation.input_tokens"] = tokens.cache.write
        error = None
        if info.error is not None:
            attrs_["error.type"] = info.error.kind
            error = info.error.message or info.error.kind
        out.append(GenAISpan(trace, span_id(info.id), root, f"chat {model}".strip(), "CLIENT",
                             info.time.created * MS, info.time.completed * MS, attrs_, error))
    for part in wp.parts:
        if isinstance(part, v.ToolPart):
            tool = tool_span(session_id, part)
            if tool is not None:
                out.append(tool)
    return out


def tool_span(session_id: str, part: v.ToolPart) -> GenAISpan | None:
    state = part.state
    if not isinstance(state, v.ToolStateCompleted | v.ToolStateError):
        return None
    attrs_: dict[str, Attr] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": part.tool,
        "gen_ai.tool.call.id": part.call_id, "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session_id}
    error = None
    if isinstance(state, v.ToolStateError):
        attrs_["error.type"] = str((state.metadata or {}).get("kind", "error"))
        error = state.error
    return GenAISpan(trace_id(session_id), span_id(part.message_id, part.id),
                     root_span_id(session_id), f"execute_tool {part.tool}", "INTERNAL",
                     state.time.start * MS, state.time.end * MS, attrs_, error)


def root_span(session_id: str, history: list[v.WithParts], spans: Iterable[GenAISpan]
              ) -> GenAISpan | None:
    """The session's ``invoke_agent`` span: from its first message to the last end seen."""
    if not history:
        return None
    start = history[0].info.time.created * MS
    end = max([start, *(s.end_ns for s in spans),
               *(wp.info.time.created * MS for wp in history)])
    agents = [wp.info.agent for wp in history if wp.info.agent]
    attrs_: dict[str, Attr] = {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.conversation.id": session_id}
    if agents:
        attrs_["gen_ai.agent.name"] = agents[0]
    name = f"invoke_agent {agents[0]}" if agents else "invoke_agent"
    return GenAISpan(trace_id(session_id), root_span_id(session_id), None, name, "INTERNAL",
                     start, end, attrs_)


def genai_spans(session_id: str, history: list[v.WithParts]) -> list[GenAISpan]:
    """Every ended span of the session, the root first."""
    spans = [s for wp in history for s in message_spans(session_id, wp)]
    root = root_span(session_id, history, spans)
    return ([root] if root is not None else []) + spans


def _value(value: Attr) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP/JSON: 64-bit integers as strings
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(x) for x in value]}}
    return {"stringValue": value}


def otlp_json(spans: list[GenAISpan], *, service: str = "convlog") -> dict[str, Any]:
    """The spans as one OTLP/JSON ``ExportTraceServiceRequest``."""
    out = []
    for s in spans:
        span: dict[str, Any] = {
            "traceId": s.trace_id, "spanId": s.span_id, "name": s.name,
            "kind": OTLP_KINDS[s.kind], "startTimeUnixNano": str(s.start_ns),
            "endTimeUnixNano": str(s.end_ns),
            "attributes": [{"key": k, "value": _value(x)} for k, x in s.attributes.items()],
            "status": {"code": 2, "message": s.error} if s.error is not None else {}}
        if s.parent_id is not None:
            span["parentSpanId"] = s.parent_id
        out.append(span)
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "convlog"}, "spans": out}]}]}
