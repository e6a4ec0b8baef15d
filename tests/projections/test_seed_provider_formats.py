"""The seed ``message-history-provider-formats.ja.md``, checked as an independent reader.

The seed keeps one common history (``MessageHistory``) and converts it per provider.
Its two converters are written out below as the seed states them (Python, from the
seed's text), and convlog's renderers must agree with them on everything the seed
says: roles, the ``tool_result`` item, Gemini's ``function_response``, Llama's JSON
string. Where convlog deliberately goes further (a failed result is ``{"error": ...}``
for Gemini; Llama gets one message per result where the seed's converter reads only
``content[0]``), the comparison skips exactly that and says so.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.render import common_format, gemini, llama
from projections.withparts import WithPartsProjection
from tests.support.render_sessions import sessions

JSON = dict[str, Any]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

READ_OUTPUT = "def greet():\n    return 'Hello, World!'"


def seed_history() -> list[v.WithParts]:
    """The seed's typical flow: a request, a read_file call and its result, an answer."""
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    s.user_message("hello.py を読んで説明して")
    m = s.start_message("assistant")
    s.add_text(m, "ファイルを読みます。", streaming=False)
    tool = s.add_tool(m, "call_abc123", "read_file", raw='{"path": "hello.py"}')
    s.tool_input_ready(tool, {"path": "hello.py"})
    s.start_tool(tool)
    s.complete_tool(tool, READ_OUTPUT)
    s.complete_message(m)
    answer = s.start_message("assistant")
    s.add_text(answer, "このファイルは greet 関数を定義...", streaming=False)
    s.complete_message(answer)
    return proj.messages()


# The seed's converters, from its text: what a user message becomes for each provider.


def _is_tool_result(content: Any) -> bool:
    return isinstance(content, list) and content[0].get("type") == "tool_result"


def seed_gemini_user_parts(msg: JSON) -> list[JSON]:
    content = msg["content"]
    if _is_tool_result(content):
        return [{"function_response": {"name": item["tool_name"],
                                       "response": {"result": item["content"]}}}
                for item in content]
    return [{"text": content}]


def seed_llama_user(msg: JSON) -> JSON:
    content = msg["content"]
    if _is_tool_result(content):
        tool_result = {"tool_result": {"name": content[0]["tool_name"],
                                       "result": content[0]["content"]}}
        return {"role": "user", "content": json.dumps(tool_result)}
    return msg


# --------------------------------------------------------------------------- the seed's flow


def test_common_format_is_the_seeds_message_history() -> None:
    assert common_format.messages(seed_history()) == [
        {"role": "user", "content": "hello.py を読んで説明して"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "ファイルを読みます。"},
            {"type": "tool_use", "id": "call_abc123", "name": "read_file",
             "input": {"path": "hello.py"}},
        ]},
        {"role": "user", "content": [{  # a tool result is sent with the user role
            "type": "tool_result", "tool_use_id": "call_abc123", "tool_name": "read_file",
            "content": READ_OUTPUT,
        }]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "このファイルは greet 関数を定義..."},
        ]},
    ]


def test_gemini_of_the_seeds_flow() -> None:
    contents = gemini.contents(seed_history())
    assert [c["role"] for c in contents] == ["user", "model", "user", "model"]
    assert contents[0]["parts"] == [{"text": "hello.py を読んで説明して"}]
    (response,) = contents[2]["parts"]
    assert response["function_response"]["name"] == "read_file"
    assert response["function_response"]["response"] == {"result": READ_OUTPUT}


def test_llama_of_the_seeds_flow_is_byte_for_byte_the_seeds_json_string() -> None:
    msgs = llama.messages(seed_history())
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[0] == {"role": "user", "content": "hello.py を読んで説明して"}
    # json.dumps with its defaults: ", " / ": " separators and ASCII escapes.
    assert msgs[2]["content"] == json.dumps(
        {"tool_result": {"name": "read_file", "result": READ_OUTPUT}})


def test_llama_escapes_non_ascii_results_as_the_seeds_json_dumps_does() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    s.user_message("読んで")
    m = s.start_message("assistant")
    tool = s.add_tool(m, "c1", "read_file", raw="{}")
    s.start_tool(tool)
    s.complete_tool(tool, "こんにちは 🙂")
    s.complete_message(m)
    result = next(x for x in llama.messages(proj.messages()) if "tool_result" in x["content"])
    assert result["content"] == (
        '{"tool_result": {"name": "read_file", "result": '
        '"\\u3053\\u3093\\u306b\\u3061\\u306f \\ud83d\\ude42"}}')


# --------------------------------------------------------------------------- any history


@SETTINGS
@given(sessions())
def test_gemini_and_llama_agree_with_the_seeds_converters(
        built: tuple[Session, list[v.WithParts]]) -> None:
    _, history = built
    common = common_format.messages(history)
    results = [m for m in common if m["role"] == "user" and _is_tool_result(m["content"])]

    # Gemini: the same sequence of user function_responses (name and response), the
    # assistant role renamed "model". A failed result is {"error": ...} (convlog's
    # addition: the seed's history has no error flag), so those compare by name only.
    ours = [p["function_response"] for c in gemini.contents(history) if c["role"] == "user"
            for p in c["parts"] if "function_response" in p]
    theirs = [(p["function_response"], item.get("is_error", False))
              for m in results for p, item in zip(seed_gemini_user_parts(m), m["content"],
                                                  strict=True)]
    assert len(ours) == len(theirs)
    for got, (want, failed) in zip(ours, theirs, strict=True):
        assert got["name"] == want["name"]
        if failed:
            assert got["response"] == {"error": want["response"]["result"]}
        else:
            assert got["response"] == want["response"]
    assert {c["role"] for c in gemini.contents(history)} <= {"user", "model"}

    # Llama: the seed converts one result per message (content[0]); convlog sends each
    # result as its own message, so every result is the seed's conversion of itself.
    seed_strings = [seed_llama_user({"role": "user", "content": [dict(
        item, content=f"Error: {item['content']}" if item.get("is_error") else item["content"],
    )]})["content"] for m in results for item in m["content"]]
    llama_results = [m["content"] for m in llama.messages(history)
                     if m["role"] == "user" and m["content"].startswith('{"tool_result": ')]
    assert llama_results == seed_strings
