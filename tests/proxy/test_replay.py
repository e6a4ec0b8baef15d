"""``convlog replay``: recorded calls served back; recording the replay again gives
the same answers, event for event; a request that matches nothing gets a 404
naming the nearest call and where it diverged; a fork replays its own path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from engine import events as ev
from engine.adapters.anthropic import AnthropicIngest
from engine.ids import uuid7
from engine.session import Session
from engine.store import open_store
from projections.render import anthropic as render_anthropic
from projections.replay.app import ReplayApp
from projections.replay.catalog import load
from projections.withparts import WithPartsProjection
from tests.proxy import loop, scripted, scripts
from tests.proxy.harness import rig
from tests.proxy.servers import Reply, running, sse

JSON = dict[str, Any]
U1 = {"role": "user", "content": "read hello.py"}
A1 = {"role": "assistant", "content": [
    {"type": "text", "text": "Reading the file"},
    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "hello.py"}}]}
R1 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                   "content": "print('hello')"}]}
GEMINI = "/v1beta/models/gemini-x:streamGenerateContent"
CALLS: list[tuple[str, JSON, dict[str, str]]] = [
    ("/v1/messages", {"model": "claude-x", "max_tokens": 9, "stream": True,
                      "messages": [U1]}, {}),
    ("/v1/messages", {"model": "claude-x", "max_tokens": 9, "stream": True,
                      "messages": [U1, A1, R1]}, {}),
    ("/v1/responses", {"model": "fake-model", "stream": True, "input": "list files"}, {}),
    ("/v1/chat/completions", {"model": "fake-model", "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]}, {}),
    (GEMINI, {"contents": [{"role": "user", "parts": [{"text": "look at a.txt"}]}]},
     {"alt": "sse"}),
]
REPLIES = [Reply(sse(scripts.anthropic_text_and_tool())),
           Reply(sse(scripts.anthropic_text("It prints hello."))),
           Reply(sse(scripts.responses_text_and_call())),
           Reply([*sse(scripts.chat_text(), named=False), b"data: [DONE]\n\n"]),
           Reply(sse(scripts.gemini_text_and_call(), named=False))]


def _send(url: str) -> list[bytes]:
    out = []
    for path, body, params in CALLS:
        got = httpx.post(f"{url}{path}", json=body, params=params)
        assert got.status_code == 200, got.text
        out.append(got.content)
    return out


def _shapes(url: str) -> list[list[JSON]]:
    store = open_store(url, create=False)
    try:
        return [loop.shape(a) for s in store.sessions() for a in loop.answers(store, s.id)]
    finally:
        store.close()


def test_a_replayed_recording_records_the_same(tmp_path: Path) -> None:
    with rig(tmp_path, REPLIES) as first:
        _send(first.proxy_url)
        first.recorder.sync()
    store = open_store(first.store_url, create=False)
    replay = ReplayApp(load(store))
    store.close()
    with rig(tmp_path, [], upstream_app=replay, name="again.db") as second:
        _send(second.proxy_url)
        second.recorder.sync()
    assert [entry["matched"] is not None for entry in replay.log] == [True] * len(CALLS)
    want, got = _shapes(first.store_url), _shapes(second.store_url)
    assert len(want) == len(CALLS)
    assert got == want


def test_the_sdks_read_a_replay_as_the_provider(tmp_path: Path) -> None:
    with rig(tmp_path, REPLIES) as first:
        client = anthropic.Anthropic(base_url=first.proxy_url, api_key="k", max_retries=0)
        with client.messages.stream(model="claude-x", max_tokens=9,
                                    messages=[U1]) as stream:  # type: ignore[list-item]
            original = stream.get_final_message()
        first.recorder.sync()
    store = open_store(first.store_url, create=False)
    calls = load(store)
    store.close()
    with running(ReplayApp(calls)) as url:
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        with client.messages.stream(model="claude-x", max_tokens=9,
                                    messages=[U1]) as stream:  # type: ignore[list-item]
            streamed = stream.get_final_message()
        whole = client.messages.create(model="claude-x", max_tokens=9,
                                       messages=[U1])  # type: ignore[list-item]
        responses = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.NotFoundError):  # nothing recorded for this API
            responses.responses.create(model="m", input="nothing was recorded for this API")
    assert streamed.to_dict() == original.to_dict()
    assert whole.to_dict() == {**original.to_dict()}


def test_no_match_is_a_404_naming_the_nearest_call_and_the_divergence(
        tmp_path: Path) -> None:
    with rig(tmp_path, REPLIES[:2]) as first:
        _post = httpx.post
        for body in (CALLS[0][1], CALLS[1][1]):
            assert _post(f"{first.proxy_url}/v1/messages", json=body).status_code == 200
        first.recorder.sync()
    store = open_store(first.store_url, create=False)
    calls = load(store)
    store.close()
    with running(ReplayApp(calls)) as url:
        other = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9",
                                              "content": "x"}]}
        got = httpx.post(f"{url}/v1/messages",
                         json={**CALLS[1][1], "messages": [U1, A1, other]})
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        try:
            client.messages.create(model="claude-x", max_tokens=9,
                                   messages=[{"role": "user", "content": "hello?"}])
        except anthropic.NotFoundError as exc:
            sdk_message = str(exc)
    assert got.status_code == 404
    report = got.json()
    assert report["convlog"]["nearest"]["message"] == calls[1].context_id
    assert report["convlog"]["diverged"] == {
        "entry": 2, "expected": "user[result:toolu_1]", "got": "user[result:toolu_9]"}
    assert "diverged at entry 2" in report["error"]["message"]
    assert "no recorded call matches" in sdk_message


def test_a_fork_replays_its_own_path(tmp_path: Path) -> None:
    """A session forked after the tool's result, with another answer there: replaying
    the fork gives the other answer; replaying the original, the original's."""
    url = f"sqlite:///{tmp_path / 'script.db'}"
    store = open_store(url)
    follow = {"messages": [U1, A1, R1]}
    main = scripted.build(store, "anthropic", [
        scripted.Call({"messages": [U1]}, scripts.anthropic_text_and_tool(),
                      {"toolu_1": "print('hello')"}),
        scripted.Call(follow, scripts.anthropic_text("It prints hello."))])
    calls = load(store, main)
    # Fork just before the second call's context (the first call's tool is settled),
    # and answer the second call otherwise there.
    fork = Session.open(store, main).fork(calls[1].seq - 1)
    scripted_fork_call = scripted.Call(follow, scripts.anthropic_text("Another path."))
    context = uuid7()
    fork.record([ev.MessageStarted(message_id=context, role="user", metadata={"proxy": {
        "provider": "anthropic", "request": scripted_fork_call.request}}),
        ev.MessageCompleted(message_id=context)])
    AnthropicIngest(fork, parent_id=context).ingest(scripted_fork_call.answer)
    forked_calls = load(store, fork.id)
    original_calls = load(store, main)
    view = WithPartsProjection.replay(store, fork.id)
    store.close()
    assert len(forked_calls) == 2  # the shared first call, its own second
    body = {"model": "claude-x", "max_tokens": 9, **follow}
    answers = []
    for chosen in (forked_calls, original_calls):
        with running(ReplayApp(chosen)) as replay_url:
            client = anthropic.Anthropic(base_url=replay_url, api_key="k", max_retries=0)
            answer = client.messages.create(**body)  # type: ignore[call-overload]
            answers.append(answer.content[0].to_dict()["text"])
    assert answers == ["Another path.", "It prints hello."]
    rendered = render_anthropic.response(view.messages()[-1])
    assert rendered["content"][0]["text"] == "Another path."
