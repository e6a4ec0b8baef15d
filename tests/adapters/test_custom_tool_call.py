"""Freeform tools (Responses ``custom_tool_call``, Codex's apply_patch and code mode):
recorded as tool calls with their input text byte for byte, and sent back as
``custom_tool_call`` / ``custom_tool_call_output`` through the real openai SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import httpx2
import openai
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from openai.types.responses import ResponseInputParam

from engine import events as ev
from engine.adapters.ingest import UnexpectedDelta
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.importers.codex import plan_codex
from engine.importers.write import write_plan
from engine.store import MemoryStore
from projections import views as v
from projections.render import openai_responses as render
from projections.withparts import WithPartsProjection
from tests.support.ingest_checks import fresh
from tests.support.responses_streams import FREEFORM, RESPONSE, Stream

JSON = dict[str, Any]
FIXTURES = Path(__file__).parent.parent / "fixtures" / "transcripts" / "codex"
# Bytes a re-serialisation would change: escapes, a lone surrogate's escape, CRLF,
# trailing blanks, non-ASCII, text that is almost JSON.
ODD = '*** Begin Patch\r\n+x = "\\u00ed"  \n+y = {"a":1,}\t\n+日本 \\ud800\n*** End Patch'


def custom_stream(text: str, *, pieces: int = 3, namespace: str | None = None,
                  done: bool = True) -> list[JSON]:
    """created, a message, a freeform call streaming ``text`` in ``pieces``, completed."""
    s = Stream()
    s.add("response.created", response=RESPONSE)
    item: JSON = {"id": "ctc_1", "type": "custom_tool_call", "status": "in_progress",
                  "call_id": "call_P", "name": "apply_patch", "input": ""}
    if namespace is not None:
        item["namespace"] = namespace
    s.add("response.output_item.added", output_index=0, item=item)
    refs = {"item_id": "ctc_1", "output_index": 0}
    step = max(1, -(-len(text) // pieces))
    for i in range(0, len(text), step):
        s.add("response.custom_tool_call_input.delta", **refs, delta=text[i:i + step])
    if done:
        s.add("response.custom_tool_call_input.done", **refs, input=text)
    final = {**item, "input": text, "status": "completed"}
    s.add("response.output_item.done", output_index=0, item=final)
    s.add("response.completed", response={**RESPONSE, "status": "completed",
                                          "output": [final]})
    return s.events


def test_a_freeform_call_is_a_tool_call_with_its_text_byte_for_byte() -> None:
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session)
    result = ing.ingest(custom_stream(ODD, pieces=7, namespace="functions"))
    assert not result.completed  # it waits for its result like any call
    [call] = result.tool_calls
    assert (call.call_id, call.name, call.input) == ("call_P", "apply_patch", {"input": ODD})
    [part] = proj.message(result.message_id).parts[1:2]
    assert isinstance(part, v.ToolPart)
    assert part.raw == ODD  # the exact characters, lone surrogate escape text included
    assert part.metadata == {"openai": {"item_id": "ctc_1", "type": "custom_tool_call",
                                        "namespace": "functions"}}
    fragments = [e.fragment for e in session.store.read(session.id)
                 if isinstance(e, ev.ToolInputDelta)]
    assert "".join(fragments) == ODD
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "Success. Updated the following files:\nM a.py\n")
    ing.complete()
    wp = proj.message(result.message_id)
    [out] = render.response(wp)["output"]
    assert out == {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_P",
                   "name": "apply_patch", "input": ODD, "namespace": "functions",
                   "status": "completed"}
    items = render.input_items([wp])
    assert items == [
        {"type": "custom_tool_call", "call_id": "call_P", "name": "apply_patch",
         "input": ODD, "namespace": "functions"},
        {"type": "custom_tool_call_output", "call_id": "call_P",
         "output": "Success. Updated the following files:\nM a.py\n"}]


@pytest.mark.parametrize("kind", ["response.function_call_arguments.delta",
                                  "response.output_text.delta"])
def test_a_delta_of_another_kind_for_a_freeform_call_is_refused(kind: str) -> None:
    events = custom_stream("abc")
    events.insert(2, {"type": kind, "item_id": "ctc_1", "output_index": 0,
                      "content_index": 0, "delta": "x", "sequence_number": 99})
    session, _ = fresh()
    with pytest.raises(UnexpectedDelta):
        OpenAIResponsesIngest(session).ingest(events)


def test_arguments_deltas_for_a_function_call_still_refuse_freeform_input() -> None:
    s = Stream()
    s.add("response.created", response=RESPONSE)
    s.add("response.output_item.added", output_index=0, item={
        "id": "fc_1", "type": "function_call", "call_id": "c", "name": "read",
        "arguments": ""})
    s.add("response.custom_tool_call_input.delta", item_id="fc_1", output_index=0, delta="x")
    session, _ = fresh()
    with pytest.raises(UnexpectedDelta):
        OpenAIResponsesIngest(session).ingest(s.events)


# --------------------------------------------------------------------------- the real SDK


def _sse(events: list[JSON]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class _Server:
    """A fake transport behind the real openai client: answers scripted streams and
    keeps each request's body."""

    def __init__(self, answers: list[list[JSON]]) -> None:
        self.answers = answers
        self.bodies: list[JSON] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                              content=_sse(self.answers[len(self.bodies) - 1]))


def _client(server: _Server) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1",
                         http_client=httpx2.Client(transport=httpx2.MockTransport(server)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FREEFORM)
def test_the_sdk_sends_a_rebuilt_request_back_as_custom_tool_call(text: str) -> None:
    """The SDK's own event objects in; the request rebuilt from the log, through the
    SDK, carries the call as ``custom_tool_call`` with the model's text unchanged,
    and its result as ``custom_tool_call_output``: what the SDK's types accept."""
    final = {"type": "response.completed", "sequence_number": 1,
             "response": {**RESPONSE, "status": "completed", "output": []}}
    server = _Server([custom_stream(text, namespace="functions",
                                    done=bool(len(text) % 2)),
                      [{"type": "response.created", "sequence_number": 0,
                        "response": RESPONSE}, final]])
    client = _client(server)
    user: list[JSON] = [{"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": "patch a.py"}]}]
    session, proj = fresh()
    ing = OpenAIResponsesIngest(session)
    with client.responses.create(model="gpt-test", input=cast(ResponseInputParam, user),
                                 stream=True) as stream:
        result = ing.ingest(stream)  # the SDK's typed events, as the SDK yields them
    [call] = result.tool_calls
    assert call.input == {"input": text}
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "Done!")
    ing.complete()
    items = render.input_items(proj.messages())
    pydantic.TypeAdapter(ResponseInputParam).validate_python(items)  # the SDK's param types
    client.responses.create(model="gpt-test", input=cast(ResponseInputParam, user + items),
                            stream=True).close()
    sent = server.bodies[1]["input"][1:]
    assert sent == [{"type": "custom_tool_call", "call_id": "call_P", "name": "apply_patch",
                     "input": text, "namespace": "functions"},
                    {"type": "custom_tool_call_output", "call_id": "call_P",
                     "output": "Done!"}]


def test_a_codex_rollout_freeform_call_renders_back_as_custom_tool_call() -> None:
    """The Codex importer's parts (``metadata.codex.type``) render the same way."""
    path = FIXTURES / "rollout-2025-09-03T14-00-00-0199a0b1-1111-7222-8333-444455556666.jsonl"
    plan = plan_codex(path)
    store = MemoryStore()
    write_plan(store, plan)
    [session] = plan.sessions
    items = render.input_items(WithPartsProjection.replay(store, session.id).messages())
    calls = [i for i in items if i["type"] == "custom_tool_call"]
    outputs = [i for i in items if i["type"] == "custom_tool_call_output"]
    assert [c["input"] for c in calls] == [
        "*** Begin Patch\n*** Add File: Makefile\n+test:\n+\tpytest -q\n*** End Patch"]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls] == ["call_P"]
    pydantic.TypeAdapter(ResponseInputParam).validate_python(calls + outputs)

