"""GenAI spans handed to an OpenTelemetry SDK exporter (the ``convlog[otel]`` extra).

``export_session(store, session_id, exporter)`` exports a recorded session;
``LiveExporter(session, exporter)`` exports each span as it ends while the
session is written (a subscriber), and the session's root span at ``close()``.
Any ``SpanExporter`` works: the OTLP exporter, the console exporter, or the
SDK's ``InMemorySpanExporter`` in a test. The spans are the pure fold's
(:mod:`projections.integrations.otel`), built as the SDK's ``ReadableSpan`` with
their own times and ids, so a live export and a later one give the same spans.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from engine import events as ev
from engine.session import Session
from engine.store import Store
from projections.integrations.otel import GenAISpan, genai_spans, message_spans, root_span
from projections.withparts import WithPartsProjection

SCOPE = InstrumentationScope("convlog")
KINDS = {"INTERNAL": SpanKind.INTERNAL, "CLIENT": SpanKind.CLIENT}
# The events after which a span may have ended.
ENDINGS = (ev.MessageCompleted, ev.ToolCompleted, ev.ToolFailed, ev.ToolApprovalDenied)


def _context(trace: str, span: str) -> SpanContext:
    return SpanContext(int(trace, 16), int(span, 16), is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def readable(span: GenAISpan, resource: Resource) -> ReadableSpan:
    status = Status(StatusCode.ERROR, span.error) if span.error is not None else Status(
        StatusCode.UNSET)
    parent = _context(span.trace_id, span.parent_id) if span.parent_id else None
    return ReadableSpan(
        name=span.name, context=_context(span.trace_id, span.span_id), parent=parent,
        # sequences as tuples, as the SDK's own spans keep them (immutable)
        resource=resource, kind=KINDS[span.kind], attributes={
            k: tuple(x) if isinstance(x, list) else x for k, x in span.attributes.items()},
        status=status, start_time=span.start_ns, end_time=span.end_ns,
        instrumentation_scope=SCOPE)


def export_session(store: Store, session_id: str, exporter: SpanExporter, *,
                   service: str = "convlog") -> list[GenAISpan]:
    """Export a recorded session's ended spans; returns them."""
    history = WithPartsProjection(session_id).apply_all(store.read(session_id)).messages()
    spans = genai_spans(session_id, history)
    resource = Resource.create({"service.name": service})
    exporter.export([readable(s, resource) for s in spans])
    return spans


class LiveExporter:
    """Exports each span of ``session`` as it ends; the root span at :meth:`close`."""

    def __init__(self, session: Session, exporter: SpanExporter, *,
                 service: str = "convlog") -> None:
        self.session = session
        self.exporter = exporter
        self.resource = Resource.create({"service.name": service})
        self.view = WithPartsProjection(session.id).apply_all(
            session.store.read(session.id, 1, session.version))  # what the session folded
        self.sent: set[str] = set()
        self.spans: list[GenAISpan] = []
        for wp in self.view.messages():  # what ended before: not exported again later
            self.sent.update(s.span_id for s in message_spans(session.id, wp))
        self._unsubscribe = session.subscribe(self)

    def __call__(self, e: ev.Event) -> None:
        self.view(e)
        if isinstance(e, ENDINGS):
            self._send(message_spans(self.session.id, self.view.message(e.message_id)))

    def _send(self, spans: list[GenAISpan]) -> None:
        fresh = [s for s in spans if s.span_id not in self.sent]
        if fresh:
            self.sent.update(s.span_id for s in fresh)
            self.spans += fresh
            self.exporter.export([readable(s, self.resource) for s in fresh])

    def close(self) -> None:
        """Export the session's root span (it ends with the last span seen) and stop."""
        self._unsubscribe()
        root = root_span(self.session.id, self.view.messages(), self.spans)
        if root is not None:
            self._send([root])
