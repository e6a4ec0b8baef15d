"""Gemini CLI 0.61's ``--resume``: it writes a header and the whole history again
(re-spelled from the model's: new times, calls as ``functionCall`` parts, answers as
``<id>_response`` records), compresses the history by a ``$set`` of a summary, an
acknowledgement and the latest turns under new ids, rolls a refused turn back, and
opens a stub file of its own. One conversation: no forks (it read as an empty main
session and 7 forks), the compaction with its summary, the records' tokens kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

SID = "defeace8-84eb-4676-9906-259d47deb449"
CONTEXT = {"id": "ctx", "type": "user", "timestamp": "2026-11-28T11:00:00.000Z",
           "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}


def _header(t: int) -> dict[str, Any]:
    return {"sessionId": SID, "projectHash": "ab", "startTime": _ts(t), "lastUpdated": _ts(t),
            "kind": "main"}


def _ts(t: int) -> str:
    return f"2026-11-28T11:{t // 60:02d}:{t % 60:02d}.000Z"


def _turn(n: int, calls: int, t: int) -> list[dict[str, Any]]:
    """A prompt and the model's answer (with ``calls`` settled calls), as 0.61 records them."""
    prompt = {"id": f"u{n}", "timestamp": _ts(t), "type": "user",
              "content": [{"text": f"prompt {n}"}]}
    made = [{"id": f"call_{n}_{i}", "name": "run_shell_command", "args": {"command": f"echo {i}"},
             "result": [{"functionResponse": {"id": f"call_{n}_{i}", "name": "run_shell_command",
                                              "response": {"output": f"out {n}.{i}"}}}],
             "status": "success"} for i in range(calls)]
    answer: dict[str, Any] = {
        "id": f"g{n}", "timestamp": _ts(t + 1), "type": "gemini", "content": f"answer {n}",
        "thoughts": [{"subject": "", "description": f"thinking {n}"}],
        "tokens": {"input": 100 + n, "output": 10 + n, "cached": 0, "thoughts": 0, "tool": 0,
                   "total": 110 + 2 * n}, "model": "gemini-3.8-flash"}
    if made:
        answer["toolCalls"] = made
    return [prompt, answer]


def _respelled(records: list[dict[str, Any]], t: int) -> list[dict[str, Any]]:
    """The history as a --resume writes it: the model's spelling, new times."""
    out = []
    for r in records:
        if r["type"] == "user":
            out.append({**r, "timestamp": _ts(t)})
            continue
        calls = r.get("toolCalls") or []
        out.append({"id": r["id"], "timestamp": _ts(t), "type": "gemini", "content": [
            *[{"text": th["description"], "thought": True} for th in r.get("thoughts", [])],
            *([{"text": r["content"]}] if r["content"] else []),
            *[{"functionCall": {"id": c["id"], "name": c["name"], "args": c["args"]}}
              for c in calls]]})
        if calls:
            out.append({"id": f"{r['id']}_response", "timestamp": _ts(t), "type": "user",
                        "content": [c["result"][0] for c in calls]})
    return out


def _file(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _conversation(turns: list[int], resumes: set[int]) -> list[dict[str, Any]]:
    """A session of ``turns`` (calls per turn), resumed before each turn in ``resumes``."""
    lines: list[dict[str, Any]] = [_header(0), {"$set": {"messages": [CONTEXT]}}]
    history = [CONTEXT]
    for n, calls in enumerate(turns):
        t = 10 * (n + 1)
        if n in resumes:
            lines += [_header(t), {"$set": {"messages": [{**CONTEXT, "timestamp": _ts(t)}]}},
                      {"$set": {"sessionId": SID}},
                      {"$set": {"messages": _respelled(history, t)}}]
        for r in _turn(n, calls, t + 2):
            lines += [r, {"$set": {"lastUpdated": r["timestamp"]}}]
            history.append(r)
    return lines


def _sessions(path: Path) -> list[tuple[str, list[ev.Event]]]:
    plan = plan_path(path)
    return [(s.kind, s.events) for s in plan.sessions]


@settings(max_examples=20, deadline=None)
@given(turns=st.lists(st.integers(0, 2), min_size=1, max_size=4), data=st.data())
def test_a_resume_anywhere_changes_nothing(tmp_path_factory: Any, turns: list[int],
                                           data: st.DataObject) -> None:
    resumes = data.draw(st.sets(st.integers(1, len(turns)), max_size=len(turns)))
    plain = _sessions(_file(tmp_path_factory.mktemp("g") / "s.jsonl",
                            _conversation(turns, set())))
    resumed = _sessions(_file(tmp_path_factory.mktemp("g") / "s.jsonl",
                              _conversation(turns, resumes)))
    assert [k for k, _ in resumed] == ["main"]
    assert resumed == plain


def test_the_compression_is_a_compaction_with_its_summary(tmp_path: Path) -> None:
    lines = _conversation([1, 0, 1], {1, 2})
    history = [CONTEXT, *[r for n, c in enumerate([1, 0, 1]) for r in _turn(n, c, 10 * n + 12)]]
    kept = [{**r, "id": f"new-{r['id']}"} for r in _respelled(history[-2:], 50)]
    compressed = [{**CONTEXT, "timestamp": _ts(50)},
                  {"id": "s1", "timestamp": _ts(50), "type": "user",
                   "content": [{"text": "Summary of the session."}]},
                  {"id": "s2", "timestamp": _ts(50), "type": "gemini",
                   "content": [{"text": "Got it. Thanks for the additional context!"}]}, *kept]
    after = _turn(3, 0, 60)
    refused = {"id": "u9", "timestamp": _ts(70), "type": "user",
               "content": [{"text": "refused prompt"}]}
    lines += [{"$set": {"messages": compressed}}, *after,
              {"$set": {"messages": [*compressed, *after]}},  # re-stated after the compression
              refused, {"$set": {"messages": [*compressed, *after]}}]  # the refusal rolled back
    path = _file(tmp_path / "session-2026-11-28T11-42-defeace8.jsonl", lines)
    _file(tmp_path / "session-2026-11-28T11-43-defeace8.jsonl",  # the stub of a later resume
          [_header(65), {"$set": {"messages": [{**CONTEXT, "timestamp": _ts(65)}]}}])
    plan = plan_path(tmp_path)
    assert [s.kind for s in plan.sessions] == ["main"]
    assert "not imported" in plan.report.render()  # the stub, said so
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    parts = [p for m in messages for p in m.parts]
    assert sum(isinstance(p, v.CompactionPart) for p in parts) == 1
    texts = [p.text for p in parts if isinstance(p, v.TextPart)]
    assert "Summary of the session." in texts
    assert "Got it. Thanks for the additional context!" not in texts
    # Nothing doubled by the copies; the turn after it and the refused prompt are kept.
    assert texts.count("answer 2") == 1
    assert texts[-3:] == ["prompt 3", "answer 3", "refused prompt"]
    tokens = [m.info.tokens.output for m in messages if isinstance(m.info, v.AssistantInfo)]
    assert tokens == [10, 11, 12, 13]
    assert plan_path(path).sessions[0].id == plan.sessions[0].id


def test_a_history_that_changes_an_output_still_forks(tmp_path: Path) -> None:
    lines = _conversation([1], set())
    history = [CONTEXT, *_turn(0, 1, 12)]
    changed = json.loads(json.dumps(_respelled(history, 30)).replace("out 0.0", "[masked]"))
    lines += [_header(30), {"$set": {"messages": changed}}]
    assert [k for k, _ in _sessions(_file(tmp_path / "s.jsonl", lines))] == ["main", "fork"]
