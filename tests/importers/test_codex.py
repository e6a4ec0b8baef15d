"""Codex rollouts: both output generations, dedupe of event_msg copies, unfinished turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers.base import ImportInputError
from engine.importers.codex import plan_codex
from engine.importers.detect import detect
from engine.importers.write import write_plan
from projections import views as v
from projections.render import openai_responses
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

CODEX = FIXTURES / "codex"
OLD = next(CODEX.glob("rollout-2025-09-03*.jsonl"))
NEW = next(CODEX.glob("rollout-2025-11-20*.jsonl"))


def messages(path: Path) -> tuple[list[v.WithParts], list[str]]:
    plan = plan_codex(path)
    store = written(plan)
    return at(store, plan.report.sessions[0].id).messages(), list(plan.report.unmapped)


def tools(history: list[v.WithParts]) -> dict[str, v.ToolPart]:
    return {p.call_id: p for m in history for p in m.parts if isinstance(p, v.ToolPart)}


def texts(history: list[v.WithParts]) -> list[str]:
    return [p.text for m in history for p in m.parts if isinstance(p, v.TextPart)]


def test_visible_text_duplicated_in_event_msg_comes_in_once() -> None:
    history, _ = messages(OLD)
    all_texts = texts(history)
    assert all_texts.count("why does make test fail?") == 1
    assert all_texts.count("There was no test target; I added one and the tests pass.") == 1
    reasoning = [p for m in history for p in m.parts if isinstance(p, v.ReasoningPart)]
    assert [p.text for p in reasoning] == ["**Running the tests**"]
    # An event_msg without a response_item counterpart is kept, not deduplicated away.
    assert "only typed in the TUI, never echoed as an item" in all_texts


def test_both_output_generations() -> None:
    old, _ = messages(OLD)
    shell = tools(old)["call_A"]
    assert isinstance(shell.state, v.ToolStateCompleted)
    assert shell.state.output == "make: *** No rule to make target 'test'.\n"
    assert shell.state.metadata["codex"]["metadata"] == {"exit_code": 2,
                                                         "duration_seconds": 0.1}
    assert shell.state.input == {"command": ["bash", "-lc", "make test"], "workdir": "/home/me/app"}
    new, _ = messages(NEW)
    plain = tools(new)["call_1"]
    assert isinstance(plain.state, v.ToolStateCompleted)
    assert plain.state.output.startswith("Exit code: 0\n")


def test_every_call_kind_maps() -> None:
    history, notes = messages(OLD)
    calls = tools(history)
    assert {p.tool for p in calls.values()} >= {"shell", "apply_patch", "local_shell",
                                                 "web_search"}
    assert calls["call_P"].state.input["input"].startswith("*** Begin Patch")
    assert any("web_search_call" in n for n in notes)
    assert any(isinstance(p, v.SnapshotPart) for m in history for p in m.parts)


def test_reasoning_keeps_its_encrypted_content_and_renders_back() -> None:
    history, _ = messages(OLD)
    reasoning = next(p for m in history for p in m.parts if isinstance(p, v.ReasoningPart))
    assert (reasoning.metadata or {})["openai"]["encrypted_content"] == "gAAAAABo-encrypted"
    items = openai_responses.input_items(history)
    sent = [i for i in items if i.get("type") == "reasoning"]
    assert sent
    assert sent[0]["encrypted_content"] == "gAAAAABo-encrypted"


def test_an_aborted_turn_settles_as_aborted() -> None:
    history, _ = messages(OLD)
    aborted = tools(history)["call_B"]
    assert isinstance(aborted.state, v.ToolStateError)
    info = next(m.info for m in history if any(p is aborted for p in m.parts))
    assert isinstance(info, v.AssistantInfo)
    assert info.error is not None
    assert info.error.kind == "aborted"


def test_a_rollout_ending_mid_turn_stays_unfinished() -> None:
    history, notes = messages(NEW)
    last = history[-1]
    assert last.info.role == "assistant"
    assert last.info.time.completed is None
    assert isinstance(tools(history)["call_2"].state, v.ToolStateRunning)
    assert any("ends mid-turn" in n for n in notes)


def test_compactions_and_unknown_lines_are_kept_or_reported() -> None:
    history, notes = messages(OLD)
    assert sum(isinstance(p, v.CompactionPart) for m in history for p in m.parts) == 2
    assert any("future_line_type" in n for n in notes)
    assert any("mcp_list_tools_response" in n for n in notes)


def test_reimport_writes_nothing() -> None:
    first = plan_codex(CODEX)
    store = written(first)
    again = plan_codex(CODEX)
    write_plan(store, again)
    assert again.report.written == 0
    assert again.report.existing == first.report.written


def test_invalid_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    lines = NEW.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:3], "not json\n", *lines[3:]]))
    with pytest.raises(ImportInputError) as caught:
        plan_codex(path)
    assert caught.value.line == 4


NEWEST = next((FIXTURES / "codex").glob("rollout-2026-01-15*.jsonl"))


def test_the_newest_generation() -> None:
    """Content-item outputs, turn_started/turn_complete, raw reasoning content echoed as
    agent_reasoning_raw_content, message phase, namespace, compaction_summary,
    replacement_history and thread_rolled_back (reported)."""
    plan = plan_codex(NEWEST)
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    turn = messages[1]
    assert turn.info.time.completed is not None  # turn_complete closed it
    reasoning = [p for p in turn.parts if isinstance(p, v.ReasoningPart)]
    assert len(reasoning) == 1  # the raw-content event_msg is the same text
    tools = {p.tool: p for p in turn.parts if isinstance(p, v.ToolPart)}
    image = tools["view_image"].state
    assert isinstance(image, v.ToolStateCompleted)
    assert image.output == "image attached"
    assert image.metadata["codex"]["content_items"][0]["type"] == "input_image"
    # ... and the image is the tool's attachment, shown as a file part
    url = image.metadata["codex"]["content_items"][0]["image_url"]
    assert [(a.mime, a.url) for a in image.attachments or []] == [(url.split(";")[0][5:], url)]
    assert tools["view_image"].metadata is not None
    assert tools["view_image"].metadata["codex"]["namespace"] == "builtin"
    text = next(p for p in turn.parts if isinstance(p, v.TextPart))
    assert text.metadata is not None
    assert text.metadata["codex"]["phase"] == "final_answer"
    assert sum(isinstance(p, v.TextPart) for p in turn.parts) == 1  # agent_message deduped
    # thread_rolled_back (was reported only) drops the turn: what follows is a fork at the
    # turn's start, sharing session.imported and nothing else; the main session keeps it.
    main, fork = plan.sessions
    assert (fork.kind, fork.parent, fork.fork_seq) == ("fork", main.id, 1)
    after = at(store, fork.id).messages()
    assert all(m.info.role == "user" for m in after)
    assert any(isinstance(p, v.CompactionPart) for m in after for p in m.parts)
    unmapped = " ".join(plan.report.unmapped)
    assert "replacement_history" in unmapped
    assert "thread_rolled_back" not in unmapped
    # image_generation_call was only reported; it is a hosted tool whose result is the image.
    assert "image_generation_call" not in unmapped
    generated = tools["image_generation"].state
    assert isinstance(generated, v.ToolStateCompleted)
    assert [(a.mime, a.url) for a in generated.attachments or []] == [
        ("image/png", "data:image/png;base64,BASE64")]


LEGACY = next((FIXTURES / "codex-legacy").glob("rollout-*.jsonl"))


def _enveloped(path: Path, out: Path) -> Path:
    """The same rollout as a later Codex writes it: ``{timestamp, type, payload}`` lines."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    header, items = lines[0], [x for x in lines[1:] if "record_type" not in x]
    stamp = header["timestamp"]
    wrapped = [{"timestamp": stamp, "type": "session_meta", "payload": header}]
    wrapped += [{"timestamp": stamp, "type": "response_item", "payload": x} for x in items]
    out.write_text("".join(json.dumps(x) + "\n" for x in wrapped))
    return out


def test_a_rollout_before_the_envelope_imports() -> None:
    # Codex up to about 0.2x: a bare {id, timestamp, instructions, git} header, bare items
    # and {record_type: state} markers. It was refused as "no Codex rollout lines".
    assert detect(LEGACY) == "codex"
    plan = plan_codex(LEGACY)
    history = at(written(plan), plan.report.sessions[0].id).messages()
    assert plan.sessions[0].original_id == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert "list the files, then count lines in a.py" in texts(history)
    assert history[0].info.system == "Always run the tests."
    calls = tools(history)
    first, second = calls["call_1"].state, calls["call_2"].state
    assert isinstance(first, v.ToolStateCompleted)
    assert isinstance(second, v.ToolStateCompleted)
    assert first.output == "a.py\nb.py\n"
    assert second.metadata["codex"]["metadata"]["exit_code"] == 1
    reasoning = [p for m in history for p in m.parts if isinstance(p, v.ReasoningPart)]
    assert (reasoning[0].metadata or {})["openai"]["encrypted_content"] == "gAAAAABoLEGACY"
    assert plan.report.unmapped["a legacy {record_type: state} line: nothing to map"].count == 6


def test_a_legacy_rollout_reads_as_its_enveloped_twin(tmp_path: Path) -> None:
    twin = _enveloped(LEGACY, tmp_path / LEGACY.name)
    old, new = (plan_codex(LEGACY), plan_codex(twin))
    a = at(written(old), old.report.sessions[0].id).messages()
    b = at(written(new), new.report.sessions[0].id).messages()
    assert texts(a) == texts(b)
    assert {k: t.state for k, t in tools(a).items()} == {k: t.state for k, t in tools(b).items()}


def test_other_json_lines_are_still_not_a_rollout(tmp_path: Path) -> None:
    # Only a bare {id, timestamp} header or a Responses item type reads as a legacy line.
    other = tmp_path / "s.jsonl"
    other.write_text(json.dumps({"type": "user", "uuid": "u1", "timestamp": "2025-01-01T00:00:00Z",
                                 "message": {"role": "user", "content": "hi"}}) + "\n"
                     + json.dumps({"sessionId": "g", "id": "m1", "type": "gemini"}) + "\n")
    with pytest.raises(ImportInputError, match="no Codex rollout lines"):
        plan_codex(other)
