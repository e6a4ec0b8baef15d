"""Claude Code JSONL: DAG order, rewinds as forks, resume dedupe, sidechains, compaction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.importers.base import PROGRESS, ImportInputError
from engine.importers.claude_code import plan_claude_code, plan_files
from engine.importers.write import write_plan
from engine.store import MemoryStore
from projections import views as v
from projections.render import anthropic, openai_chat
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

CC = FIXTURES / "claude-code"
MAIN = CC / "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f.jsonl"


def sessions_by_kind(plan: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in plan.report.sessions:
        out.setdefault(s.kind, []).append(s)
    return out


def tools_of(messages: list[v.WithParts]) -> dict[str, v.ToolPart]:
    return {p.call_id: p for m in messages for p in m.parts if isinstance(p, v.ToolPart)}


def test_the_directory_imports_as_a_session_a_fork_and_children() -> None:
    plan = plan_claude_code(CC)
    store = written(plan)
    kinds = sessions_by_kind(plan)
    assert [len(kinds[k]) for k in ("main", "fork", "child")] == [1, 1, 2]
    main = at(store, kinds["main"][0].id).messages()
    texts = [p.text for m in main for p in m.parts if isinstance(p, v.TextPart)]
    assert texts[0].startswith("<command-name>/init</command-name>")
    # One assistant message per message.id: thinking, text and two tools in one.
    first = main[1]
    assert first.info.role == "assistant"
    kinds_of_parts = [type(p).__name__ for p in first.parts]
    assert kinds_of_parts == ["ReasoningPart", "TextPart", "ToolPart", "ToolPart"]
    reasoning = first.parts[0]
    assert isinstance(reasoning, v.ReasoningPart)
    assert (reasoning.metadata or {})["anthropic"] == {"signature": "sig-abc"}
    info = main[1].info
    assert isinstance(info, v.AssistantInfo)
    assert info.tokens is not None
    assert info.tokens.output == 30  # the turn's last line carries its usage


def test_out_of_order_results_pair_by_id_and_keep_typed_output() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    tools = tools_of(at(store, plan.report.sessions[0].id).messages())
    bash, read = tools["toolu_B"], tools["toolu_A"]
    assert isinstance(bash.state, v.ToolStateCompleted)
    assert bash.state.output == "1 failed, 4 passed"
    assert bash.state.metadata["claude_code"]["toolUseResult"]["stdout"] == "1 failed, 4 passed"
    assert isinstance(read.state, v.ToolStateCompleted)
    assert read.state.output.startswith("def test_add")
    edit = tools["toolu_C"]
    assert isinstance(edit.state, v.ToolStateError)
    assert "File has not been read yet" in edit.state.error


def test_a_turn_cut_off_stays_visibly_unfinished() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    messages = at(store, plan.report.sessions[0].id).messages()
    last = messages[-1]
    assert last.info.role == "assistant"
    assert last.info.time.completed is None
    assert isinstance(tools_of([last])["toolu_D"].state, v.ToolStateRunning)
    assert any("toolu_D" in what for what in plan.report.unmapped)


def test_a_rewind_forks_sharing_the_prefix() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    kinds = sessions_by_kind(plan)
    fork = kinds["fork"][0]
    info = store.session_info(fork.id)
    assert info.parent == kinds["main"][0].id
    assert info.fork_seq == fork.fork_seq
    main_msgs = at(store, kinds["main"][0].id).messages()
    fork_msgs = at(store, fork.id).messages()
    shared = [m.info.id for m in fork_msgs[:4]]
    assert shared == [m.info.id for m in main_msgs[:4]]
    assert fork_msgs[4].parts[0].text == "no, explain instead"  # type: ignore[union-attr]
    assert isinstance(fork_msgs[4].parts[1], v.FilePart)
    assert main_msgs[4].parts[0].text == "yes, and delegate a review"  # type: ignore[union-attr]


def test_a_sidechain_is_a_child_linked_from_the_task_call() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    kinds = sessions_by_kind(plan)
    child = kinds["child"][0]
    task = tools_of(at(store, kinds["main"][0].id).messages())["toolu_T"]
    assert (task.metadata or {})["child_session"] == child.id
    messages = at(store, child.id).messages()
    assert [m.info.role for m in messages] == ["user", "assistant"]


def test_compaction_and_summary_lines() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    messages = at(store, plan.report.sessions[0].id).messages()
    compaction = [m for m in messages if any(isinstance(p, v.CompactionPart) for p in m.parts)]
    assert len(compaction) == 1
    part = compaction[0].parts[0]
    assert isinstance(part, v.CompactionPart)
    assert part.auto is True
    assert plan.report.sessions[0].title == "Fix the failing test"


def test_every_unmapped_record_type_is_reported_with_its_line() -> None:
    plan = plan_claude_code(MAIN)
    written(plan)
    notes = plan.report.unmapped
    for kind in ("'progress'", "'file-history-snapshot'", "'queue-operation'",
                 "'attachment'", "'last-prompt'", "'telemetry-blob'", "'stop_hook_summary'"):
        hits = [k for k in notes if kind in k]
        assert hits, kind
        assert notes[hits[0]].lines, kind


def test_reimport_and_resume_dedupe() -> None:
    store = MemoryStore()
    resumed = plan_claude_code(CC / "9e8d7c6b-1111-4222-8333-444455556666.jsonl")
    write_plan(store, resumed)
    assert resumed.report.written > 0
    full = plan_claude_code(CC)
    write_plan(store, full)
    assert full.report.existing == resumed.report.written
    again = plan_claude_code(CC)
    write_plan(store, again)
    assert again.report.written == 0
    assert len(store.sessions()) == 4


def test_the_import_renders_to_providers() -> None:
    plan = plan_claude_code(MAIN)
    store = written(plan)
    fork = sessions_by_kind(plan)["fork"][0]
    history = at(store, fork.id).messages()
    sent = anthropic.messages(history)
    assert sent[0]["role"] == "user"
    thinking = sent[1]["content"][0]
    assert thinking == {"type": "thinking", "thinking": "Let me look at the test.",
                        "signature": "sig-abc"}
    assert openai_chat.messages(history)


# --------------------------------------------------------------------------- bad input


def lines_file(tmp_path: Path, text: bytes) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(text)
    return path


def test_invalid_json_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    good = MAIN.read_bytes().splitlines(keepends=True)
    path = lines_file(tmp_path, b"".join([*good[:5], b"{not json\n", *good[5:]]))
    store = MemoryStore()
    with pytest.raises(ImportInputError) as caught:
        write_plan(store, plan_claude_code(path))
    assert caught.value.line == 6
    assert str(path) in str(caught.value)
    assert store.sessions() == []


def test_lenient_skips_and_lists_bad_lines(tmp_path: Path) -> None:
    good = MAIN.read_bytes().splitlines(keepends=True)
    path = lines_file(tmp_path, b"".join([*good[:5], b"{not json\n", *good[5:], b'{"type":']))
    plan = plan_claude_code(path, lenient=True)
    written(plan)
    assert [n for n, _ in plan.report.skipped] == [6, len(good) + 2]
    assert "truncated" in plan.report.skipped[-1][1]


def test_a_truncated_final_line_is_named(tmp_path: Path) -> None:
    path = lines_file(tmp_path, MAIN.read_bytes() + b'{"type": "user", "uuid": "x')
    with pytest.raises(ImportInputError, match="truncated final line"):
        plan_claude_code(path)


def test_a_binary_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportInputError, match="binary"):
        plan_claude_code(lines_file(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00\x00"))


def test_a_huge_line_is_refused_without_holding_it(tmp_path: Path) -> None:
    path = lines_file(tmp_path, b'{"type":"progress","data":"' + b"x" * 5000 + b'"}\n')
    with pytest.raises(ImportInputError, match="over 1000 bytes"):
        plan_files([path], str(path), max_line=1000)


# --------------------------------------------------------------------------- fuzzing


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in MAIN.read_text().splitlines()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.permutations(range(len(records()))), st.data())
def test_any_line_order_or_loss_imports_a_valid_log(tmp_path: Path, order: list[int],
                                                    data: st.DataObject) -> None:
    """Lines shuffled (order is the DAG's) or dropped (a damaged file) still import validly."""
    recs = records()
    keep = data.draw(st.sets(st.sampled_from(order), min_size=1))
    path = tmp_path / "shuffled.jsonl"
    path.write_text("".join(json.dumps(recs[i]) + "\n" for i in order if i in keep))
    plan = plan_claude_code(path)
    written(plan)
    if len(keep) == len(order):  # shuffled only: the same sessions and messages
        want = plan_files([MAIN], str(MAIN))  # the file alone, without its subagents/
        written(want)
        assert sorted((s.kind, s.messages, s.tools) for s in plan.report.sessions) == sorted(
            (s.kind, s.messages, s.tools) for s in want.report.sessions)


def test_copies_of_the_directory_import_identically(tmp_path: Path) -> None:
    copy = tmp_path / "cc"
    shutil.copytree(CC, copy)
    a, b = plan_claude_code(CC), plan_claude_code(copy)
    assert [s.events for s in a.sessions] == [s.events for s in b.sessions]


def test_a_directory_import_names_the_file_of_each_line() -> None:
    plan = plan_claude_code(CC)
    deduped = plan.report.unmapped[
        "a uuid seen before (a resumed session's replayed prefix): deduplicated"]
    assert deduped.lines[0] == "9e8d7c6b-1111-4222-8333-444455556666.jsonl:1"


def test_progress_is_reported_on_request(tmp_path: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    token = PROGRESS.set(lambda *args: seen.append(args))
    try:
        plan_claude_code(MAIN)
    finally:
        PROGRESS.reset(token)
    size = MAIN.stat().st_size
    assert (str(MAIN), size, size) in seen  # then its subagents' files


def test_a_subagent_file_links_to_the_task_result_by_agent_id(tmp_path: Path) -> None:
    """Newer versions: ``subagents/agent-<id>.jsonl``, named by ``toolUseResult.agentId``."""
    records = [json.loads(x) for x in MAIN.read_text().splitlines()]
    main = [r for r in records if not r.get("isSidechain")]
    (tmp_path / "subagents").mkdir()
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in main))
    side = [dict(r, agentId="a1b2c3", uuid="x" + r["uuid"],
                 parentUuid=r["parentUuid"] and "x" + r["parentUuid"])
            for r in records if r.get("isSidechain")]
    (tmp_path / "subagents" / "agent-a1b2c3.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in side))
    plan = plan_claude_code(tmp_path)
    store = written(plan)
    child = next(s for s in plan.report.sessions if s.kind == "child")
    task = tools_of(at(store, plan.report.sessions[0].id).messages())["toolu_T"]
    assert isinstance(task.state, v.ToolStateCompleted)
    assert task.state.metadata["child_session"] == child.id


def test_a_parent_cycle_is_reported_not_dropped(tmp_path: Path) -> None:
    records = [json.loads(x) for x in MAIN.read_text().splitlines()]
    for r in records:
        if r.get("uuid") == "u-021":
            r["parentUuid"] = "u-021"  # its own parent: reachable from no root
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    plan = plan_claude_code(path)
    store = written(plan)
    # Reported, and no longer lost: the line starts a chain of its own.
    cycle = plan.report.unmapped["parentUuid forms a cycle: its earliest line starts a new "
                                 "chain"]
    assert cycle.count == 1
    assert "a line on a parentUuid cycle: not reachable, not imported" not in \
        plan.report.unmapped
    texts = [p.text for s in plan.sessions for m in at(store, s.id).messages()
             for p in m.parts if isinstance(p, v.TextPart)]
    assert "add(1, 2) returns 3, the test expects 4." in texts


def test_a_session_file_brings_its_subagents_directory() -> None:
    """Claude Code 2.1+: ``<session>/subagents/agent-<id>.jsonl`` beside the session file
    (with its ``.meta.json``) imports with the session file alone."""
    plan = plan_claude_code(MAIN)
    store = written(plan)
    children = [s for s in plan.sessions if s.kind == "child"]
    heads = [next(iter(store.read(c.id))) for c in children]
    agents = [h for h in heads if isinstance(h, ev.SessionImported)
              and h.source == "agent-f00d.jsonl"]
    assert len(agents) == 1
    assert agents[0].metadata is not None
    assert agents[0].metadata["agent"] == {"agentType": "general-purpose",
                                           "description": "summarise"}
    assert agents[0].metadata["parent_session"] == plan.sessions[0].id


def test_a_persisted_output_reads_its_tool_results_file(tmp_path: Path) -> None:
    """2.1.2+: a large output lives in ``<session>/tool-results/<id>.txt``; the log holds
    a ``<persisted-output>`` preview. The file's text is the output; without the file the
    preview is, and the report says so."""
    sid = "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f"
    preview = ("<persisted-output>\nOutput too large (61.2KB). Full output saved to: "
               f"/home/me/.claude/projects/-home-me-app/{sid}/tool-results/toolu_A.txt\n\n"
               "Preview (first 2KB):\nline 1\n</persisted-output>")
    records = [json.loads(x) for x in MAIN.read_text().splitlines()]
    for r in records:
        content = (r.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == "toolu_A":
                block["content"] = preview
    path = tmp_path / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    missing = plan_files([path], str(path))
    written(missing)
    assert any("persisted-output" in k for k in missing.report.unmapped)
    (tmp_path / sid / "tool-results").mkdir(parents=True)
    (tmp_path / sid / "tool-results" / "toolu_A.txt").write_text("line 1\n" * 9000)
    plan = plan_files([path], str(path))
    store = written(plan)
    tool = tools_of(at(store, plan.sessions[0].id).messages())["toolu_A"]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "line 1\n" * 9000
    assert tool.state.metadata["claude_code"]["persisted"]["preview"] == preview
