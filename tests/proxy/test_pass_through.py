"""The proxy with the real SDKs in front of a scripted upstream: what the client gets
is the upstream's bytes, and what is recorded is the call (request and answer)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from engine import events as ev
from engine.proxy.context import full_requests
from projections import views as v
from projections.render import anthropic as render_anthropic
from projections.render import openai_chat as render_chat
from projections.render import openai_responses as render_responses
from projections.withparts import WithPartsProjection
from tests.proxy import scripts
from tests.proxy.harness import rig
from tests.proxy.servers import Reply, sse

SECRET = "sk-ant-secret-0123456789"


def _assistant(views: dict[str, WithPartsProjection]) -> list[v.WithParts]:
    out = []
    for view in views.values():
        out += [m for m in view.messages() if m.info.role == "assistant"]
    return out


def test_anthropic_stream_passes_through_and_is_recorded(tmp_path: Path) -> None:
    chunks = sse(scripts.anthropic_text_and_tool())
    replies = [Reply(chunks), Reply(sse(scripts.anthropic_text("It prints hello."))),
               Reply(chunks)]
    with rig(tmp_path, replies) as r:
        client = anthropic.Anthropic(base_url=r.proxy_url, api_key=SECRET, max_retries=0)
        request = {"model": "claude-x", "max_tokens": 100, "system": "You are terse.",
                   "messages": [{"role": "user", "content": "read hello.py"}],
                   "tools": [{"name": "read", "description": "read a file",
                              "input_schema": {"type": "object"}}]}
        with client.messages.stream(**request) as stream:  # type: ignore[arg-type]
            final = stream.get_final_message()
        follow = [*request["messages"],  # type: ignore[misc]
                  {"role": "assistant", "content": [b.to_dict() for b in final.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                "content": "print('hello')"}]}]
        with client.messages.stream(**{**request, "messages": follow}) as stream2:  # type: ignore[arg-type]
            second = stream2.get_final_message()
        assert second.content[0].to_dict()["text"] == "It prints hello."
        raw = httpx.post(f"{r.proxy_url}/v1/messages", json={**request, "stream": True},
                         headers={"x-api-key": SECRET})
        assert raw.content == b"".join(chunks)  # byte for byte what the upstream sent
        seen = r.upstream.seen[0]
        # Forwarded (the client needs it): this SDK sends its key as a bearer token.
        assert SECRET in (seen.headers.get("x-api-key"), seen.headers.get("authorization",
                                                                         "")[7:])
        assert seen.json()["system"] == "You are terse."
        store = r.store()
    sessions = store.sessions()
    [main] = [s for s in sessions if s.parent is None]
    [again] = [s for s in sessions if s.parent is not None]
    assert again.parent == main.id
    assert again.fork_seq == 0
    events = list(store.read(main.id))
    view = WithPartsProjection.replay(store, main.id)
    store.close()
    first, answer = [m for m in view.messages() if m.info.role == "assistant"]
    assert render_anthropic.response(first) == final.to_dict()
    assert render_anthropic.response(answer) == second.to_dict()
    [tool] = [p for p in first.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "print('hello')"
    contexts = full_requests(events)
    record, record2 = contexts.values()
    assert record["request"]["system"] == "You are terse."
    assert record["request"]["messages"] == request["messages"]
    assert record["request"]["tools"] == request["tools"]
    assert record["path"] == "/v1/messages"
    assert record2["request"]["messages"] == follow  # rebuilt from its delta
    stored = [e for e in events if isinstance(e, ev.MessageStarted) and e.role == "user"]
    assert stored[0].system == "You are terse."
    assert stored[1].metadata is not None
    assert "tools" not in stored[1].metadata["proxy"]["request"]  # the same: not again


def test_secrets_are_never_stored(tmp_path: Path) -> None:
    """Every secret header and a Gemini ?key= reach the upstream and never the store
    (the SQLite file itself is searched, WAL included)."""
    secrets = {"x-api-key": "sk-ant-AAA111", "authorization": "Bearer sk-proj-BBB222",
               "x-goog-api-key": "AIzaCCC333", "cookie": "session=DDD444"}
    replies = [Reply(sse(scripts.anthropic_text("hi there"))),
               Reply(sse(scripts.chat_text(), named=False)),
               Reply(sse(scripts.gemini_text_and_call(), named=False))]
    with rig(tmp_path, replies) as r:
        body = {"model": "m", "max_tokens": 5, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}
        httpx.post(f"{r.proxy_url}/v1/messages", json=body, headers=secrets)
        httpx.post(f"{r.proxy_url}/v1/chat/completions", json=body, headers=secrets)
        httpx.post(f"{r.proxy_url}/v1beta/models/gemini-x:streamGenerateContent",
                   params={"alt": "sse", "key": "AIzaEEE555"},
                   json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                   headers=secrets)
        for seen in r.upstream.seen:
            for name, value in secrets.items():
                assert seen.headers[name] == value
        assert "key=AIzaEEE555" in r.upstream.seen[2].query
        store = r.store()
        dumped = json.dumps([[json.loads(json.dumps(e, default=str)) for e in store.read(s.id)]
                             for s in store.sessions()], default=str)
        assert len(store.sessions()) == 3
        store.close()
    r.recorder.stop()
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for needle in [*secrets.values(), "AIzaEEE555"]:
        token = needle.split("=")[-1].split(" ")[-1]
        assert token.encode() not in files
        assert token not in dumped
    assert b"user-agent" in files or b"content-type" in files  # headers are recorded


def test_openai_responses_and_chat(tmp_path: Path) -> None:
    replies = [Reply(sse(scripts.responses_text_and_call())),
               Reply([*sse(scripts.chat_text(), named=False), b"data: [DONE]\n\n"])]
    with rig(tmp_path, replies) as r:
        client = openai.OpenAI(base_url=f"{r.proxy_url}/v1", api_key="sk-x", max_retries=0)
        with client.responses.stream(model="fake-model", input="list files",
                                     instructions="be brief") as stream:
            response = stream.get_final_response()
        chat = client.chat.completions.create(
            model="fake-model", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}])
        text = "".join(c.choices[0].delta.content or "" for c in chat if c.choices)
        assert text == "Hello there"
        views = r.views()
    answers = _assistant(views)
    by_provider = {m.info.provider_id: m for m in answers}  # type: ignore[union-attr]
    assert len(answers) == 2
    rendered = render_responses.response(
        next(m for m in answers if m.info.metadata and "response" in m.info.metadata["openai"]))
    assert rendered["output"][1]["call_id"] == response.output[1].call_id  # type: ignore[union-attr]
    assert rendered["id"] == response.id
    chat_answer = next(m for m in answers if m.info.metadata
                       and "completion" in m.info.metadata["openai"])
    assert render_chat.response(chat_answer)["choices"][0]["message"]["content"] == text
    assert by_provider


def test_http_error_is_a_typed_message_error(tmp_path: Path) -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error",
                                        "message": "prompt is too long: 300000 tokens"}}
    reply = Reply([json.dumps(error).encode()], status=400,
                  headers=(("content-type", "application/json"),))
    with rig(tmp_path, [reply]) as r:
        client = anthropic.Anthropic(base_url=r.proxy_url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as raised:
            client.messages.create(model="m", max_tokens=5, stream=True,
                                   messages=[{"role": "user", "content": "hi"}])
        assert raised.value.body == error["error"] or raised.value.body == error
        views = r.views()
    [answer] = _assistant(views)
    info = answer.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert (info.error.kind, info.error.status_code) == ("context_overflow", 400)
    assert "prompt is too long" in info.error.message


def test_compressed_stream_is_forwarded_compressed_and_recorded_decoded(
        tmp_path: Path) -> None:
    plain = b"".join(sse(scripts.anthropic_text("compressed words here")))
    packed = gzip.compress(plain)
    parts = [packed[i:i + 7] for i in range(0, len(packed), 7)]
    reply = Reply(parts, headers=(("content-type", "text/event-stream"),
                                  ("content-encoding", "gzip")))
    with rig(tmp_path, [reply]) as r:
        with httpx.stream("POST", f"{r.proxy_url}/v1/messages",
                          json={"model": "m", "max_tokens": 5, "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}) as got:
            assert got.headers["content-encoding"] == "gzip"
            raw = b"".join(got.iter_raw())
        assert raw == packed
        views = r.views()
    [answer] = _assistant(views)
    assert render_anthropic.response(answer)["content"][0]["text"] == "compressed words here"


def test_an_unparseable_stream_reaches_the_client_and_is_recorded_as_failed(
        tmp_path: Path) -> None:
    good = sse(scripts.anthropic_text("half an answer"))
    chunks = [*good[:3], b"event: content_block_delta\ndata: {not json\n\n", *good[3:]]
    with rig(tmp_path, [Reply(chunks)]) as r:
        got = httpx.post(f"{r.proxy_url}/v1/messages",
                         json={"model": "m", "max_tokens": 5, "stream": True,
                               "messages": [{"role": "user", "content": "hi"}]})
        assert got.content == b"".join(chunks)
        views = r.views()
        assert r.recorder.failures
        assert "JSONDecodeError" in r.recorder.failures[0]
    [answer] = _assistant(views)
    info = answer.info
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert "recording failed" in info.error.message
