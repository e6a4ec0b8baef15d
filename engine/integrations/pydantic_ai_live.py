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
- the response's message completes once its calls are answered. A call the
  run never answers (a deferred tool waiting for approval) fails ``cancelled``
  when the run ends; an exception or a cancel aborts the message (its
  unanswered calls fail ``aborted``) and propagates unchanged.

A recording failure (convlog refuses an event) never changes what the run
sees: the message being written is settled, the typed error is kept in
:attr:`LiveRecorder.error`, and the rest of the run passes unrecorded; with
``strict=True`` it is raised instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Final

from pydantic_ai.messages import (
    FunctionToolCallEvent,
    ModelMessagesTypeAdapter,
    ModelRequest,
    OutputToolCallEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
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
from engine.session import PartRef, Session

NOT_RUN: Final = "not run: the run ended before this call"


def _part_json(part: ToolReturnPart) -> JSON:
    """A request part as pydantic-ai serializes it inside a message."""
    [message] = ModelMessagesTypeAdapter.dump_python([ModelRequest(parts=[part])], mode="json")
    part_data: JSON = message["parts"][0]
    return part_data


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
        self._parts: dict[int, PartRef] = {}  # response part index -> its part
        self._calls: dict[str, PartRef] = {}  # tool call id -> its unanswered tool
        self._streaming = False  # a model response is streaming

    # ------------------------------------------------------------------ entry points

    def prompt(self, text: str) -> str:
        """Record the user prompt; returns it, to pass on to the run."""
        self.session.user_message(text, agent=self.agent)
        return text

    async def run(self, agent: Any, prompt: str, **kwargs: Any) -> Any:
        """``agent.run(prompt, event_stream_handler=self, **kwargs)``, recorded."""
        self.prompt(prompt)
        try:
            result = await agent.run(prompt, event_stream_handler=self, **kwargs)
        except BaseException as exc:
            self.settle(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
        self._guarded(self.finish)
        return result

    async def __call__(self, ctx: Any, events: AsyncIterable[Any]) -> None:
        """The ``event_stream_handler``: consumes a node's events, recording each."""
        async for _ in self.events(events):
            pass

    async def events(self, events: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """``events``, each recorded before it is handed on; settles if the stream breaks."""
        try:
            async for event in events:
                self.record(event)
                yield event
        except BaseException as exc:
            self.settle(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
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

    def _record(self, event: Any) -> None:
        if isinstance(event, PartStartEvent):
            self._start(event.index, event.part)
        elif isinstance(event, PartDeltaEvent):
            self._delta(event.index, event.delta)
        elif isinstance(event, PartEndEvent):
            self._end(event.index, event.part)
        elif isinstance(event, FunctionToolCallEvent | OutputToolCallEvent):
            ref = self._calls.get(event.part.tool_call_id)
            part = self.session.lifecycle.part(*ref) if ref is not None else None
            if ref is not None and part is not None and part.state == "pending":
                self.session.start_tool(ref)
        elif isinstance(event, ToolResultEvent):
            self._result(event.part)

    def _open(self) -> str:
        if self.message is None:
            self.message = self.session.start_message("assistant", agent=self.agent)
            self._parts = {}
        self._streaming = True
        return self.message

    def _start(self, index: int, part: Any) -> None:
        mid = self._open()
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

    def _delta(self, index: int, delta: Any) -> None:
        ref = self._parts.get(index)
        if ref is None:
            return
        if isinstance(delta, TextPartDelta) and delta.content_delta:
            self.session.text_delta(ref, delta.content_delta)
        elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
            self.session.reasoning_delta(ref, delta.content_delta)
        elif isinstance(delta, ToolCallPartDelta) and isinstance(delta.args_delta, str) \
                and delta.args_delta:
            self.session.tool_input_delta(ref, delta.args_delta)

    def _end(self, index: int, part: Any) -> None:
        ref = self._parts.pop(index, None)
        if ref is None:
            return
        if isinstance(part, ToolCallPart):
            self.session.tool_input_ready(ref, part.args_as_dict())
        else:
            self.session.end_part(ref)

    def _result(self, part: ToolReturnPart) -> None:
        ref = self._calls.pop(part.tool_call_id, None)
        if ref is None:
            return
        life = self.session.lifecycle.part(*ref)
        if life is not None and life.state == "pending":
            self.session.start_tool(ref)
        meta = {KEY: {"part": _part_json(part)}}
        outcome = part.outcome
        if outcome == "success":
            self.session.complete_tool(ref, _content(part) or EMPTY_OUTPUT, metadata=meta)
        else:
            error = _content(part)
            self.session.fail_tool(ref, error if error.strip() else outcome,
                                   kind=FAILURE_KINDS.get(outcome, "error"), metadata=meta)
        self._complete_if_answered()

    # ------------------------------------------------------------------ endings

    def _end_of_response(self) -> None:
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

    def finish(self) -> None:
        """The run ended normally: calls it never ran fail ``cancelled``, the message completes."""
        if self.message is None:
            return
        for ref in self._calls.values():
            part = self.session.lifecycle.part(*ref)
            if part is not None and part.state in ("pending", "running"):
                self.session.fail_tool(ref, NOT_RUN, kind="cancelled")
        self._calls.clear()
        self._streaming = False
        self._complete_if_answered()

    def settle(self, reason: str) -> None:
        """The run broke off (an exception, a cancel): abort the message being written."""
        if self.message is not None:
            mid, self.message = self.message, None
            if self.session.lifecycle.messages[mid].state == "open":
                self.session.abort(mid, reason[:500])
        self._calls.clear()
        self._parts = {}
        self._streaming = False
