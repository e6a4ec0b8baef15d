"""A scripted Agents SDK ``Model``: no network, the outputs a real model would return.

Each call pops the next list of output items (``text(...)``, ``call(...)``) and
records the input the Runner sent, so a test can check the memory it was given.
"""

from __future__ import annotations

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
)


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
