"""A scripted Agents SDK ``Model``: no network, the outputs a real model would return.

Each call pops the next list of output items (``text(...)``, ``call(...)``) and
records the input the Runner sent, so a test can check the memory it was given.
:class:`StreamingModel` streams each output as the Responses API does (created,
item added, text and argument deltas, item done, completed), so a streamed run
goes through the SDK's own stream handling.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, Usage
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseStreamEvent,
)
from pydantic import TypeAdapter


def text(value: str, item_id: str = "msg_1") -> ResponseOutputMessage:
    return ResponseOutputMessage(id=item_id, type="message", role="assistant",
                                 status="completed", content=[ResponseOutputText(
                                     type="output_text", text=value, annotations=[])])


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{call_id}", type="function_call", call_id=call_id,
                                    name=name, arguments=json.dumps(args), status="completed")


class ScriptedModel(Model):
    def __init__(self, turns: list[list[TResponseOutputItem]]) -> None:
        self.turns = list(turns)
        self.inputs: list[str | list[TResponseInputItem]] = []

    async def get_response(self, system_instructions: str | None,
                           input: str | list[TResponseInputItem], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        output = self.turns.pop(0)
        return ModelResponse(output=output, usage=Usage(requests=1, input_tokens=10,
                                                        output_tokens=5, total_tokens=15),
                             response_id=None)

    async def stream_response(self, system_instructions: str | None,
                              input: str | list[TResponseInputItem], *args: Any,
                              **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        self.inputs.append(input)
        output = self.turns.pop(0)
        response = Response(id="resp_1", created_at=1, model="fake", object="response",
                            output=output, tool_choice="auto", tools=[],
                            parallel_tool_calls=False, status="completed")
        yield ResponseCompletedEvent(type="response.completed", response=response,
                                     sequence_number=0)


_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def stream_events(output: list[TResponseOutputItem], *, response_id: str = "resp_1",
                  cut_after: int | None = None) -> list[TResponseStreamEvent]:
    """The Responses stream a server sends for ``output``, as the SDK's event objects.

    ``cut_after``: only the first that many events (the stream is cut there).
    """
    seq = iter(range(10_000))
    events: list[dict[str, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(seq), **fields})

    def response(status: str, items: list[Any]) -> dict[str, Any]:
        return {"id": response_id, "object": "response", "created_at": 1, "model": "fake",
                "status": status, "output": items, "parallel_tool_calls": False,
                "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                          "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}

    add("response.created", response=response("in_progress", []))
    for index, item in enumerate(output):
        done = item.model_dump(mode="json", exclude_none=True)
        if done["type"] == "message":
            text = done["content"][0]["text"]
            ref = {"item_id": done["id"], "output_index": index}
            add("response.output_item.added", output_index=index,
                item={**done, "status": "in_progress", "content": []})
            add("response.content_part.added", **ref, content_index=0,
                part={"type": "output_text", "text": "", "annotations": []})
            for start in range(0, len(text), 4):
                add("response.output_text.delta", **ref, content_index=0,
                    delta=text[start:start + 4], logprobs=[])
            add("response.output_text.done", **ref, content_index=0, text=text, logprobs=[])
            add("response.content_part.done", **ref, content_index=0,
                part=done["content"][0])
        elif done["type"] == "function_call":
            add("response.output_item.added", output_index=index,
                item={**done, "status": "in_progress", "arguments": ""})
            add("response.function_call_arguments.delta", item_id=done["id"],
                output_index=index, delta=done["arguments"])
            add("response.function_call_arguments.done", item_id=done["id"],
                output_index=index, arguments=done["arguments"], name=done["name"])
        add("response.output_item.done", output_index=index, item=done)
    add("response.completed",
        response=response("completed", [i.model_dump(mode="json") for i in output]))
    if cut_after is not None:
        events = events[:cut_after]
    return [_EVENTS.validate_python(e) for e in events]


class StreamingModel(ScriptedModel):
    """Streams each scripted output event by event (``pause`` seconds between events).

    A turn given as an exception is raised when the model is called; ``cut_after``
    cuts every stream after that many events and raises ``ConnectionError``.
    """

    def __init__(self, turns: list[Any], *, pause: float = 0.0,
                 cut_after: int | None = None) -> None:
        super().__init__(turns)
        self.pause = pause
        self.cut_after = cut_after
        self.calls = 0

    async def stream_response(self, system_instructions: str | None,
                              input: str | list[TResponseInputItem], *args: Any,
                              **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        self.inputs.append(input)
        self.calls += 1
        output = self.turns.pop(0)
        for event in stream_events(output, response_id=f"resp_{self.calls}",
                                   cut_after=self.cut_after):
            if self.pause:
                await asyncio.sleep(self.pause)
            yield event
        if self.cut_after is not None:
            raise ConnectionError("the connection dropped mid-stream")
