"""How the proxy groups calls into sessions: the clients' headers, else the
conversation (carried on: the same session; diverged: a fork)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from engine.importers.base import stable_uuid
from engine.proxy.recorder import session_keys
from projections import views as v
from projections.withparts import WithPartsProjection
from tests.proxy import scripts
from tests.proxy.harness import rig
from tests.proxy.servers import Reply, sse

JSON = dict[str, Any]
U1 = {"role": "user", "content": "read hello.py"}
A1 = {"role": "assistant", "content": [
    {"type": "text", "text": "Reading the file"},
    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "hello.py"}}]}
R1 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                   "content": "print('hello')"}]}
A2 = {"role": "assistant", "content": [{"type": "text", "text": "It prints hello."}]}


TOOLS = [{"name": "read", "input_schema": {"type": "object"}}]


def _post(url: str, messages: list[JSON], headers: dict[str, str] | None = None, *,
          tools: bool = True) -> None:
    body: JSON = {"model": "claude-x", "max_tokens": 50, "stream": True,
                  "messages": messages}
    if tools:
        body["tools"] = TOOLS
    got = httpx.post(f"{url}/v1/messages", headers=headers or {}, json=body)
    assert got.status_code == 200


def test_a_conversation_carried_on_is_one_session_and_a_divergence_forks(
        tmp_path: Path) -> None:
    replies = [Reply(sse(scripts.anthropic_text_and_tool())),
               Reply(sse(scripts.anthropic_text("It prints hello.", msg_id="msg_2"))),
               Reply(sse(scripts.anthropic_text("Sure.", msg_id="msg_3"))),
               Reply(sse(scripts.anthropic_text("Other path.", msg_id="msg_4"))),
               Reply(sse(scripts.anthropic_text("Unrelated.", msg_id="msg_5")))]
    with rig(tmp_path, replies) as r:
        _post(r.proxy_url, [U1])
        _post(r.proxy_url, [U1, A1, R1])
        _post(r.proxy_url, [U1, A1, R1, A2, {"role": "user", "content": "thanks"}])
        # Back to after the tool's result, another question: a fork there.
        _post(r.proxy_url, [U1, A1, R1, A2, {"role": "user", "content": "and then?"}])
        _post(r.proxy_url, [{"role": "user", "content": "something else"}])
        store = r.store()
    sessions = {s.id: s for s in store.sessions()}
    roots = [s for s in sessions.values() if s.parent is None]
    assert len(roots) == 2  # the main conversation, the unrelated one
    [fork] = [s for s in sessions.values() if s.parent is not None]
    main = sessions[fork.parent]  # type: ignore[index]
    view = WithPartsProjection.replay(store, main.id)
    forked = WithPartsProjection.replay(store, fork.id)
    store.close()
    texts = [p.text for m in view.messages() if m.info.role == "assistant"
             for p in m.parts if isinstance(p, v.TextPart)]
    assert texts == ["Reading the file", "It prints hello.", "Sure."]
    fork_texts = [p.text for m in forked.messages() if m.info.role == "assistant"
                  for p in m.parts if isinstance(p, v.TextPart)]
    assert fork_texts == ["Reading the file", "It prints hello.", "Other path."]
    first = next(m for m in view.messages() if m.info.role == "assistant")
    [tool] = [p for p in first.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateCompleted)  # settled by the next request
    assert first.info.time.completed is not None


def test_client_headers_name_sessions_and_subagents(tmp_path: Path) -> None:
    replies = [Reply(sse(scripts.anthropic_text(f"answer {i}", msg_id=f"msg_{i}")))
               for i in range(5)]
    with rig(tmp_path, replies) as r:
        claude = {"x-claude-code-session-id": "cc-1"}
        # A side call without tools first (a title): a child, not the session itself.
        _post(r.proxy_url, [{"role": "user", "content": "title this"}], claude, tools=False)
        _post(r.proxy_url, [U1], claude)
        _post(r.proxy_url, [{"role": "user", "content": "explore the repo"}],
              {**claude, "x-claude-code-agent-id": "agent-7"})
        _post(r.proxy_url, [{"role": "user", "content": "a codex turn"}],
              {"session-id": "th-1", "thread-id": "th-1"})
        _post(r.proxy_url, [{"role": "user", "content": "a spawned agent"}],
              {"session-id": "th-2", "thread-id": "th-2", "x-codex-parent-thread-id": "th-1"})
        store = r.store()
    sessions = {s.id: s for s in store.sessions()}
    main_view = WithPartsProjection.replay(store, stable_uuid(
        0, "convlog-proxy", "x-claude-code-session-id=cc-1"))
    store.close()
    assert [m.info.role for m in main_view.messages()] == ["user", "assistant"]
    main = stable_uuid(0, "convlog-proxy", "x-claude-code-session-id=cc-1")
    agent = stable_uuid(0, "convlog-proxy",
                        "x-claude-code-session-id=cc-1/x-claude-code-agent-id=agent-7")
    codex = stable_uuid(0, "convlog-proxy", "thread-id=th-1")
    spawned = stable_uuid(0, "convlog-proxy", "thread-id=th-2")
    [title] = set(sessions) - {main, agent, codex, spawned}
    assert sessions[title].parent == main
    assert sessions[agent].parent == main
    assert sessions[agent].fork_seq is None  # a child, not a fork: no shared history
    assert sessions[spawned].parent == codex
    assert sessions[main].parent is None


def test_session_keys() -> None:
    assert session_keys({"x-session-id": "oc1", "x-parent-session-id": "oc0"}) == (
        "x-session-id=oc1", "x-session-id=oc0")
    assert session_keys({"user-agent": "x"}) == (None, None)
