"""Record an OpenAI Agents SDK streamed run (``Runner.run_streamed``) as it streams.

``async for event in record_run(result, session): ...`` hands every stream
event to the caller unchanged, after recording it into ``session``:

- the run's input: a user message (its text);
- each model response (the raw Responses events): one assistant message of
  the agent that ran it, with its text, reasoning and argument deltas, fed to an
  :class:`~engine.adapters.openai_responses.OpenAIResponsesIngest`;
- each function call: a tool part, ``pending`` while the model streams it,
  ``running`` at the SDK's ``tool_called``, ``completed`` at its ``tool_output``
  (or failed, kind ``error``, with the text the model saw, when the output is the
  SDK's handled tool error: ``tool_error`` recognises it, by default the text of
  the SDK's default ``failure_error_function``);
  the message completes once all its calls are answered;
- a handoff: its call is a tool part like any other, answered by the SDK's
  ``handoff_occured``, and the agent taking over is an agent part of that
  message; the next messages carry its name;
- a guardrail trip (input, output, tool input or tool output): a
  ``guardrail.tripped`` event naming the guardrail, its stage, the agent and the
  message it stopped (``stopped_message``); the SDK's exception propagates unchanged.

However the run ends, the session is settled: a message still streaming or
waiting for its calls is aborted; a call the SDK was running when the run
raised fails with kind ``error`` (the exception's text), every other unanswered
call fails ``aborted``. A cancelled run (``result.cancel()``, a cancelled task,
the caller leaving the loop) is settled the same way.

The memory of the run (``session=`` of the Runner) is another matter: keep it
in a :class:`projections.integrations.openai_agents.ConvlogSession` of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from agents.exceptions import (
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
)
from agents.result import RunResultStreaming
from agents.stream_events import StreamEvent

from engine import events as ev
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.integrations.openai_agents import (
    EMPTY_OUTPUT,
    ToolErrorCheck,
    content_text,
    sdk_tool_error,
)
from engine.integrations.recording import Recording
from engine.session import PartRef, Session

JSON = dict[str, Any]
ENDED_EARLY: Final = "the run ended before this call was answered"
TRIPPED: Final = "a guardrail stopped the run"


def _json(value: Any) -> JSON | None:
    """A guardrail's output info as a JSON object (pydantic models and dataclasses dumped)."""
    if value is None:
        return None
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    try:
        value = json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return {"repr": repr(value)}
    return value if isinstance(value, dict) else {"value": value}


def _trip(exc: BaseException) -> tuple[str, ev.GuardrailStage, Any] | None:
    """The guardrail, stage and output info of a tripwire exception."""
    if isinstance(exc, InputGuardrailTripwireTriggered):
        r = exc.guardrail_result
        return r.guardrail.get_name(), "input", r.output.output_info
    if isinstance(exc, OutputGuardrailTripwireTriggered):
        o = exc.guardrail_result
        return o.guardrail.get_name(), "output", o.output.output_info
    if isinstance(exc, ToolInputGuardrailTripwireTriggered):
        return exc.guardrail.get_name(), "tool_input", exc.output.output_info
    if isinstance(exc, ToolOutputGuardrailTripwireTriggered):
        return exc.guardrail.get_name(), "tool_output", exc.output.output_info
    return None


def _call_id(raw: Any) -> str:
    value = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return value if isinstance(value, str) else ""


def _output(item: Any) -> str:
    raw = item.raw_item
    output = raw.get("output") if isinstance(raw, dict) else getattr(item, "output", None)
    text = output if isinstance(output, str) else content_text(output) if isinstance(
        output, list) else json.dumps(output, ensure_ascii=False, default=str)
    return text or EMPTY_OUTPUT


class RunRecorder:
    """Records one streamed run into ``session``; :meth:`stream` is the recording iterator."""

    def __init__(self, session: Session, *, strict: bool = False,
                 tool_error: ToolErrorCheck = sdk_tool_error, **ingest_options: Any) -> None:
        self.session = session
        self.strict = strict
        self.tool_error = tool_error
        self.ingest_options = ingest_options
        self.agent = ""
        self.recordings: list[Recording] = []
        self.tripped: ev.GuardrailTripped | None = None
        self._calls: dict[str, tuple[Recording, PartRef]] = {}  # call id -> its open tool
        self._running: set[str] = set()
        self._waiting: dict[str, set[str]] = {}  # message id -> its unanswered call ids

    @property
    def last(self) -> Recording | None:
        return self.recordings[-1] if self.recordings else None

    async def stream(self, result: RunResultStreaming) -> AsyncIterator[StreamEvent]:
        self.agent = result.current_agent.name
        self._input(result.input)
        try:
            async for event in result.stream_events():
                self.event(event)
                yield event
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:  # also when the caller leaves the loop (the generator is closed)
            self.settle("the run stopped before this message was complete")

    # ------------------------------------------------------------------ events

    def event(self, event: StreamEvent) -> None:
        if event.type == "agent_updated_stream_event":
            self.agent = event.new_agent.name
        elif event.type == "raw_response_event":
            self._raw(event.data)
        else:
            self._item(event.name, event.item)

    def _input(self, given: Any) -> None:
        if isinstance(given, str):
            self.session.user_message(given, agent=self.agent)
            return
        texts = [content_text(i.get("content")) for i in given
                 if isinstance(i, dict) and i.get("role") == "user"]
        if texts:
            self.session.user_message("\n".join(texts), agent=self.agent)

    def _raw(self, data: Any) -> None:
        kind = getattr(data, "type", "")
        # A response starts with response.created; after a refused event, the rest
        # of that response passes unrecorded (its message is already settled).
        if kind == "response.created" or self.last is None:
            if self.last is not None and not self.last.done:
                self.last.broken("a new response started before this one completed")
            ingest = OpenAIResponsesIngest(self.session, agent=self.agent, **self.ingest_options)
            self.recordings.append(Recording(ingest, strict=self.strict))
        rec = self.recordings[-1]
        rec.event(data)
        if rec.ingest.stopped and not rec.done:
            rec.end()
            waiting = {c.call_id for c in rec.result.tool_calls}
            for c in rec.result.tool_calls:
                self._calls[c.call_id] = (rec, c.ref)
            if waiting and not rec.ingest.completed:
                self._waiting[rec.message_id] = waiting

    def _item(self, name: str, item: Any) -> None:
        call_id = _call_id(item.raw_item)
        found = self._calls.get(call_id)
        if found is None:
            return  # recorded from the raw events (messages, reasoning) or not a call of ours
        rec, ref = found
        if name in ("tool_called", "handoff_requested"):
            part = self.session.lifecycle.part(ref.message_id, ref.part_id)
            if part is not None and part.state == "pending":
                self.session.start_tool(ref)
                self._running.add(call_id)
        elif name in ("tool_output", "handoff_occured"):
            if call_id not in self._running:
                self.session.start_tool(ref)
            self._running.discard(call_id)
            del self._calls[call_id]
            output = _output(item)
            if name == "tool_output" and self.tool_error(output):
                # the SDK handled the tool's exception: the model saw this text
                self.session.fail_tool(ref, output, kind="error")
            else:
                self.session.complete_tool(ref, output)
            if name == "handoff_occured":
                self.session.add_agent(ref.message_id, item.target_agent.name)
            self._answered(rec, call_id)

    def _answered(self, rec: Recording, call_id: str) -> None:
        waiting = self._waiting.get(rec.message_id)
        if waiting is None:
            return
        waiting.discard(call_id)
        if not waiting:
            del self._waiting[rec.message_id]
            rec.ingest.complete()

    # ------------------------------------------------------------------ endings

    def fail(self, exc: BaseException) -> None:
        """The run raised: record a guardrail trip, settle with the exception as reason."""
        trip = _trip(exc)
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if trip is not None:
            guardrail, stage, info = trip
            if self.session.lifecycle.conversation.state == "absent":
                self.session.create_conversation()
            last = self.last
            [tripped] = self.session.record([ev.GuardrailTripped(
                guardrail=guardrail, stage=stage, agent=self.agent,
                stopped_message=last.message_id if last is not None else "",
                info=_json(info))])
            assert isinstance(tripped, ev.GuardrailTripped)
            self.tripped = tripped
            reason = f"{TRIPPED}: {stage} guardrail {guardrail}"
        cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit) or trip is not None
        if not cancelled:  # the call the SDK was running is what raised
            for call_id in sorted(self._running):
                _, ref = self._calls.pop(call_id)
                self.session.fail_tool(ref, reason, kind="error")
        self.settle(reason)

    def settle(self, reason: str) -> None:
        """Abort what the run left open: a streaming message, a message waiting for calls."""
        for rec in self.recordings:
            if not rec.done:
                rec.broken(reason)
        for mid in list(self._waiting):
            del self._waiting[mid]
            if self.session.lifecycle.messages[mid].state == "open":
                self.session.abort(mid, f"{reason} ({ENDED_EARLY})")
        self._calls.clear()
        self._running.clear()


def record_run(result: RunResultStreaming, session: Session, *, strict: bool = False,
               tool_error: ToolErrorCheck = sdk_tool_error,
               **ingest_options: Any) -> AsyncIterator[StreamEvent]:
    """``result.stream_events()``, recorded into ``session`` as the events pass."""
    return RunRecorder(session, strict=strict, tool_error=tool_error,
                       **ingest_options).stream(result)
