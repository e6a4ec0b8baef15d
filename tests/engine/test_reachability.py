"""Every row of every transition table is reachable through the public commands.

A deterministic breadth-first explorer applies a fixed list of command templates
to sessions on a memory store, starting from an empty session. Each state is
reached through a fork of its parent state's session (forks share the prefix),
and a command that is accepted into a new abstract state is explored further.
The lifecycle is instrumented: every transition actually committed is recorded
as (table, source state, event) together with the entity's observed state
before and after, and must be a row of the table that owns the event.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from engine import events as ev
from engine import lifecycle
from engine import tables as tb
from engine.errors import IllegalTransition, PartValidationError
from engine.events import Event, tag_of
from engine.lifecycle import Lifecycle
from engine.mailbox import ENTITY_OF as MAILBOX_ENTITY_OF
from engine.session import PartRef, Session, StepClock
from engine.store import MemoryStore

MID = "0190a2b4-0000-7000-8000-000000000001"
TEXT = PartRef(MID, "prt_text")
REASONING = PartRef(MID, "prt_reasoning")
TOOL = PartRef(MID, "prt_tool")

RowKey = tuple[str, str, str]  # (table entity, source state, event tag)


def _fresh(s: Session, name: str) -> str:
    return f"prt_{name}_{s.version}"


Template = tuple[str, Callable[[Session], object]]

MESSAGE_TEMPLATES: list[Template] = [
    ("start message", lambda s: s.start_message("assistant", message_id=MID)),
    ("complete message", lambda s: s.complete_message(MID, finish="stop")),
    ("stream ended", lambda s: s.append([ev.MessageStreamEnded(message_id=MID, finish="stop")])),
    ("complete message with error",
     lambda s: s.complete_message(MID, error=ev.MessageError(kind="api", message="500"))),
    ("abort message", lambda s: s.abort(MID, "user pressed stop")),
    ("add text", lambda s: s.add_text(MID, "Hel", part_id=TEXT.part_id)),
    ("text delta", lambda s: s.text_delta(TEXT, "lo")),
    ("end text", lambda s: s.end_part(TEXT)),
    ("add reasoning", lambda s: s.add_reasoning(MID, "hmm", part_id=REASONING.part_id)),
    ("reasoning delta", lambda s: s.reasoning_delta(REASONING, "…")),
    ("end reasoning", lambda s: s.end_part(REASONING, metadata={"signature": "sig"})),
    ("add tool", lambda s: s.add_tool(MID, "call_1", "read", part_id=TOOL.part_id)),
    ("tool input delta", lambda s: s.tool_input_delta(TOOL, '{"path": ')),
    ("tool input ready", lambda s: s.tool_input_ready(TOOL, {"path": "README.md"})),
    ("request approval", lambda s: s.request_approval(TOOL, reason="writes a file")),
    ("approve", lambda s: s.approve(TOOL)),
    ("deny", lambda s: s.deny(TOOL, "not now")),
    ("start tool", lambda s: s.start_tool(TOOL, title="Reading", timeout_ms=10)),
    ("tool progress", lambda s: s.tool_progress(TOOL, metadata={"bytes": 10})),
    ("complete tool", lambda s: s.complete_tool(TOOL, "# README", title="README.md")),
    ("fail tool", lambda s: s.fail_tool(TOOL, "EACCES")),
    ("cancel tool", lambda s: s.fail_tool(TOOL, "cancelled by user", kind="cancelled")),
    ("compact tool output", lambda s: s.compact_tool_output(TOOL)),
    ("expire tools", lambda s: s.expire(1 << 50)),
    ("start step", lambda s: s.start_step(MID, part_id=_fresh(s, "step"))),
    ("finish step", lambda s: s.finish_step(MID, "tool-calls", part_id=_fresh(s, "finish"))),
    ("add file", lambda s: s.add_file(MID, "text/plain", "file:///a.txt",
                                      part_id=_fresh(s, "file"))),
    ("add snapshot", lambda s: s.add_snapshot(MID, "snap1", part_id=_fresh(s, "snapshot"))),
    ("add patch", lambda s: s.add_patch(MID, "abc123", ["a.txt"], part_id=_fresh(s, "patch"))),
    ("add agent", lambda s: s.add_agent(MID, "build", part_id=_fresh(s, "agent"))),
    ("add subtask", lambda s: s.add_subtask(MID, "do it", "a subtask", "general",
                                            part_id=_fresh(s, "subtask"))),
    ("add retry", lambda s: s.add_retry(MID, 1, ev.MessageError(kind="api", message="429"),
                                        part_id=_fresh(s, "retry"))),
    ("add compaction", lambda s: s.add_compaction(MID, auto=True,
                                                  part_id=_fresh(s, "compaction"))),
]

CONVERSATION_TEMPLATES: list[Template] = [
    ("create conversation", lambda s: s.create_conversation("conv-1", cwd="/repo")),
    ("select model", lambda s: s.select_model(ev.ModelInfo(model_id="claude"))),
    ("change tools", lambda s: s.change_tools("builtin", [ev.ToolSpec(name="fs_read")])),
    ("add context file", lambda s: s.add_context_file("README.md")),
    ("remove context file", lambda s: s.remove_context_file("README.md")),
    ("set next message", lambda s: s.set_next_message("continue")),
    ("clear next message", lambda s: s.clear_next_message()),
    ("compact history", lambda s: s.compact_history("we read the README", keep_last=1)),
    ("clear history", lambda s: s.clear_history()),
    ("enter tangent", lambda s: s.enter_tangent()),
    ("exit tangent", lambda s: s.exit_tangent("last_entry")),
    ("create checkpoint", lambda s: s.create_checkpoint("t1", description="turn 1")),
    ("restore checkpoint", lambda s: s.restore_checkpoint("t1")),
    ("change file lines", lambda s: s.change_file_lines("a.py", before_lines=3, after_lines=5,
                                                        lines_added_by_agent=2)),
    ("note transcript", lambda s: s.note_transcript("> error shown")),
    ("replace transcript", lambda s: s.append([ev.TranscriptReplaced(lines=["a", "b"])])),
    ("import session", lambda s: s.append([ev.SessionImported(format="codex", source="r.jsonl",
                                                              original_id="x")])),
    ("title session", lambda s: s.append([ev.SessionTitled(title="Fix the build",
                                                           source="codex thread_name")])),
    ("pop memory item", lambda s: s.append([ev.ItemPopped(event_id="e-1")])),
    ("clear memory items", lambda s: s.append([ev.ItemsCleared(memory="openai_agents")])),
    ("trip guardrail", lambda s: s.append([ev.GuardrailTripped(guardrail="no_math",
                                                                stage="input")])),
    ("record run usage", lambda s: s.append([ev.RunUsageRecorded(turn="e-1", requests=1)])),
    ("save graph checkpoint", lambda s: s.append([ev.GraphCheckpointSaved(checkpoint_id="c")])),
    ("save graph writes", lambda s: s.append([ev.GraphWritesSaved(checkpoint_id="c",
                                                                   task_id="t")])),
]

TEMPLATES = MESSAGE_TEMPLATES + CONVERSATION_TEMPLATES

# The mailbox log's entities (engine.mailbox), explored on their own: their states
# are independent of the messages', so a joint search would only multiply states.
_P, _A, _B, _TOKEN = "project-1", "agent-a", "agent-b", "0" * 64
MAILBOX_TEMPLATES: list[Template] = [
    ("set up mailbox", lambda s: s.append([
        ev.ProjectCreated(project_id=_P, working_directory="/w"),
        ev.AgentRegistered(agent_id=_A), ev.AgentRegistered(agent_id=_B),
        ev.AgentAssigned(project_id=_P, agent_id=_A),
        ev.AgentAssigned(project_id=_P, agent_id=_B)])),
    ("set directory", lambda s: s.append([ev.ProjectDirectorySet(project_id=_P,
                                                                 working_directory="/x")])),
    ("team config", lambda s: s.append([ev.ProjectTeamConfigSet(project_id=_P,
                                                                 config={"name": "t"})])),
    ("set credential", lambda s: s.append([ev.AgentCredentialSet(agent_id=_A,
                                                                 passkey_hash=_TOKEN)])),
    ("unassign b", lambda s: s.append([ev.AgentUnassigned(project_id=_P, agent_id=_B)])),
    ("assign b", lambda s: s.append([ev.AgentAssigned(project_id=_P, agent_id=_B)])),
    ("issue token", lambda s: s.append([ev.TokenIssued(token_hash=_TOKEN, project_id=_P,
                                                       agent_id=_A, expires_at=1 << 50)])),
    ("revoke token", lambda s: s.append([ev.TokenRevoked(token_hash=_TOKEN)])),
    ("send", lambda s: s.append([ev.MailSent(message_id="m1", project_id=_P, sender_id=_A,
                                             receivers=[_B], content="hi")])),
    ("deliver", lambda s: s.append([ev.MailDelivered(message_id="m1", agent_id=_B)])),
    ("read", lambda s: s.append([ev.MailRead(message_id="m1", agent_id=_B)])),
]


def all_rows() -> set[RowKey]:
    return {(t.entity, r.source, r.tag) for t in tb.TABLES for r in t.rows}


def table_of(row: tb.Row) -> tb.Table:
    owners = [t for t in tb.TABLES if any(r is row for r in t.rows)]
    assert len(owners) == 1, row
    return owners[0]


def entity_state(lc: Lifecycle, e: Event, table: tb.Table) -> str:
    """The observed state of the entity ``e`` moves, in ``table``'s terms."""
    if isinstance(e, ev.MailboxEvent):
        return MAILBOX_ENTITY_OF[type(e)].locate(lc.mailbox, e)[0]
    if isinstance(e, ev.ConversationEvent):
        c = lc.conversation
        if table is tb.CONVERSATION:
            return c.state
        if table is tb.TANGENT:
            return c.tangent
        if table is tb.CONTEXT_FILE:
            return "present" if e.path in c.context_files else tb.ABSENT  # type: ignore[attr-defined]
        if table is tb.IMPORT:
            return "imported" if c.imported is not None else tb.ABSENT
        if table is tb.TITLE:
            return "titled" if c.titled is not None else tb.ABSENT
        return "created" if e.tag in c.checkpoints else tb.ABSENT  # type: ignore[attr-defined]
    msg = lc.messages.get(e.message_id)  # type: ignore[attr-defined]
    if table is tb.MESSAGE:
        return tb.ABSENT if msg is None else msg.state
    assert msg is not None
    assert isinstance(e, ev.PartEvent)
    if table is tb.STEP:
        return msg.step
    part = msg.parts.get(e.part_id)
    return tb.ABSENT if part is None else part.state


@dataclass
class Recorder:
    """Transitions committed by any Lifecycle while installed."""

    taken: dict[RowKey, str]  # row -> the first path that took it
    pending: list[tuple[Lifecycle, tb.Table, tb.Row, Event]]
    path: str = ""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        evolve, commit, rollback = Lifecycle.evolve, Lifecycle.commit, Lifecycle.rollback
        recorder = self

        def recording_evolve(lc: Lifecycle, e: Event, row: tb.Row) -> None:
            if not lc.journaling:  # replaying a stored log (Session.open): not a transition
                evolve(lc, e, row)
                return
            moves = [(table_of(row), row)]
            if isinstance(e, ev.StepStarted | ev.StepFinished):
                moves.append((tb.STEP, tb.STEP.index[(lc.messages[e.message_id].step, type(e))]))
            before = [entity_state(lc, e, t) for t, _ in moves]
            evolve(lc, e, row)
            for (table, r), b in zip(moves, before, strict=True):
                assert r.event is type(e)
                assert (b, entity_state(lc, e, table)) == (r.source, r.target), (table.entity, r)
                recorder.pending.append((lc, table, r, e))

        def recording_commit(lc: Lifecycle) -> None:
            commit(lc)
            mine = [p for p in recorder.pending if p[0] is lc]
            recorder.pending = [p for p in recorder.pending if p[0] is not lc]
            for _, table, row, _e in mine:
                recorder.taken.setdefault((table.entity, row.source, row.tag), recorder.path)

        def recording_rollback(lc: Lifecycle) -> None:
            rollback(lc)
            recorder.pending = [p for p in recorder.pending if p[0] is not lc]

        # Every move goes through evolve: the delta fast path and apply_batch's inline
        # part steps are checked on their own against the full check
        # (tests/engine/test_transitions.py, tests/engine/test_apply_batch.py).
        monkeypatch.setattr(lifecycle, "_SELF_LOOP", {})
        monkeypatch.setattr(lifecycle, "_CREATES", {})
        monkeypatch.setattr(lifecycle, "_MOVES", {})
        monkeypatch.setattr(Lifecycle, "evolve", recording_evolve)
        monkeypatch.setattr(Lifecycle, "commit", recording_commit)
        monkeypatch.setattr(Lifecycle, "rollback", recording_rollback)


def abstract_state(lc: Lifecycle) -> Any:
    """States that matter for legality; the ids of added parts do not."""
    msgs = tuple(sorted(
        (m.role, m.state, m.step,
         tuple(sorted((p.kind, p.state) for p in m.parts.values()
                      if p.kind in ("text", "reasoning", "tool"))))
        for m in lc.messages.values()
    ))
    c = lc.conversation
    m = lc.mailbox
    mailbox = (tuple(sorted(m.directories.items())), tuple(sorted(m.agents)),
               tuple(sorted((k, v[0]) for k, v in m.assignments.items())),
               tuple(sorted((k, v[0]) for k, v in m.tokens.items())),
               tuple(sorted((k, v[0]) for k, v in m.deliveries.items())))
    return (msgs, c.state, c.tangent, tuple(sorted(c.context_files)),
            tuple(sorted(c.checkpoints)), c.imported is not None, c.titled is not None, mailbox)


def explore(templates: list[Template], recorder: Recorder, *, max_depth: int = 8
            ) -> Iterator[tuple[str, Any]]:
    """BFS over command sequences; yields (path, abstract state) of every new state."""
    store = MemoryStore()
    root = Session.create(store, clock=StepClock())
    seen = {abstract_state(root.lifecycle)}
    frontier: deque[tuple[Session, list[str]]] = deque([(root, [])])
    wanted = all_rows()
    while frontier and not wanted <= recorder.taken.keys():
        session, path = frontier.popleft()
        if len(path) >= max_depth:
            continue
        for name, command in templates:
            child = session.fork()
            recorder.path = " -> ".join([*path, name])
            try:
                command(child)
            except (IllegalTransition, PartValidationError):
                assert child.version == session.version  # a rejection leaves the log as is
                continue
            state = abstract_state(child.lifecycle)
            if state not in seen:
                seen.add(state)
                frontier.append((child, [*path, name]))
                yield recorder.path, state


def test_every_table_row_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder({}, [])
    recorder.install(monkeypatch)
    states = [*explore(MAILBOX_TEMPLATES, recorder), *explore(TEMPLATES, recorder)]
    missing = all_rows() - recorder.taken.keys()
    assert not missing, f"unreachable rows: {sorted(missing)}"
    assert recorder.taken.keys() <= all_rows()  # never a transition outside the tables
    assert {tag for _, _, tag in recorder.taken} == {tag_of(c) for c in ev.EVENT_TYPES}
    assert len(states) > 20
    # Spot-check a few witnesses: the explorer found the short paths.
    assert recorder.taken[("message", tb.ABSENT, "message.started")] == "start message"
    approved = recorder.taken[("tool", "approved", "tool.started")]
    assert approved.endswith("request approval -> approve -> start tool"), approved


def test_explorer_records_only_committed_transitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch rejected half-way (an abort that cannot complete) records nothing."""
    recorder = Recorder({}, [])
    recorder.install(monkeypatch)
    session = Session.create(MemoryStore(), clock=StepClock())
    session.start_message("assistant", message_id=MID)
    session.add_tool(MID, "call_1", "read", part_id=TOOL.part_id)
    recorder.taken.clear()
    batch: list[Event] = [
        ev.ToolStarted(message_id=MID, part_id=TOOL.part_id),
        ev.TextDelta(message_id=MID, part_id="prt_missing", delta="x"),
    ]
    with pytest.raises(IllegalTransition):
        session.append(batch)
    assert recorder.taken == {}
    assert recorder.pending == []
    session.append(batch[:1])
    assert set(recorder.taken) == {("tool", "pending", "tool.started")}


def test_every_event_type_has_a_table_row() -> None:
    in_rows = {r.event for t in tb.TABLES for r in t.rows}
    missing = [tag_of(c) for c in ev.EVENT_TYPES if c not in in_rows]
    assert not missing, f"event types no table decides: {missing}"
    assert in_rows <= set(ev.EVENT_TYPES)


def test_tables_are_well_formed() -> None:
    """Every non-absent source state is reachable as some row's target in its table."""
    for table in tb.TABLES:
        targets = {r.target for r in table.rows}
        sources = {r.source for r in table.rows}
        if table is tb.STEP:
            assert sources == targets == {"idle", "in-step"}
            continue
        if table in (tb.TANGENT,):
            assert sources == targets
            continue
        assert sources - {tb.ABSENT} <= targets, table.entity
