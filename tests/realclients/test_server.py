"""The scripted server's streams read by the providers' own SDKs (the reference for
each format): what the SDK accumulates is what the server logged it sent, so a
fixture's ``server.jsonl`` is a true record of what the CLI received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from tests.realclients import truth
from tests.realclients.server import ScriptedServer

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}}}]
FUNCTIONS = [{"type": "function", "name": "shell", "parameters": {
    "type": "object", "properties": {"command": {"type": "array"}}}}]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedServer]:
    with ScriptedServer(tmp_path / "server.jsonl", max_requests=5) as s:
        yield s


def _logged(server: ScriptedServer) -> list[truth.Sent]:
    folder = server.log_path.parent
    (folder / "steps.json").write_text("[]")
    return truth.load(folder).sent


def test_anthropic_sdk_reads_the_parallel_calls(server: ScriptedServer) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    with client.messages.stream(model="m", max_tokens=100, tools=TOOLS,  # type: ignore[arg-type]
                                messages=[{"role": "user", "content": "[[parallel]] go"}]) as s:
        message = s.get_final_message()
    [sent] = _logged(server)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert calls == [(c.id, c.name, c.input) for c in sent.calls]
    assert [b.text for b in message.content if b.type == "text"] == sent.texts
    assert (message.usage.input_tokens, message.usage.output_tokens) == (
        sent.input_tokens, sent.output_tokens)
    assert message.stop_reason == "tool_use"


def test_anthropic_sdk_sees_the_scripted_error(server: ScriptedServer) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="scripted invalid request"):
        client.messages.create(model="m", max_tokens=10, stream=True,
                               messages=[{"role": "user", "content": "[[error]] no"}])
    assert _logged(server)[0].error


def test_openai_responses_sdk_reads_the_calls(server: ScriptedServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    with client.responses.stream(model="m", input="[[parallel]] go",
                                 tools=FUNCTIONS) as s:  # type: ignore[arg-type]
        response = s.get_final_response()
    [sent] = _logged(server)
    calls = [(o.call_id, o.name, json.loads(o.arguments)) for o in response.output
             if o.type == "function_call"]
    assert calls == [(c.id, c.name, c.input) for c in sent.calls]
    assert response.output_text == "".join(sent.texts)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        sent.input_tokens, sent.output_tokens)


def test_openai_chat_sdk_reads_stream_and_whole(server: ScriptedServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]
    with client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "[[parallel]] go"}],
            tools=tools, stream_options={"include_usage": True}) as s:  # type: ignore[arg-type]
        streamed = s.get_final_completion()
    whole = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "[[text]] hi"}])
    first, second = _logged(server)
    calls = streamed.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        (c.id, c.name, c.input) for c in first.calls]
    assert streamed.usage is not None
    assert streamed.usage.completion_tokens == first.output_tokens
    assert whole.choices[0].message.content == "".join(second.texts)
    assert second.whole
