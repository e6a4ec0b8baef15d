"""Anthropic assistant content is sent back as it was received, block for block.

In a tool-use loop the API requires thinking blocks (with their signature, even
when the text is empty, as Claude Code logs it) and redacted thinking (with its
data) returned unchanged. Property: any assistant content of thinking,
redacted_thinking, text and tool_use blocks, recorded from the stream or
imported from a Claude Code log, renders to the same blocks.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.anthropic import AnthropicIngest
from engine.importers.claude_code import plan_claude_code
from engine.session import Session
from engine.store import MemoryStore
from projections.render import anthropic
from projections.timetravel import at
from projections.withparts import WithPartsProjection
from tests.importers.support import written
from tests.support.anthropic_stream import as_anthropic_stream

JSON = dict[str, Any]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
OPAQUE = st.text(string.ascii_letters + string.digits + "+/=", min_size=1, max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6)


def _block(kind: str, text: str, opaque: str, value: JSON) -> JSON:
    if kind == "thinking":
        return {"type": "thinking", "thinking": text, "signature": opaque}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": opaque}
    if kind == "text":
        return {"type": "text", "text": text if text.strip() else f"answer {text}"}
    return {"type": "tool_use", "id": "", "name": "tool_" + opaque[:8].replace("+", "_")
            .replace("/", "_").replace("=", "_"), "input": value}


@st.composite
def contents(draw: st.DrawFn) -> list[JSON]:
    """Assistant content with an answer (text or a tool call), thinking anywhere."""
    kinds = draw(st.lists(st.sampled_from(("thinking", "redacted_thinking", "text",
                                           "tool_use")), min_size=1, max_size=6)
                 .filter(lambda ks: any(k in ("text", "tool_use") for k in ks)))
    blocks = []
    for n, kind in enumerate(kinds):
        block = _block(kind, draw(TEXT), draw(OPAQUE),
                       draw(st.dictionaries(TEXT, JSON_VALUES, max_size=3)))
        if kind == "tool_use":
            block["id"] = f"toolu_{n:02d}"
        blocks.append(block)
    return blocks


def _sent_assistant(history: list[Any]) -> list[JSON]:
    sent = [m for m in anthropic.messages(history) if m["role"] == "assistant"]
    assert len(sent) == 1
    content: list[JSON] = sent[0]["content"]
    return content


@SETTINGS
@given(contents())
def test_recorded_assistant_content_is_sent_back_unchanged(content: list[JSON]) -> None:
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    AnthropicIngest(session).ingest(as_anthropic_stream(content))
    assert _sent_assistant(proj.messages()) == content


def _claude_code_log(content: list[JSON]) -> str:
    """A Claude Code log: a prompt, then one line per block of one assistant message."""
    sid = "7c1d2e3f-aaaa-4bbb-8ccc-0123456789ab"
    base = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": sid,
            "version": "2.0.14"}
    lines = [{**base, "parentUuid": None, "uuid": "u0", "type": "user",
              "timestamp": "2025-10-05T10:00:00.000Z",
              "message": {"role": "user", "content": "go"}}]
    for n, block in enumerate(content):
        lines.append({**base, "parentUuid": lines[-1]["uuid"], "uuid": f"a{n}",
                      "type": "assistant", "requestId": "req_1",
                      "timestamp": f"2025-10-05T10:00:{n + 1:02d}.000Z",
                      "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                  "model": "claude-sonnet-4-5", "content": [block],
                                  "stop_reason": None, "usage": {"input_tokens": 1,
                                                                 "output_tokens": 1}}})
    return "".join(json.dumps(line) + "\n" for line in lines)


@SETTINGS
@given(content=contents())
def test_imported_claude_code_content_is_sent_back_unchanged(
        tmp_path: Path, content: list[JSON]) -> None:
    path = tmp_path / "7c1d2e3f-aaaa-4bbb-8ccc-0123456789ab.jsonl"
    path.write_text(_claude_code_log(content), encoding="utf-8")
    plan = plan_claude_code(path)
    store = written(plan)
    [info] = store.sessions()
    assert _sent_assistant(at(store, info.id).messages()) == content


def test_a_thinking_block_with_empty_text_keeps_its_signature() -> None:
    content: list[JSON] = [
        {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkBsig"},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": "a"}}]
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    AnthropicIngest(session).ingest(as_anthropic_stream(content))
    assert _sent_assistant(proj.messages()) == content
