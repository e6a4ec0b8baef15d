"""OpenTelemetry GenAI spans: exported and live, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from engine.cli import main
from engine.integrations.anthropic import record_anthropic
from engine.session import Session
from engine.store import SQLiteStore, Store
from projections.integrations.otel import genai_spans, otlp_json
from projections.integrations.otel_sdk import LiveExporter, export_session
from projections.render import anthropic as render
from projections.withparts import WithPartsProjection
from tests.support.fake_sse import FakeServer, Reply, anthropic_text, anthropic_text_and_tool


def conversation(store: Store, exporter: InMemorySpanExporter | None = None) -> Session:
    """A user asks, the model calls a tool twice over two turns; the second call fails."""
    session = Session.create(store)
    live = LiveExporter(session, exporter) if exporter is not None else None
    server = FakeServer([Reply(anthropic_text_and_tool()), Reply(anthropic_text("Done."))])
    client = record_anthropic(server.anthropic(), session)
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    session.user_message("What does hello.py do?", agent="helper")
    for _ in range(2):
        with client.messages.stream(model="claude-x", max_tokens=64,
                                    messages=render.messages(view.messages())) as stream:
            stream.until_done()
        result = client.last.result
        for call in result.tool_calls:
            session.start_tool(call.ref)
            session.fail_tool(call.ref, "permission denied", kind="error")
        if result.tool_calls:
            client.last.ingest.complete()
    if live is not None:
        live.close()
    return session


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


def test_a_session_exports_genai_spans(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "log.db"))
    session = conversation(store)
    exporter = InMemorySpanExporter()
    export_session(store, session.id, exporter)
    spans = list(exporter.get_finished_spans())
    names = [s.name for s in spans]
    assert names == ["invoke_agent helper", "chat claude-x", "execute_tool read", "chat claude-x"]
    root, first, tool, second = spans
    assert all(s.context is not None and s.context.trace_id == int(
        session.id.replace("-", ""), 16) for s in spans)
    assert all(s.parent is not None and root.context is not None
               and s.parent.span_id == root.context.span_id for s in spans[1:])
    assert first.kind == SpanKind.CLIENT
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": session.id,
        "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-x",
        "gen_ai.response.model": "claude-x", "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 20}
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read",
        "gen_ai.tool.call.id": "toolu_1", "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session.id, "error.type": "error"}
    assert (tool.status.status_code, tool.status.description) == (
        StatusCode.ERROR, "permission denied")
    assert second.status.status_code == StatusCode.UNSET
    for s in spans:
        assert s.start_time is not None
        assert s.end_time is not None
        assert s.start_time <= s.end_time
    assert root.start_time is not None
    assert root.end_time is not None
    assert root.start_time <= min(s.start_time or 0 for s in spans)
    assert root.end_time >= max(s.end_time or 0 for s in spans)


def summary(spans: list[ReadableSpan]) -> list[Any]:
    return sorted((s.name, s.context.span_id if s.context else None, s.start_time, s.end_time,
                   sorted((s.attributes or {}).items()), s.status.status_code) for s in spans)


def test_the_live_exporter_gives_each_span_as_it_ends_and_the_same_spans(
        tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "log.db"))
    live = InMemorySpanExporter()
    session = conversation(store, live)
    exported = InMemorySpanExporter()
    export_session(store, session.id, exported)
    assert summary(list(live.get_finished_spans())) == summary(
        list(exported.get_finished_spans()))
    # The root comes last, at close(): each other span was exported when it ended.
    assert [s.name for s in live.get_finished_spans()][-1] == "invoke_agent helper"


def test_convlog_export_as_otel_writes_otlp_json(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path))
    session = conversation(store)
    assert main(["export", f"sqlite:///{path}", "--session", session.id, "--as", "otel"]) == 0
    data = json.loads(capsys.readouterr().out)
    view = WithPartsProjection(session.id).apply_all(store.read(session.id))
    assert data == otlp_json(genai_spans(session.id, view.messages()))
    [resource] = data["resourceSpans"]
    spans = resource["scopeSpans"][0]["spans"]
    assert [s["name"] for s in spans] == [
        "invoke_agent helper", "chat claude-x", "execute_tool read", "chat claude-x"]
    usage = {a["key"]: a["value"] for a in spans[1]["attributes"]}
    assert usage["gen_ai.usage.input_tokens"] == {"intValue": "12"}
    assert spans[2]["status"] == {"code": 2, "message": "permission denied"}
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
