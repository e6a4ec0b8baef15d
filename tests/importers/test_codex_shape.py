"""Codex rollouts keep their true shape (issue 23, classes 8 and 9): the report says
only what is true of the store, a turn's tokens are every request's, an API error
ends its turn, and the thread's name is the session's title."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.importers.codex import plan_codex
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

SID = "0199a0b1-0000-7000-8000-0000000000c0"


def _line(kind: str, **payload: Any) -> str:
    return json.dumps({"timestamp": "2026-09-03T14:00:00Z", "type": kind, "payload": payload})


def _head() -> list[str]:
    return [_line("session_meta", id=SID, cwd="/app", cli_version="0.171.0"),
            _line("event_msg", type="task_started"),
            _line("response_item", type="message", role="user",
                  content=[{"type": "input_text", "text": "go"}])]


def _call(i: int) -> str:
    return _line("response_item", type="function_call", name="shell", call_id=f"c{i}",
                 arguments=json.dumps({"command": ["echo", str(i)]}))


def _output(i: int) -> str:
    return _line("response_item", type="function_call_output", call_id=f"c{i}",
                 output=f"Exit code: 0\n{i}")


def _developer(text: str) -> str:
    return _line("response_item", type="message", role="developer",
                 content=[{"type": "input_text", "text": text}])


def _tokens(out: int, total: int) -> str:
    usage = {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": out,
             "reasoning_output_tokens": 0, "total_tokens": 10 + out}
    return _line("event_msg", type="token_count", info={
        "last_token_usage": usage, "total_token_usage": {**usage, "output_tokens": total}})


def _plan(tmp: Path, lines: list[str]) -> Any:
    path = Path(tempfile.mkdtemp(dir=tmp)) / f"rollout-2026-09-03T14-00-00-{SID}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return plan_codex(path)


def _tools(history: list[v.WithParts]) -> list[v.ToolPart]:
    return [p for m in history for p in m.parts if isinstance(p, v.ToolPart)]


def test_a_developer_message_between_calls_and_outputs_reports_nothing_running(
        tmp_path: Path) -> None:
    plan = _plan(tmp_path, [*_head(), _call(1), _call(2), _developer("approval granted"),
                            _output(1), _output(2),
                            _line("event_msg", type="task_complete")])
    store = written(plan)
    tools = _tools(at(store, plan.sessions[0].id).messages())
    assert [t.state.TAG for t in tools] == ["completed", "completed"]
    assert not any("left running" in k for k in plan.report.unmapped)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.just(n), st.permutations(range(n)), st.lists(st.booleans(), min_size=n, max_size=n),
    st.lists(st.integers(0, n), max_size=3), st.booleans())))
def test_the_report_of_running_calls_is_true_of_the_store(
        tmp_path: Path, shape: tuple[int, list[int], list[bool], list[int], bool]) -> None:
    """Any calls, outputs in any order (some missing), developer messages anywhere: the
    calls the report says are left running are exactly those running in the store."""
    n, order, answered, developers, ended = shape
    body = [_call(i) for i in range(n)] + [_output(i) for i in order if answered[i]]
    for k, at_ in enumerate(sorted(developers, reverse=True)):
        body.insert(at_, _developer(f"note {k}"))
    lines = [*_head(), *body, *([_line("event_msg", type="task_complete")] if ended else [])]
    plan = _plan(tmp_path, lines)
    store = written(plan)
    running = {t.call_id for s in plan.sessions for t in _tools(at(store, s.id).messages())
               if t.state.TAG == "running"}
    reported = {k.split("'")[1] for k in plan.report.unmapped if "left running" in k}
    assert running == reported == {f"c{i}" for i in range(n) if not answered[i]}


def test_a_turns_tokens_are_every_requests(tmp_path: Path) -> None:
    """176 output tokens against 500 in the file: only the turn's last request counted."""
    plan = _plan(tmp_path, [*_head(), _call(1), _tokens(124, 124), _tokens(124, 124),
                            _output(1), _call(2), _tokens(200, 324), _output(2),
                            _line("response_item", type="message", role="assistant",
                                  content=[{"type": "output_text", "text": "done"}]),
                            _tokens(176, 500), _line("event_msg", type="task_complete")])
    store = written(plan)
    done = [e for e in store.read(plan.sessions[0].id) if isinstance(e, ev.MessageCompleted)
            and e.tokens is not None]
    assert [e.tokens.output for e in done if e.tokens] == [500]


def test_an_api_error_ends_its_turn(tmp_path: Path) -> None:
    for end in (_line("event_msg", type="task_complete",
                      error={"message": "stream disconnected before completion"}),
                _line("event_msg", type="error",
                      message="stream disconnected before completion")):
        plan = _plan(tmp_path, [*_head(), end, _line("event_msg", type="task_complete")])
        store = written(plan)
        history = at(store, plan.sessions[0].id).messages()
        info = history[-1].info
        assert isinstance(info, v.AssistantInfo)
        assert info.error is not None
        assert (info.error.kind, info.error.message) == (
            "api", "stream disconnected before completion")


def test_the_threads_name_is_the_sessions_title(tmp_path: Path) -> None:
    plan = _plan(tmp_path, [*_head(), _line("event_msg", type="thread_name_updated",
                                            thread_id=SID, thread_name="Fix the build"),
                            _line("event_msg", type="thread_name_updated", thread_id=SID,
                                  thread_name="Fix the flaky build")])
    store = written(plan)
    titled = [e for e in store.read(plan.sessions[0].id) if isinstance(e, ev.SessionTitled)]
    assert [(e.title, e.source) for e in titled] == [("Fix the flaky build",
                                                      "codex thread_name")]


def test_a_spawned_agents_task_in_encrypted_content_is_its_prompt(tmp_path: Path) -> None:
    task = "Review src/app.py for unchecked errors and report them"
    plan = _plan(tmp_path, [_line("session_meta", id=SID, cwd="/app"),
                            _line("inter_agent_communication", author="/root",
                                  recipient="/root/reviewer", content="",
                                  encrypted_content=task),
                            _line("inter_agent_communication", author="/root",
                                  recipient="/root/reviewer", content="",
                                  encrypted_content="gAAAAABo" + "x" * 60)])
    store = written(plan)
    texts = [p.text for m in at(store, plan.sessions[0].id).messages() for p in m.parts
             if isinstance(p, v.TextPart)]
    assert task in texts
    assert not any(t.startswith("gAAAA") for t in texts)
    assert "an inter-agent message's encrypted_content: not kept" in plan.report.unmapped


FORK = "0199a0b1-0000-7000-8000-0000000000f0"


def _numbered(lines: list[str]) -> list[str]:
    return [json.dumps({**json.loads(line), "ordinal": i}) for i, line in enumerate(lines)]


def _turn(text: str, answer: str) -> list[str]:
    return [_line("event_msg", type="task_started"),
            _line("response_item", type="message", role="user",
                  content=[{"type": "input_text", "text": text}]),
            _line("response_item", type="message", role="assistant",
                  content=[{"type": "output_text", "text": answer}]),
            _line("event_msg", type="task_complete")]


def test_an_exec_fork_shares_its_parents_prefix(tmp_path: Path) -> None:
    parent = _numbered([_line("session_meta", id=SID, cwd="/app"),
                        *_turn("first", "one"), *_turn("second", "two")])
    fork = [_line("session_meta", id=FORK, cwd="/app", forked_from_id=SID,
                  forked_from_ordinal_exclusive=5), *_turn("second, differently", "deux")]
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / f"rollout-2026-09-03T14-00-00-{SID}.jsonl").write_text("\n".join(parent) + "\n")
    alone = folder / f"rollout-2026-09-03T14-05-00-{FORK}.jsonl"
    alone.write_text("\n".join(fork) + "\n")
    plan = plan_codex(folder)
    store = written(plan)
    main, forked = plan.sessions
    assert (main.kind, forked.kind, forked.parent) == ("main", "fork", main.id)

    def texts(sid: str) -> list[str]:
        return [p.text for m in at(store, sid).messages() for p in m.parts
                if isinstance(p, v.TextPart)]

    assert texts(main.id) == ["first", "one", "second", "two"]
    assert texts(forked.id) == ["first", "one", "second, differently", "deux"]
    lone = plan_codex(alone)
    assert [s.kind for s in lone.sessions] == ["main"]
    assert any("exec fork" in k for k in lone.report.unmapped)
