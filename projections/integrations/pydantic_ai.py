"""A convlog history as pydantic-ai's ``message_history`` (pure).

``agent.run(prompt, message_history=to_model_messages(view.messages()))``
continues a convlog session in pydantic-ai. Parts recorded from pydantic-ai
(:mod:`engine.integrations.pydantic_ai`) come back exactly as they were
(each part and each message envelope as pydantic-ai serialized it); parts
recorded otherwise are built from what convlog knows:

- user text: ``UserPromptPart`` (synthetic text: ``SystemPromptPart``);
- assistant text and reasoning: ``TextPart``, ``ThinkingPart`` (with an
  Anthropic signature when there is one);
- a tool call: ``ToolCallPart``, and in the next request its
  ``ToolReturnPart``: outcome ``success`` with the output, or the error with
  outcome ``failed`` (kind ``error``), ``denied``, or ``interrupted`` (aborted,
  cancelled, timeout); a running tool returns "[Tool execution was interrupted]",
  outcome ``interrupted`` (reported); a tool still pending or awaiting approval in
  a message that is still open is a deferred call: it goes back with no return,
  as pydantic-ai's own history has it, so ``deferred_tool_results=`` resumes it.

Not expressible, and listed in the ``report`` when one is passed: files,
ignored text, the other part kinds (steps, snapshots, patches, agents,
retries, compactions, subtasks), and a tool failure kind pydantic-ai has no
outcome for (``cancelled``, ``timeout``, ``truncated``: sent as interrupted,
read back as ``aborted``). Timestamps are the convlog message's time, so
the fold never reads the clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from engine.integrations.pydantic_ai import KEY
from engine.session import Session
from projections import views as v
from projections.render import common as c
from projections.withparts import WithPartsProjection

JSON = dict[str, Any]
INTERRUPTED = "[Tool execution was interrupted]"
# A failed tool's kind, as pydantic-ai's tool return outcome.
OUTCOMES = {"error": "failed", "denied": "denied"}  # aborted, cancelled, timeout: interrupted


def _recorded(metadata: JSON | None) -> JSON | None:
    data = (metadata or {}).get(KEY)
    return data if isinstance(data, dict) else None


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


class _Builder:
    def __init__(self, report: list[str] | None) -> None:
        self.out: list[JSON] = []
        self.report = report
        self.request: JSON | None = None  # the request being gathered

    def note(self, text: str) -> None:
        if self.report is not None:
            self.report.append(text)

    def part(self, target: JSON, metadata: JSON | None, built: JSON) -> None:
        """Add a part: as recorded when it was, else as built; a recorded envelope wins."""
        recorded = _recorded(metadata)
        if recorded is None:
            target["parts"].append(built)
            return
        if "message" in recorded and not target.get("_enveloped"):
            target.update(recorded["message"])
            target["_enveloped"] = True
        if recorded.get("part") is not None:
            target["parts"].append(recorded["part"])

    def open_request(self, ms: int, metadata: JSON | None) -> JSON:
        recorded = _recorded(metadata)
        starts_new = recorded is None or "message" in recorded
        if self.request is None or (starts_new and self.request.get("_enveloped")):
            self.request = {"kind": "request", "parts": [], "timestamp": _iso(ms)}
            self.out.append(self.request)
        return self.request

    def user(self, wp: v.WithParts) -> None:
        for p in wp.parts:
            if isinstance(p, v.TextPart) and (not p.ignored or _recorded(p.metadata)):
                kind = "system-prompt" if p.synthetic else "user-prompt"
                req = self.open_request(wp.info.time.created, p.metadata)
                self.part(req, p.metadata, {"part_kind": kind, "content": p.text,
                                            "timestamp": _iso(wp.info.time.created)})
            else:
                self.note(f"message {wp.info.id}: {p.TAG} part not sent")

    def assistant(self, wp: v.WithParts) -> None:
        self.request = None
        ms = wp.info.time.created
        resp: JSON = {"kind": "response", "parts": [], "timestamp": _iso(ms)}
        if isinstance(wp.info, v.AssistantInfo) and wp.info.model_id:
            resp["model_name"] = wp.info.model_id
        self.out.append(resp)
        tools: list[v.ToolPart] = []
        for p in wp.parts:
            if isinstance(p, v.TextPart):
                if p.ignored and not _recorded(p.metadata):
                    self.note(f"message {wp.info.id}: ignored text not sent")
                    continue
                self.part(resp, p.metadata, {"part_kind": "text", "content": p.text})
            elif isinstance(p, v.ReasoningPart):
                built: JSON = {"part_kind": "thinking", "content": p.text}
                signature = c.provider_data(p.metadata, "anthropic").get("signature")
                if signature:
                    built.update(signature=signature, provider_name="anthropic")
                self.part(resp, p.metadata, built)
            elif isinstance(p, v.ToolPart):
                self.part(resp, p.metadata, {"part_kind": "tool-call", "tool_name": p.tool,
                                             "args": dict(p.state.input),
                                             "tool_call_id": p.call_id})
                tools.append(p)
            else:
                self.note(f"message {wp.info.id}: {p.TAG} part not sent")
        waiting = wp.info.time.completed is None  # an open message: its calls may be deferred
        answered = [t for t in tools if not (waiting and isinstance(t.state, v.ToolStatePending))]
        for t in answered:
            self.result(t, ms)
        self.request = self.request if answered else None

    def result(self, t: v.ToolPart, ms: int) -> None:
        state = t.state
        meta = state.metadata if isinstance(state, v.ToolStateCompleted | v.ToolStateError) \
            else None
        req = self.open_request(ms, meta)
        base: JSON = {"tool_name": t.tool, "tool_call_id": t.call_id, "timestamp": _iso(ms)}
        if isinstance(state, v.ToolStateCompleted):
            built = {**base, "part_kind": "tool-return", "content": state.output}
        elif isinstance(state, v.ToolStateError):
            kind = (state.metadata or {}).get("kind", "error")
            if kind not in OUTCOMES and kind != "aborted" and _recorded(meta) is None:
                self.note(f"tool {t.call_id}: failed {kind}, sent as interrupted")
            built = {**base, "part_kind": "tool-return", "content": state.error,
                     "outcome": OUTCOMES.get(kind, "interrupted")}
        else:
            self.note(f"tool {t.call_id}: {state.TAG}, sent as interrupted")
            built = {**base, "part_kind": "tool-return", "content": INTERRUPTED,
                     "outcome": "interrupted"}
        self.part(req, meta, built)


def to_model_messages(history: list[v.WithParts], *, report: list[str] | None = None
                      ) -> list[ModelMessage]:
    """The history as pydantic-ai messages; what cannot be carried goes to ``report``."""
    b = _Builder(report)
    for wp in history:
        if isinstance(wp.info, v.UserInfo):
            b.user(wp)
        else:
            b.assistant(wp)
    data = [{k: val for k, val in m.items() if k != "_enveloped"} for m in b.out
            if m["parts"] or m["kind"] == "response" or m.get("_enveloped")]
    return ModelMessagesTypeAdapter.validate_python(data)


def history(session: Session, *, report: list[str] | None = None) -> list[ModelMessage]:
    """``message_history=`` for the next run: the session's log, folded and converted."""
    view = WithPartsProjection(session.id).apply_all(session.store.read(session.id))
    return to_model_messages(view.messages(), report=report)
