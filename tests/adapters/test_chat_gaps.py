"""Chat Completions gaps closed by issue 24/26: ``reasoning_content`` deltas (DeepSeek,
OpenCode, aider) are a reasoning part; a stream opening with ``content: ""`` before its
tool calls leaves no empty text part (the SDK's content is still ""); the arguments of
a call that ran render byte for byte (escapes, big integers, lone surrogates)."""

from __future__ import annotations

from typing import Any

from engine.adapters.openai_chat import OpenAIChatIngest
from projections import views as v
from projections.render import openai_chat as render
from tests.adapters.test_ingest_openai_chat import sdk
from tests.support.ingest_checks import fresh, run_tools

ARGS = '{"l\\u00ednea\\nbreak": 1' + "0" * 25 + ', "s": "\\ud800"}'


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHUNKS = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "think \ud800"}),
    chunk({"reasoning_content": "ing"}),
    chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                           "function": {"name": "f", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS[:9]}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS[9:]}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                           "function": {"name": "g", "arguments": ""}}]}),
    chunk({}, "tool_calls"),
]


def test_reasoning_content_empty_content_and_exact_arguments() -> None:
    session, proj = fresh()
    ing = OpenAIChatIngest(session)
    result = ing.ingest(CHUNKS)
    run_tools(session, ing)  # the calls ran: their arguments are still the model's text
    wp = proj.message(result.message_id)
    assert [type(p) for p in wp.parts] == [v.StepStartPart, v.ReasoningPart, v.ToolPart,
                                            v.ToolPart, v.StepFinishPart]
    mine = render.response(wp)
    theirs = sdk(CHUNKS)
    message = mine["choices"][0]["message"]
    assert message == {k: x for k, x in theirs["choices"][0]["message"].items()
                       if x is not None or k == "refusal"} | {
        "tool_calls": message["tool_calls"]}
    calls = theirs["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == [
        c["function"]["arguments"] for c in calls] == [ARGS, ""]
    assert message["content"] == ""
    assert message["reasoning_content"] == "think \ud800ing"
