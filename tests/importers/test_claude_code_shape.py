"""Imported Claude Code sessions keep their true shape (issue 23, classes 1-4).

Each class has the small synthetic shape the issue names and a property over random
shapes of its kind: random trees of parallel calls (a call's line the child of any
earlier line of its message, each result the child of its call's line or of an
earlier result, the answer the child of any result), results in any order, dangling
parents, queued prompts. And the import of a file equals the import of the folder
that holds it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.claude_code import plan_claude_code
from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

SID = "5e55a000-0000-4000-8000-0000000000aa"
PNG = "iVBORw0KGgo="


def _rec(uuid: str, parent: str | None, second: int, **fields: Any) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": SID, "isSidechain": False,
            "userType": "external", "cwd": "/w", "version": "2.1.230",
            "timestamp": f"2026-10-05T10:{second // 60:02d}:{second % 60:02d}.000Z", **fields}


def _prompt(uuid: str, parent: str | None, second: int, text: str) -> dict[str, Any]:
    return _rec(uuid, parent, second, type="user", message={"role": "user", "content": text})


def _call(uuid: str, parent: str, second: int, i: int, last: bool) -> dict[str, Any]:
    return _rec(uuid, parent, second, type="assistant", message={
        "id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use" if last else None,
        "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Read",
                     "input": {"file_path": f"f{i}"}}]})


def _result(uuid: str, parent: str, second: int, i: int) -> dict[str, Any]:
    return _rec(uuid, parent, second, type="user", message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"text {i}"}]})


def _answer(uuid: str, parent: str, second: int, text: str = "done",
            msg: str = "msg_2") -> dict[str, Any]:
    return _rec(uuid, parent, second, type="assistant", message={
        "id": msg, "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn", "content": [{"type": "text", "text": text}]})


def _write(tmp: Path, lines: list[dict[str, Any]], name: str = SID) -> Path:
    folder = Path(tempfile.mkdtemp(dir=tmp))
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def _history(path: Path) -> tuple[Any, list[v.WithParts]]:
    plan = plan_claude_code(path)
    store = written(plan)
    return plan, at(store, plan.sessions[0].id).messages()


def _tools(history: list[v.WithParts]) -> list[v.ToolPart]:
    return [p for m in history for p in m.parts if isinstance(p, v.ToolPart)]


def _texts(history: list[v.WithParts]) -> list[str]:
    return [p.text for m in history for p in m.parts if isinstance(p, v.TextPart)]


# --------------------------------------------------------------------------- class 1


def test_the_issues_parallel_shape_is_one_turn_not_a_fork(tmp_path: Path) -> None:
    """T2's line a child of T1's, T2's result a child of T2's line, T1's result a child
    of T1's line, the answer a child of T1's result: it made a fork, T1 left running."""
    path = _write(tmp_path, [
        _prompt("u0", None, 0, "read both"),
        _call("t1", "u0", 1, 1, False),
        _call("t2", "t1", 2, 2, True),
        _result("r2", "t2", 3, 2),
        _result("r1", "t1", 4, 1),
        _answer("a", "r1", 5),
    ])
    plan, history = _history(path)
    assert [s.kind for s in plan.sessions] == ["main"]
    tools = _tools(history)
    assert [(t.call_id, t.state.TAG) for t in tools] == [("toolu_1", "completed"),
                                                        ("toolu_2", "completed")]
    assert _texts(history) == ["read both", "done"]
    assert all(m.info.time.completed is not None for m in history)


def test_a_prompt_typed_again_is_still_a_rewind(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        _prompt("u0", None, 0, "first"),
        _answer("a0", "u0", 1, "one", "msg_0"),
        _prompt("u1", "a0", 2, "second"),
        _answer("a1", "u1", 3, "two", "msg_1"),
        _prompt("u2", "a0", 4, "second, edited"),
        _answer("a2", "u2", 5, "two again", "msg_2"),
    ])
    plan = plan_claude_code(path)
    store = written(plan)
    assert [s.kind for s in plan.sessions] == ["main", "fork"]
    assert _texts(at(store, plan.sessions[1].id).messages()) == [
        "first", "one", "second, edited", "two again"]


@st.composite
def _parallel_turns(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, bool]:
    """A prompt, one message of n tool calls whose lines form any tree, each result the
    child of its call's line or of an earlier result, the answer (or a queued prompt
    and then the answer) the child of any result; line order any or as written."""
    n = draw(st.integers(1, 5))
    lines = [_prompt("u0", None, 0, "go")]
    calls: list[str] = []
    for i in range(n):
        parent = "u0" if not calls else draw(st.sampled_from(calls))
        calls.append(f"c{i}")
        lines.append(_call(f"c{i}", parent, 1 + i, i, i == n - 1))
    results: list[str] = []
    for k, i in enumerate(draw(st.permutations(range(n)))):
        parent = draw(st.sampled_from([f"c{i}", *results]))
        results.append(f"r{i}")
        lines.append(_result(f"r{i}", parent, 20 + k, i))
    parent = draw(st.sampled_from(results))
    queued = draw(st.booleans())
    if queued:
        lines.append(_rec("q", parent, 39, type="attachment", attachment={
            "type": "queued_command", "prompt": "and also this"}))
        parent = "q"
    lines.append(_answer("a", parent, 40))
    shuffled = draw(st.booleans())
    if shuffled:
        lines = lines[:1] + draw(st.permutations(lines[1:]))
    return lines, n, queued


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_parallel_turns())
def test_any_tree_of_parallel_calls_is_one_session(
        tmp_path: Path, shape: tuple[list[dict[str, Any]], int, bool]) -> None:
    lines, n, queued = shape
    plan, history = _history(_write(tmp_path, lines))
    assert [s.kind for s in plan.sessions] == ["main"]
    tools = _tools(history)
    assert sorted(t.call_id for t in tools) == [f"toolu_{i}" for i in range(n)]
    for tool in tools:
        assert isinstance(tool.state, v.ToolStateCompleted)
        assert tool.state.output == f"text {tool.call_id.removeprefix('toolu_')}"
    assert _texts(history) == ["go", *(["and also this"] if queued else []), "done"]
    assert all(m.info.time.completed is not None for m in history)
    assert not any("no result" in k or "left running" in k for k in plan.report.unmapped)


# --------------------------------------------------------------------------- class 2


COMPACT_PROMPT = "Your task is to create a detailed summary of the conversation so far"


def test_a_compaction_agent_is_a_child_session_not_a_fork(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        _prompt("u0", None, 0, "hello"),
        _answer("a0", "u0", 1, "hi", "msg_0"),
        _rec("cb", None, 3, type="system", subtype="compact_boundary", logicalParentUuid="a0",
             content="Conversation compacted", compactMetadata={"trigger": "auto"}),
        _rec("cs", "cb", 4, type="user", isCompactSummary=True, message={
            "role": "user", "content": "This session is being continued. Summary: hello."}),
        _prompt("u1", "cs", 5, "go on"),
        _answer("a1", "u1", 6, "going", "msg_1"),
    ])
    agents = path.parent / SID / "subagents"
    agents.mkdir(parents=True)
    (agents / "agent-acompact-7f3e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {**_prompt("k0", "a0", 2, COMPACT_PROMPT), "isSidechain": True, "agentId": "acompact-7f3e"},
        {**_answer("k1", "k0", 3, "Summary: hello.", "msg_k"), "isSidechain": True,
         "agentId": "acompact-7f3e"},
    ]))
    plan = plan_claude_code(path)
    store = written(plan)
    assert [s.kind for s in plan.sessions] == ["main", "child"]
    main, child = plan.sessions
    assert child.parent == main.id
    main_texts = _texts(at(store, main.id).messages())
    assert COMPACT_PROMPT not in main_texts
    assert main_texts[-2:] == ["go on", "going"]
    assert _texts(at(store, child.id).messages()) == [COMPACT_PROMPT, "Summary: hello."]


# --------------------------------------------------------------------------- class 3


def test_a_dangling_parent_attaches_to_the_line_before_it(tmp_path: Path) -> None:
    """A Stop hook's progress line that is not in the file, and a compact boundary whose
    logical parent is not either: one session, both reported."""
    path = _write(tmp_path, [
        _prompt("u0", None, 0, "hello"),
        _answer("a0", "u0", 1, "hi", "msg_0"),
        _prompt("u1", "stop-hook-progress-not-here", 2, "next"),
        _answer("a1", "u1", 3, "ok", "msg_1"),
        _rec("cb", None, 4, type="system", subtype="compact_boundary",
             logicalParentUuid="gone", content="Conversation compacted"),
        _prompt("u2", "cb", 5, "after"),
        _answer("a2", "u2", 6, "fine", "msg_2"),
    ])
    plan, history = _history(path)
    assert [s.kind for s in plan.sessions] == ["main"]
    assert _texts(history) == ["hello", "hi", "next", "ok", "after", "fine"]
    note = ("parentUuid names no line of its file (a Stop hook's line, a compaction): "
            "attached to the line before it in the file")
    assert plan.report.unmapped[note].lines == [3, 5]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(2, 8).flatmap(lambda n: st.lists(st.booleans(), min_size=n, max_size=n)))
def test_any_dangling_parents_keep_one_session(tmp_path: Path, dangle: list[bool]) -> None:
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    for i, gone in enumerate(dangle):
        line = (_prompt(f"l{i}", parent, i, f"ask {i}") if i % 2 == 0
                else _answer(f"l{i}", str(parent), i, f"answer {i}", f"msg_{i}"))
        if gone and i:
            line["parentUuid"] = f"missing-{i}"
        lines.append(line)
        parent = f"l{i}"
    plan, history = _history(_write(tmp_path, lines))
    assert [s.kind for s in plan.sessions] == ["main"]
    assert _texts(history) == [f"ask {i}" if i % 2 == 0 else f"answer {i}"
                               for i in range(len(dangle))]


# --------------------------------------------------------------------------- class 4


def test_a_queued_prompt_is_a_user_message_with_its_images(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        _prompt("u0", None, 0, "build it"),
        _call("t1", "u0", 1, 1, True),
        _rec("q", "t1", 2, type="attachment", attachment={"type": "queued_command", "prompt": [
            {"type": "text", "text": "also look at this"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]}),
        _result("r1", "q", 3, 1),
        _answer("a", "r1", 4),
    ])
    plan, history = _history(path)
    assert [s.kind for s in plan.sessions] == ["main"]
    queued = [m for m in history if any(
        isinstance(p, v.TextPart) and p.text == "also look at this" for p in m.parts)]
    assert [m.info.role for m in queued] == ["user"]
    files = [p for p in queued[0].parts if isinstance(p, v.FilePart)]
    assert [(f.mime, f.url) for f in files] == [("image/png", f"data:image/png;base64,{PNG}")]
    assert _tools(history)[0].state.TAG == "completed"
    assert not any("'attachment'" in k for k in plan.report.unmapped)


# ---------------------------------------------------------------- a file and its folder


def _stored(path: Path) -> list[tuple[str, list[Any]]]:
    plan = plan_path(path)
    store = written(plan)
    return [(s.id, [(type(e).__name__, e.id, e) for e in store.read(s.id)])
            for s in plan.sessions]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_parallel_turns(), st.booleans())
def test_the_import_of_a_file_equals_the_import_of_its_folder(
        tmp_path: Path, shape: tuple[list[dict[str, Any]], int, bool], agent: bool) -> None:
    path = _write(tmp_path, shape[0])
    if agent:  # a compaction agent beside it, naming a line of the main file
        agents = path.parent / SID / "subagents"
        agents.mkdir(parents=True)
        (agents / "agent-acompact-1.jsonl").write_text(json.dumps(
            {**_prompt("k0", "u0", 50, COMPACT_PROMPT), "isSidechain": True}) + "\n")
    assert _stored(path) == _stored(path.parent)


# ------------------------------------------------------- --fork-session (real 2.1.197 shape)


def test_a_fork_session_file_is_a_fork_and_the_original_keeps_its_lines(
        tmp_path: Path) -> None:
    """A --fork-session file copies the original's lines (same uuids, its own sessionId)
    and goes on. Its name sorted first, so its copies were kept and the original lost
    them (a cycle through the compaction, three main sessions); and what it added went
    on as the original's own turns."""
    original = "bbbb0000-0000-4000-8000-000000000001"
    forked = "aaaa0000-0000-4000-8000-00000000000f"
    first = [_prompt("u0", None, 0, "hello"), _answer("a0", "u0", 1, "hi", "msg_0"),
             _rec("cb", None, 2, type="system", subtype="compact_boundary",
                  logicalParentUuid="a0", content="Conversation compacted"),
             _rec("cs", "cb", 3, type="user", isCompactSummary=True, message={
                 "role": "user", "content": "Summary: hello."}),
             _prompt("u1", "cs", 4, "after"), _answer("a1", "u1", 5, "fine", "msg_1")]
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    (folder / f"{original}.jsonl").write_text("".join(
        json.dumps({**r, "sessionId": original}) + "\n" for r in first))
    copied = [{**r, "sessionId": forked} for r in first[2:]]
    copied[0]["timestamp"] = "2026-10-05T10:09:00.000Z"  # the copy is written later
    added = [{**_prompt("u2", "a1", 600, "in the fork"), "sessionId": forked},
             {**_answer("a2", "u2", 601, "forked", "msg_2"), "sessionId": forked}]
    (folder / f"{forked}.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in [*copied, *added]))
    plan = plan_path(folder)
    store = written(plan)
    assert [s.kind for s in plan.sessions] == ["main", "fork"]
    main, fork = plan.sessions
    assert fork.parent == main.id
    assert _texts(at(store, main.id).messages()) == ["hello", "hi", "Summary: hello.",
                                                     "after", "fine"]
    assert _texts(at(store, fork.id).messages())[-2:] == ["in the fork", "forked"]
