"""Record a pydantic-ai run as it streams (the write half of live recording).

``live = LiveRecorder(session)`` is an ``event_stream_handler``: give it to
``agent.run(...)``, ``agent.run_stream(...)`` or ``agent.iter(...)``, or wrap
any event stream with :meth:`LiveRecorder.events` (a node's ``stream`` under
``agent.iter``, ``agent.run_stream_events``). :meth:`LiveRecorder.run` does the
whole turn in one line: the user prompt, the run with the handler, settling.

- a model response: an assistant message; ``TextPart`` and ``ThinkingPart``
  stream as text and reasoning deltas, a ``ToolCallPart`` is a tool part
  (``pending``, its argument deltas recorded, its input ready at the part's end);
- a function or output tool call event: the tool ``running``; its result
  event completes it, or, for an outcome other than ``success``, fails it
  (``retried`` and ``failed``: kind ``error``, the retry prompt's text as the
  error; ``denied``; ``interrupted``: ``aborted``); the result part is kept as
  pydantic-ai serializes it (``metadata["pydantic_ai"]["part"]``), so a retry
  goes back to pydantic-ai as the same retry prompt;
- the response's message completes once its calls are answered. A deferred
  call (``DeferredToolRequestsEvent``) stays in the log waiting: a tool that
  needs approval is ``awaiting-approval``, an external one ``pending``, and the
  message stays open, so a later run, from a fresh recorder in another request
  or process, resumes it with ``deferred_tool_results`` (the recorder takes the
  open message and its waiting calls from the log). Another call the run never
  answers fails ``cancelled`` when the run ends; an exception or a cancel
  aborts the message (its unanswered calls fail ``aborted``) and propagates
  unchanged;
- ``agent.run_stream`` hands the handler the response only up to its final
  result; the caller streams the rest. :meth:`LiveRecorder.run_stream` (or
  ``finish(result)`` after ``agent.run_stream(..., event_stream_handler=live)``)
  records the rest from the result once the caller has consumed it; a stream
  the caller left unfinished, or ``finish()`` without the result, ends the
  message aborted as incomplete: never a completed message short of its text.

A recording failure (convlog refuses an event) never changes what the run
sees: the message being written is settled, the typed error is kept in
:attr:`LiveRecorder.error`, and the rest of the run passes unrecorded; with
``strict=True`` it is raised instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from pydantic_ai.messages import (
    DeferredToolRequestsEvent,
    FinalResultEvent,
    FunctionToolCallEvent,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    OutputToolCallEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolResultEvent,
    ToolReturnPart,
)

from engine.errors import ConvlogError
from engine.integrations.pydantic_ai import EMPTY_OUTPUT, FAILURE_KINDS, JSON, KEY
from engine.integrations.writers import open_message
from engine.session import PartRef, Session

NOT_RUN: Final = "not run: the run ended before this call"
INCOMPLETE: Final = ("incomplete: the answer streamed on to the caller past the event stream "
                     "handler and was not recorded (record run_stream with live.run_stream, "
                     "or pass the result to live.finish)")
UNFINISHED: Final = "incomplete: the caller stopped before the stream ended"


def _part_json(part: ToolReturnPart) -> JSON:
    """A request part as pydantic-ai serializes it inside a message."""
    [message] = ModelMessagesTypeAdapter.dump_python([ModelRequest(parts=[part])], mode="json")
    part_data: JSON = message["parts"][0]
    return part_data


def _full(part: Any) -> str:
    """What a part's deltas add up to: its text, thinking, or arguments as streamed."""
    if isinstance(part, TextPart | ThinkingPart):
        return part.content
    if isinstance(part, ToolCallPart) and isinstance(part.args, str):
        return part.args
    return ""


def _content(part: ToolReturnPart) -> str:
    content = part.content
    if isinstance(content, str):
        return content
    return json.dumps(_part_json(part).get("content"), ensure_ascii=False)


class LiveRecorder:
    """Records pydantic-ai stream events into ``session`` as they pass."""

    def __init__(self, session: Session, *, agent: str = "", strict: bool = False) -> None:
        self.session = session
        self.agent = agent
        self.strict = strict
        self.error: ConvlogError | None = None  # why recording stopped
        self.message: str | None = None  # the assistant message being written
        self._parts: dict[int, PartRef] = {}  # response part index -> its open part
        self._so_far: dict[int, str] = {}  # response part index -> what its deltas said
        self._seen: set[int] = set()  # response part indexes started
        self._calls: dict[str, PartRef] = {}  # tool call id -> its unanswered tool
        self._to_start: list[str] = []  # called, started once known not to be deferred
        self._deferred: set[str] = set()  # waiting for approval or an external result
        self._streaming = False  # a model response is streaming
        self._handed_off = False  # the rest of the response streams to run_stream's caller

    # ------------------------------------------------------------------ entry points

    def prompt(self, text: str) -> str:
        """Record the user prompt; returns it, to pass on to the run."""
        self.session.user_message(text, agent=self.agent)
        return text

    async def run(self, agent: Any, prompt: str | None, **kwargs: Any) -> Any:
        """``agent.run(prompt, event_stream_handler=self, **kwargs)``, recorded.

        ``prompt`` None: a run without a new prompt (resuming deferred calls
        with ``deferred_tool_results=``).
        """
        if prompt is not None:
            self.prompt(prompt)
        try:
            result = await agent.run(prompt, event_stream_handler=self, **kwargs)
        except BaseException as exc:
            self.settle(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
        self._guarded(self.finish)
        return result

    @asynccontextmanager
    async def run_stream(self, agent: Any, prompt: str | None, **kwargs: Any
                         ) -> AsyncIterator[Any]:
        """``async with agent.run_stream(prompt, event_stream_handler=self, **kwargs)``,
        recorded whole however the caller consumes the result."""
        if prompt is not None:
            self.prompt(prompt)
        try:
            async with agent.run_stream(prompt, event_stream_handler=self, **kwargs) as result:
                yield result
        except BaseException as exc:
            self.settle(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
        self._guarded(self.finish, result)

    async def __call__(self, ctx: Any, events: AsyncIterable[Any]) -> None:
        """The ``event_stream_handler``: consumes a node's events, recording each."""
        async for _ in self.events(events):
            pass

    async def events(self, events: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """``events``, each recorded before it is handed on; settles if the stream breaks."""
        self._guarded(self._resume)
        last: Any = None
        try:
            async for event in events:
                self.record(event)
                last = event
                yield event
        except BaseException as exc:
            self.settle(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
        if isinstance(last, FinalResultEvent) and self._parts:
            self._handed_off = True  # run_stream: the caller streams the rest
            return
        self._guarded(self._end_of_response)

    # ------------------------------------------------------------------ events

    def record(self, event: Any) -> None:
        """Record one event; a refusal settles the message and stops the recording."""
        self._guarded(self._record, event)

    def _guarded(self, step: Any, *args: Any) -> None:
        if self.error is not None:
            return
        try:
            step(*args)
        except ConvlogError as exc:
            self.error = exc
            self.settle(f"recording stopped: {exc}")
            if self.strict:
                raise

    def _resume(self) -> None:
        """Continue the message a run left waiting for deferred calls (from the log)."""
        if self.message is not None:
            return
        mid, calls, _ = open_message(self.session.lifecycle)
        if mid is not None and calls:
            self.message, self._calls = mid, calls
            self._deferred = set(calls)
            self._parts, self._so_far, self._seen = {}, {}, set()

    def _record(self, event: Any) -> None:
        if isinstance(event, FunctionToolCallEvent | OutputToolCallEvent):
            if event.part.tool_call_id in self._calls:
                self._to_start.append(event.part.tool_call_id)
            return
        if isinstance(event, DeferredToolRequestsEvent):
            self._defer(event)
        self._start_called()
        if isinstance(event, PartStartEvent):
            self._start(event.index, event.part)
        elif isinstance(event, PartDeltaEvent):
            self._delta(event.index, event.delta)
        elif isinstance(event, PartEndEvent):
            self._end(event.index, event.part)
        elif isinstance(event, ToolResultEvent):
            self._result(event.part)

    def _defer(self, event: DeferredToolRequestsEvent) -> None:
        for part in event.requests.approvals:
            ref = self._calls.get(part.tool_call_id)
            life = self.session.lifecycle.part(*ref) if ref is not None else None
            if ref is not None and life is not None and life.state == "pending":
                self.session.request_approval(ref)
            self._deferred.add(part.tool_call_id)
        self._deferred.update(p.tool_call_id for p in event.requests.calls)

    def _start_called(self) -> None:
        """Start the called tools that are not deferred: they run now."""
        to_start, self._to_start = self._to_start, []
        for call_id in to_start:
            ref = self._calls.get(call_id)
            life = self.session.lifecycle.part(*ref) if ref is not None else None
            if ref is not None and life is not None and life.state == "pending" \
                    and call_id not in self._deferred:
                self.session.start_tool(ref)

    def _open(self) -> str:
        if self.message is None:
            self.message = self.session.start_message("assistant", agent=self.agent)
            self._parts, self._so_far, self._seen = {}, {}, set()
        self._streaming = True
        return self.message

    def _start(self, index: int, part: Any) -> None:
        mid = self._open()
        self._seen.add(index)
        if isinstance(part, TextPart):
            self._parts[index] = self.session.add_text(mid, part.content)
        elif isinstance(part, ThinkingPart):
            self._parts[index] = self.session.add_reasoning(mid, part.content)
        elif isinstance(part, ToolCallPart) and part.tool_call_id not in self._calls \
                and (mid, part.tool_call_id) not in self.session.lifecycle.call_ids:
            ref = self.session.add_tool(mid, part.tool_call_id, part.tool_name)
            self._parts[index] = self._calls[part.tool_call_id] = ref
            if isinstance(part.args, str) and part.args:
                self.session.tool_input_delta(ref, part.args)
        else:
            return
        self._so_far[index] = _full(part)

    def _delta(self, index: int, delta: Any) -> None:
        ref = self._parts.get(index)
        if ref is None:
            return
        if isinstance(delta, TextPartDelta) and delta.content_delta:
            self.session.text_delta(ref, delta.content_delta)
            self._so_far[index] += delta.content_delta
        elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
            self.session.reasoning_delta(ref, delta.content_delta)
            self._so_far[index] += delta.content_delta
        elif isinstance(delta, ToolCallPartDelta) and isinstance(delta.args_delta, str) \
                and delta.args_delta:
            self.session.tool_input_delta(ref, delta.args_delta)
            self._so_far[index] += delta.args_delta

    def _end(self, index: int, part: Any) -> None:
        ref = self._parts.pop(index, None)
        if ref is None:
            return
        if isinstance(part, ToolCallPart):
            self.session.tool_input_ready(ref, part.args_as_dict())
        else:
            self.session.end_part(ref)

    def _result(self, part: ToolReturnPart | RetryPromptPart) -> None:
        ref = self._calls.pop(part.tool_call_id, None) if part.tool_call_id else None
        if ref is None:
            return
        self._deferred.discard(part.tool_call_id)
        if isinstance(part, RetryPromptPart):
            self._ready_to_run(ref)
            self.session.fail_tool(ref, part.model_response(), kind="error")
            self._complete_if_answered()
            return
        meta = {KEY: {"part": _part_json(part)}}
        outcome = part.outcome
        life = self.session.lifecycle.part(*ref)
        if outcome == "denied" and life is not None and life.state == "awaiting-approval":
            self.session.deny(ref, _content(part) or outcome)
            self._complete_if_answered()
            return
        self._ready_to_run(ref)
        if outcome == "success":
            self.session.complete_tool(ref, _content(part) or EMPTY_OUTPUT, metadata=meta)
        else:
            error = _content(part)
            self.session.fail_tool(ref, error if error.strip() else outcome,
                                   kind=FAILURE_KINDS.get(outcome, "error"), metadata=meta)
        self._complete_if_answered()

    def _ready_to_run(self, ref: PartRef) -> None:
        """Move a tool that is about to have a result to running (approved first, if
        it was waiting for the approval this result implies)."""
        life = self.session.lifecycle.part(*ref)
        if life is not None and life.state == "awaiting-approval":
            self.session.approve(ref)
            life = self.session.lifecycle.part(*ref)
        if life is not None and life.state in ("pending", "approved"):
            self.session.start_tool(ref)

    # ------------------------------------------------------------------ endings

    def _end_of_response(self) -> None:
        self._start_called()
        if self._streaming:
            self._streaming = False
            for ref in self._parts.values():  # a part the stream never ended
                self.session.end_part(ref)
            self._parts = {}
        self._complete_if_answered()

    def _complete_if_answered(self) -> None:
        if self.message is not None and not self._calls and not self._streaming:
            mid, self.message = self.message, None
            self.session.complete_message(mid)

    def _rest_of_response(self, result: Any) -> None:
        """Record what run_stream's caller streamed past the handler: the rest of each
        part of the final response, then the tool returns the run answered it with."""
        response: ModelResponse = result.response
        for index, part in enumerate(response.parts):
            if index not in self._parts:
                if index in self._seen:
                    continue  # started and ended while the handler saw the stream
                self._start(index, part)
                if index not in self._parts:
                    continue  # a part kind convlog records otherwise (or not at all)
            ref, so_far, full = self._parts[index], self._so_far.get(index, ""), _full(part)
            if not full.startswith(so_far):
                raise StreamMismatch(index)
            rest = full[len(so_far):]
            if rest and isinstance(part, TextPart):
                self.session.text_delta(ref, rest)
            elif rest and isinstance(part, ThinkingPart):
                self.session.reasoning_delta(ref, rest)
            elif rest and isinstance(part, ToolCallPart):
                self.session.tool_input_delta(ref, rest)
            self._end(index, part)
        self._streaming = False
        messages = result.all_messages()
        at = max(i for i, m in enumerate(messages) if isinstance(m, ModelResponse))
        for request in messages[at + 1:]:
            for p in request.parts:
                if isinstance(p, ToolReturnPart | RetryPromptPart):
                    self._result(p)

    def finish(self, result: Any = None) -> None:
        """The run ended normally: calls it never ran fail ``cancelled``, deferred calls
        wait, the message completes.

        ``result``: run_stream's result, to record what its caller streamed past
        the handler; without it (or if the caller left the stream unfinished) the
        message ends aborted as incomplete.
        """
        if self.message is None:
            return
        if self._handed_off:
            self._handed_off = False
            if result is None:
                self.settle(INCOMPLETE)
                return
            if not getattr(result, "is_complete", False) or _cancelled(result):
                self.settle(UNFINISHED)
                return
            try:
                self._rest_of_response(result)
            except StreamMismatch as exc:
                self.settle(f"incomplete: {exc}")
                return
        self._start_called()
        for call_id, ref in list(self._calls.items()):
            if call_id in self._deferred:
                continue  # waits for deferred_tool_results in a later run
            part = self.session.lifecycle.part(*ref)
            if part is not None and part.state in ("pending", "running"):
                self.session.fail_tool(ref, NOT_RUN, kind="cancelled")
            del self._calls[call_id]
        self._streaming = False
        if self._calls:  # deferred calls: the message stays open for them
            self.message = None
            self._calls = {}
            self._deferred = set()
            return
        self._complete_if_answered()

    def settle(self, reason: str) -> None:
        """The run broke off (an exception, a cancel): abort the message being written."""
        if self.message is not None:
            mid, self.message = self.message, None
            if self.session.lifecycle.messages[mid].state == "open":
                self.session.abort(mid, reason[:500])
        self._calls = {}
        self._parts, self._so_far, self._seen = {}, {}, set()
        self._to_start = []
        self._deferred = set()
        self._streaming = False
        self._handed_off = False


class StreamMismatch(Exception):
    """The final response does not continue what the stream recorded."""

    def __init__(self, index: int) -> None:
        super().__init__(f"part {index} of the final response does not continue the "
                         "recorded stream")


def _cancelled(result: Any) -> bool:
    cancelled = getattr(result, "cancelled", False)
    return bool(cancelled() if callable(cancelled) else cancelled)
