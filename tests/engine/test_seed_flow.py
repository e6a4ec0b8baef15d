"""The seed's read_file flow (part-abstraction-toolstate, section 7.2), step by step.

A user asks to read a file; the assistant opens a step, calls ``read_file``
(pending -> running -> completed), finishes the step and completes. Each stage
is checked on the WithParts view, field by field, and the final state in the
seed's JSON form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine import events as ev
from engine.events import Event
from engine.ids import is_uuid
from engine.session import PartRef, Session
from engine.store import Store
from projections import views as v
from projections.json import converter
from projections.withparts import WithPartsProjection

MODEL = ev.ModelRef(provider_id="anthropic", model_id="claude-sonnet")
TOKENS = ev.Tokens(input=120, output=30, reasoning=5, cache=ev.CacheTokens(read=7, write=3))
RAW = '{"path": "README.md"}'


@dataclass
class Flow:
    session: Session
    store: Store
    proj: WithPartsProjection
    user: str = ""
    user_text: str = ""
    assistant: str = ""
    step_start: PartRef | None = None
    tool: PartRef | None = None
    step_finish: PartRef | None = None
    stages: dict[str, v.WithParts] = field(default_factory=dict)

    def event(self, seq: int) -> Event:
        (e,) = list(self.store.read(self.session.id, seq, seq))
        return e

    def last(self) -> Event:
        return self.event(self.session.version)

    def tool_part(self, stage: str) -> v.ToolPart:
        parts = [p for p in self.stages[stage].parts if isinstance(p, v.ToolPart)]
        assert len(parts) == 1
        return parts[0]


@pytest.fixture
def flow(session: Session, store: Store) -> Flow:
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    f = Flow(session, store, proj)

    f.user = session.user_message("Please read README.md", agent="build", model=MODEL)
    f.user_text = proj.message(f.user).parts[0].id

    f.assistant = session.start_message(
        "assistant", agent="build", model=MODEL,
        path=ev.PathInfo(cwd="/repo", root="/repo"), parent_id=f.user,
    )
    f.stages["started"] = proj.message(f.assistant)

    f.step_start = session.start_step(f.assistant, snapshot="snap-1")
    f.tool = session.add_tool(f.assistant, "call_read_1", "read_file", raw=RAW)
    f.stages["pending"] = proj.message(f.assistant)

    session.tool_input_ready(f.tool, {"path": "README.md"})
    session.start_tool(f.tool, title="README.md")
    f.stages["running"] = proj.message(f.assistant)

    session.tool_progress(f.tool, metadata={"bytes_read": 512})
    session.complete_tool(f.tool, "# convlog\n", title="Read README.md",
                          metadata={"lines": 1})
    f.stages["completed"] = proj.message(f.assistant)

    f.step_finish = session.finish_step(f.assistant, "tool-calls", cost=0.0042, tokens=TOKENS,
                                        snapshot="snap-2")
    session.complete_message(f.assistant, cost=0.0042, tokens=TOKENS, finish="tool-calls")
    f.stages["done"] = proj.message(f.assistant)
    return f


def test_user_message_is_one_finished_text_part(flow: Flow) -> None:
    msg = flow.proj.message(flow.user)
    info = msg.info
    assert isinstance(info, v.UserInfo)
    assert info.role == "user"
    assert info.id == flow.user
    assert is_uuid(info.id)
    assert info.session_id == flow.session.id
    assert is_uuid(info.session_id)
    assert info.agent == "build"
    assert info.model == v.ModelRef("anthropic", "claude-sonnet")
    assert info.summary is None  # BR-11: only on compaction
    assert info.time.completed is not None
    assert info.time.created < info.time.completed

    (part,) = msg.parts
    assert isinstance(part, v.TextPart)
    assert (part.session_id, part.message_id) == (flow.session.id, flow.user)  # BR-01
    assert part.text == "Please read README.md"
    assert part.synthetic is None
    assert part.ignored is None
    assert part.time is not None
    assert part.time.start is not None
    assert part.time.end is not None
    assert part.time.start <= part.time.end


def test_assistant_info_before_any_part(flow: Flow) -> None:
    msg = flow.stages["started"]
    info = msg.info
    assert isinstance(info, v.AssistantInfo)
    assert info.role == "assistant"
    assert info.parent_id == flow.user
    assert info.path == v.PathInfo("/repo", "/repo")
    assert (info.provider_id, info.model_id) == ("anthropic", "claude-sonnet")
    assert info.time.completed is None
    assert info.cost == 0.0
    assert info.finish is None
    assert info.error is None
    assert msg.parts == []


def test_pending_tool_keeps_raw(flow: Flow) -> None:
    msg = flow.stages["pending"]
    assert [type(p) for p in msg.parts] == [v.StepStartPart, v.ToolPart]
    step = msg.parts[0]
    assert isinstance(step, v.StepStartPart)
    assert step.snapshot == "snap-1"
    tool = flow.tool_part("pending")
    assert flow.tool is not None
    assert tool.id == flow.tool.part_id
    assert (tool.session_id, tool.message_id) == (flow.session.id, flow.assistant)
    assert (tool.call_id, tool.tool) == ("call_read_1", "read_file")
    assert tool.state == v.ToolStatePending(input={}, raw=RAW)  # BR-06


def test_running_tool_records_start_time(flow: Flow) -> None:
    tool = flow.tool_part("running")
    state = tool.state
    assert isinstance(state, v.ToolStateRunning)
    assert state.input == {"path": "README.md"}
    assert state.title == "README.md"
    started = [e for e in flow.store.read(flow.session.id) if isinstance(e, ev.ToolStarted)]
    assert len(started) == 1
    assert state.time.start == started[0].time  # BR-07


def test_completed_tool_records_end_time_and_output(flow: Flow) -> None:
    running = flow.tool_part("running").state
    state = flow.tool_part("completed").state
    assert isinstance(running, v.ToolStateRunning)
    assert isinstance(state, v.ToolStateCompleted)
    completed = [e for e in flow.store.read(flow.session.id) if isinstance(e, ev.ToolCompleted)]
    assert len(completed) == 1
    assert state.input == {"path": "README.md"}
    assert state.output == "# convlog\n"  # BR-09: not empty
    assert state.title == "Read README.md"
    assert state.metadata == {"bytes_read": 512, "lines": 1}  # progress metadata merged
    assert state.time.start == running.time.start  # the real start survives completion
    assert state.time.end == completed[0].time  # BR-08
    assert state.time.start < state.time.end
    assert state.time.compacted is None
    assert state.attachments is None


def test_step_finish_and_completion(flow: Flow) -> None:
    msg = flow.stages["done"]
    assert [type(p) for p in msg.parts] == [v.StepStartPart, v.ToolPart, v.StepFinishPart]
    finish = msg.parts[2]
    assert isinstance(finish, v.StepFinishPart)
    assert flow.step_finish is not None
    assert finish.id == flow.step_finish.part_id
    assert finish.reason == "tool-calls"
    assert finish.cost == 0.0042
    assert finish.snapshot == "snap-2"
    assert finish.tokens == v.Tokens(120, 30, 5, v.CacheTokens(7, 3))

    info = msg.info
    assert isinstance(info, v.AssistantInfo)
    assert info.cost == 0.0042  # BR-12
    assert info.tokens == v.Tokens(120, 30, 5, v.CacheTokens(7, 3))  # BR-13
    assert info.finish == "tool-calls"
    assert info.error is None
    completion = flow.last()
    assert isinstance(completion, ev.MessageCompleted)
    assert info.time.completed == completion.time  # BR-14
    assert info.time.created < info.time.completed


def test_part_ids_unique_within_message(flow: Flow) -> None:
    ids = [p.id for p in flow.stages["done"].parts]
    assert len(set(ids)) == len(ids)  # BR-02


def test_incremental_projection_equals_replay(flow: Flow) -> None:
    rebuilt = WithPartsProjection(flow.session.id).apply_all(flow.store.read(flow.session.id))
    assert rebuilt.messages() == flow.proj.messages()
    assert rebuilt.seq == flow.proj.seq == flow.session.version == 13


def test_event_log_of_the_flow(flow: Flow) -> None:
    events = list(flow.store.read(flow.session.id))
    assert [e.seq for e in events] == list(range(1, 14))
    assert [ev.tag_of(type(e)) for e in events] == [
        "message.started", "text.added", "part.ended", "message.completed",
        "message.started", "step.started", "tool.added", "tool.input_ready", "tool.started",
        "tool.progress", "tool.completed", "step.finished", "message.completed",
    ]
    assert all(e.session_id == flow.session.id for e in events)
    times = [e.time for e in events]
    assert times == sorted(times)
    assert [e.actor for e in events][4:] == [
        "assistant", "assistant", "assistant", "assistant", "tool", "tool", "tool",
        "assistant", "assistant",
    ]


def test_json_uses_the_seed_names(flow: Flow) -> None:
    data: list[dict[str, Any]] = converter.unstructure(flow.proj.messages(), list[v.WithParts])
    assert len(data) == 2
    user, assistant = data
    sid = flow.session.id

    assert user["info"]["role"] == "user"
    assert user["info"]["sessionID"] == sid
    assert user["info"]["model"] == {"providerID": "anthropic", "modelID": "claude-sonnet"}
    assert "summary" not in user["info"]
    (text,) = user["parts"]
    assert text["type"] == "text"
    assert text["sessionID"] == sid
    assert text["messageID"] == flow.user
    assert "synthetic" not in text
    assert "session_id" not in text

    info = assistant["info"]
    assert info["role"] == "assistant"
    assert info["parentID"] == flow.user
    assert info["path"] == {"cwd": "/repo", "root": "/repo"}
    assert info["time"]["completed"] > info["time"]["created"]
    assert info["cost"] == 0.0042
    assert info["tokens"] == {  # BR-13: all four, as the seed types them
        "input": 120, "output": 30, "reasoning": 5, "cache": {"read": 7, "write": 3},
    }

    start, tool, finish = assistant["parts"]
    assert start == {"type": "step-start", "id": start["id"], "sessionID": sid,
                     "messageID": flow.assistant, "snapshot": "snap-1"}
    assert tool["type"] == "tool"
    assert tool["callID"] == "call_read_1"
    assert tool["tool"] == "read_file"
    assert tool["messageID"] == flow.assistant
    state = tool["state"]
    assert state["status"] == "completed"
    assert set(state) == {"status", "input", "output", "title", "metadata", "time"}
    assert set(state["time"]) == {"start", "end"}
    assert finish["type"] == "step-finish"
    assert finish["reason"] == "tool-calls"
    assert finish["tokens"]["reasoning"] == 5

    assert converter.structure(data, list[v.WithParts]) == flow.proj.messages()


def test_json_tool_states_at_each_stage(flow: Flow) -> None:
    def state_json(stage: str) -> dict[str, Any]:
        out: dict[str, Any] = converter.unstructure(flow.tool_part(stage), v.ToolPart)
        return out["state"]  # type: ignore[no-any-return]

    pending = state_json("pending")
    assert pending == {"status": "pending", "input": {}, "raw": RAW}
    running = state_json("running")
    assert running["status"] == "running"
    assert set(running["time"]) == {"start"}
    assert running["title"] == "README.md"
    assert state_json("completed")["status"] == "completed"


def test_zero_tokens_are_still_written(session: Session) -> None:
    """BR-13: tokens always carry input/output/reasoning/cache, even when zero."""
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    mid = session.start_message("assistant")
    session.complete_message(mid)
    data: dict[str, Any] = converter.unstructure(proj.message(mid), v.WithParts)
    assert data["info"]["cost"] == 0.0
    assert data["info"]["tokens"] == {
        "input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0},
    }
