"""Rendering histories to provider formats: every format is valid for any history."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import anthropic, common, common_format, gemini, llama, openai_chat
from projections.render import openai_responses as responses
from projections.withparts import WithPartsProjection
from tests.support.anthropic_stream import as_anthropic_stream
from tests.support.render_sessions import sessions

JSON = dict[str, Any]
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def sent_tools(history: list[v.WithParts]) -> dict[str, str]:
    """call id -> the result text the rules require, for every tool that is sent."""
    out: dict[str, str] = {}
    for t in common.turns(history):
        for i in t.items:
            if isinstance(i, common.ToolResult):
                out[i.call_id] = i.output
    return out


def check_anthropic(msgs: list[JSON]) -> None:
    server_ids: set[str] = set()
    for a, b in itertools.pairwise(msgs):
        assert a["role"] != b["role"], "roles alternate"
    for n, m in enumerate(msgs):
        assert m["content"], "no empty content"
        for block in m["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), "no blank text block"
            if block["type"] == "thinking":
                assert block["signature"]
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if m["role"] == "assistant":  # a server call, then its one result, in one message
            seen: set[str] = set()
            answered: list[str] = []
            for block in m["content"]:
                if block["type"] == "server_tool_use":
                    seen.add(block["id"])
                elif "tool_use_id" in block:
                    assert block["tool_use_id"] in seen, "a server result follows its call"
                    answered.append(block["tool_use_id"])
            assert sorted(answered) == sorted(seen), "every server call has one result"
            server_ids.update(seen)
        for block in m["content"]:
            if block["type"] == "tool_result":
                assert block["tool_use_id"] not in server_ids, "no tool_result for a server tool"
        if m["role"] == "assistant" and uses:
            nxt = msgs[n + 1]
            results = [b for b in nxt["content"] if b["type"] == "tool_result"]
            assert sorted(r["tool_use_id"] for r in results) == sorted(uses)
            assert all(r["content"] for r in results)
            kinds = [b["type"] for b in nxt["content"]]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "results first"
        if m["role"] == "user" and any(b["type"] == "tool_result" for b in m["content"]):
            assert n > 0
            assert msgs[n - 1]["role"] == "assistant"


def check_openai_chat(msgs: list[JSON]) -> None:
    open_calls: set[str] = set()
    for m in msgs:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, "a result answers an open call"
            open_calls.remove(m["tool_call_id"])
            assert m["content"]
            continue
        assert not open_calls, "tool messages follow their assistant message directly"
        if m["role"] == "assistant":
            assert m["content"] or m.get("tool_calls")
            for call in m.get("tool_calls") or []:
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                open_calls.add(call["id"])
        else:
            assert m["content"]
    assert not open_calls


def check_responses(items: list[JSON]) -> None:
    calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    assert len(set(calls)) == len(calls)
    seen: set[str] = set()
    for i in items:
        if i["type"] == "function_call":
            seen.add(i["call_id"])
        elif i["type"] == "function_call_output":
            assert i["call_id"] in seen
            assert i["output"]
        else:
            assert i["content"]


def check_gemini(contents: list[JSON]) -> None:
    for a, b in itertools.pairwise(contents):
        assert a["role"] != b["role"]
    for n, c in enumerate(contents):
        assert c["parts"]
        ids = [p["function_call"]["id"] for p in c["parts"] if "function_call" in p]
        if ids:
            answers = [p["function_response"]["id"] for p in contents[n + 1]["parts"]
                       if "function_response" in p]
            assert sorted(answers) == sorted(ids)


def check_llama(msgs: list[JSON]) -> None:
    for m in msgs:
        assert m["role"] in ("user", "assistant")
        assert isinstance(m["content"], str)
        assert m["content"]


def check_common(msgs: list[JSON]) -> None:
    for n, m in enumerate(msgs):
        assert m["content"]
        if m["role"] == "assistant":
            ids = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if ids:
                answers = msgs[n + 1]["content"]
                assert [a["tool_use_id"] for a in answers] == ids
                assert all(a["tool_name"] and a["content"] for a in answers)


@SETTINGS
@given(sessions())
def test_every_format_is_valid_for_any_history(built: tuple[Session, list[v.WithParts]]
                                               ) -> None:
    _, history = built
    check_anthropic(anthropic.messages(history))
    check_openai_chat(openai_chat.messages(history))
    check_responses(responses.input_items(history))
    check_gemini(gemini.contents(history))
    check_llama(llama.messages(history))
    check_common(common_format.messages(history))


@SETTINGS
@given(sessions())
def test_the_sending_rules(built: tuple[Session, list[v.WithParts]]) -> None:
    _, history = built
    expected = sent_tools(history)
    sent_ids: set[str] = set()
    for wp in history:
        info = wp.info
        dropped = isinstance(info, v.AssistantInfo) and info.error is not None and (
            info.error.kind != "aborted" or not any(
                isinstance(p, v.ToolPart) or (isinstance(p, v.TextPart) and p.text.strip())
                for p in wp.parts))
        for p in wp.parts:
            if not isinstance(p, v.ToolPart):
                continue
            if (p.metadata or {}).get("anthropic", {}).get("server"):
                continue  # a server tool's result stays in the assistant turn
            if dropped:
                assert p.call_id not in expected
                continue
            sent_ids.add(p.call_id)
            s = p.state
            if isinstance(s, v.ToolStatePending | v.ToolStateRunning):
                assert expected[p.call_id] == common.INTERRUPTED
            elif isinstance(s, v.ToolStateCompleted) and s.time.compacted is not None:
                assert expected[p.call_id] == common.COMPACTED
    assert set(expected) == sent_ids
    # Ignored user text never reaches any format.
    for rendered in (anthropic.messages(history), openai_chat.messages(history),
                     responses.input_items(history), gemini.contents(history),
                     llama.messages(history), common_format.messages(history)):
        assert "IGNORED" not in json.dumps(rendered)


def test_step_snapshot_patch_agent_retry_parts_are_not_sent() -> None:
    from engine import events as ev  # noqa: PLC0415

    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    session.user_message("hi")
    aid = session.start_message("assistant")
    session.start_step(aid)
    session.add_snapshot(aid, "SNAP")
    session.add_patch(aid, "PATCH", ["a.py"])
    session.add_agent(aid, "AGENT")
    session.add_retry(aid, 1, ev.MessageError(kind="api", message="RETRY"))
    session.add_text(aid, "answer", streaming=False)
    session.finish_step(aid, "stop")
    session.complete_message(aid)
    for rendered in (anthropic.messages(proj.messages()), openai_chat.messages(proj.messages()),
                     gemini.contents(proj.messages()), llama.messages(proj.messages()),
                     common_format.messages(proj.messages()),
                     responses.input_items(proj.messages())):
        blob = json.dumps(rendered)
        for word in ("SNAP", "PATCH", "AGENT", "RETRY"):
            assert word not in blob
        assert "answer" in blob


@SETTINGS
@given(sessions())
def test_anthropic_round_trip_ingest_of_rendered_assistant_turns(
        built: tuple[Session, list[v.WithParts]]) -> None:
    from engine.adapters.anthropic import AnthropicIngest  # noqa: PLC0415

    _, history = built
    for m in anthropic.messages(history):
        if m["role"] != "assistant":
            continue
        session = Session.create(MemoryStore())
        proj = WithPartsProjection(session.id)
        session.subscribe(proj)
        result = AnthropicIngest(session).ingest(as_anthropic_stream(m["content"]))
        again = anthropic.response(proj.message(result.message_id))["content"]
        assert again == m["content"]
