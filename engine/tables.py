"""Transition tables: the only place that says which state changes are legal.

Each table maps (current state, event type) to the next state. ``absent`` is the
state of an entity that does not exist yet. A row may narrow the failure kinds it
accepts (``kinds``). The lifecycle checker reads these tables; nothing else
decides legality, and ``docs/transitions.md`` is generated from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from engine import events as ev
from engine.events import tag_of

ABSENT: Final = "absent"


@attrs.frozen
class Row:
    source: str
    event: type[ev.Event]
    target: str
    kinds: frozenset[str] | None = None
    note: str = ""

    @property
    def tag(self) -> str:
        return tag_of(self.event)


class Table:
    """One entity's rows, indexed for O(1) lookup."""

    __slots__ = ("by_source", "entity", "index", "rows", "summary", "targets_of")

    def __init__(self, entity: str, summary: str, rows: Iterable[Row]) -> None:
        self.entity = entity
        self.summary = summary
        self.rows: tuple[Row, ...] = tuple(rows)
        self.index: dict[tuple[str, type[ev.Event]], Row] = {}
        self.by_source: dict[str, list[Row]] = {}
        self.targets_of: dict[type[ev.Event], tuple[str, ...]] = {}
        for row in self.rows:
            key = (row.source, row.event)
            if key in self.index:
                raise ValueError(f"duplicate row {row.source} --{row.tag}--> in {entity}")
            self.index[key] = row
            self.by_source.setdefault(row.source, []).append(row)
            targets = self.targets_of.get(row.event, ())
            if row.target not in targets:
                self.targets_of[row.event] = (*targets, row.target)

    @property
    def states(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.setdefault(row.source)
            seen.setdefault(row.target)
        return tuple(seen)

    @property
    def terminal(self) -> tuple[str, ...]:
        return tuple(s for s in self.states if s not in self.by_source)

    def valid_from(self, state: str) -> tuple[list[str], list[str]]:
        """Valid next states and the events that reach them."""
        rows = self.by_source.get(state, [])
        targets = list(dict.fromkeys(r.target for r in rows))
        tags = list(dict.fromkeys(r.tag for r in rows))
        return targets, tags


ABORT_LIKE: Final = frozenset({"aborted", "cancelled", "denied"})

MESSAGE: Final = Table(
    "message",
    "A message is open until completed; parts may only be added or streamed while it is open. "
    "Completion needs every tool settled and every streaming part ended (an abort command "
    "settles them first) and, unless the completion carries an error, no open step.",
    [
        Row(ABSENT, ev.MessageStarted, "open"),
        Row("open", ev.MessageCompleted, "completed"),
    ],
)

STREAM: Final = Table(
    "stream part",
    "Text and reasoning parts: deltas only while streaming.",
    [
        Row(ABSENT, ev.TextAdded, "streaming"),
        Row(ABSENT, ev.ReasoningAdded, "streaming"),
        Row("streaming", ev.TextDelta, "streaming"),
        Row("streaming", ev.ReasoningDelta, "streaming"),
        Row("streaming", ev.PartEnded, "done"),
    ],
)

TOOL: Final = Table(
    "tool",
    "ToolState: pending -> running -> completed | error, with the approval states of the "
    "Vercel AI SDK between pending and running. pending, awaiting-approval and approved are "
    "all status `pending` in WithParts; compacted is status `completed` with time.compacted.",
    [
        Row(ABSENT, ev.ToolAdded, "pending"),
        Row("pending", ev.ToolInputDelta, "pending", note="raw JSON fragment appended to raw"),
        Row("pending", ev.ToolInputReady, "pending", note="parsed input set"),
        Row("pending", ev.ToolApprovalRequested, "awaiting-approval"),
        Row("awaiting-approval", ev.ToolApprovalGranted, "approved"),
        Row("awaiting-approval", ev.ToolApprovalDenied, "error", note="error kind denied"),
        Row("pending", ev.ToolStarted, "running", note="time.start recorded (BR-07)"),
        Row("approved", ev.ToolStarted, "running", note="time.start recorded (BR-07)"),
        Row("pending", ev.ToolFailed, "error", kinds=ABORT_LIKE),
        Row("awaiting-approval", ev.ToolFailed, "error", kinds=ABORT_LIKE),
        Row("approved", ev.ToolFailed, "error", kinds=ABORT_LIKE),
        Row("running", ev.ToolProgress, "running", note="title / metadata update"),
        Row("running", ev.ToolCompleted, "completed", note="output not empty (BR-09)"),
        Row("running", ev.ToolFailed, "error", note="any kind"),
        Row("completed", ev.ToolOutputCompacted, "compacted", note="time.compacted set"),
    ],
)

STEP: Final = Table(
    "step",
    "Each message alternates step-start and step-finish parts.",
    [
        Row("idle", ev.StepStarted, "in-step"),
        Row("in-step", ev.StepFinished, "idle"),
    ],
)

PART: Final = Table(
    "part",
    "Parts that are complete when added.",
    [
        Row(ABSENT, ev.FileAdded, "added"),
        Row(ABSENT, ev.StepStarted, "added"),
        Row(ABSENT, ev.StepFinished, "added"),
        Row(ABSENT, ev.SnapshotAdded, "added"),
        Row(ABSENT, ev.PatchAdded, "added"),
        Row(ABSENT, ev.AgentAdded, "added"),
        Row(ABSENT, ev.SubtaskAdded, "added"),
        Row(ABSENT, ev.RetryAdded, "added"),
        Row(ABSENT, ev.CompactionAdded, "added"),
    ],
)

_NEEDS_CONVERSATION = " Every event in this table needs `conversation.created` first."

CONVERSATION: Final = Table(
    "conversation",
    "The session's conversation (Q CLI's ConversationState): created once, then every "
    "conversation-wide command is a self-loop on `active`. A session without any "
    "conversation event is legal; its messages still fold into a conversation view.",
    [
        Row(ABSENT, ev.ConversationCreated, "active"),
        Row("active", ev.ModelSelected, "active"),
        Row("active", ev.ToolsChanged, "active", note="replaces one origin's tools"),
        Row("active", ev.NextMessageSet, "active"),
        Row("active", ev.NextMessageCleared, "active"),
        Row("active", ev.HistoryCompacted, "active",
            note="summary not blank, keep_last >= 0"),
        Row("active", ev.HistoryCleared, "active"),
        Row("active", ev.FileLinesChanged, "active", note="line counts >= 0"),
        Row("active", ev.TranscriptNoted, "active"),
        Row("active", ev.TranscriptReplaced, "active"),
    ],
)

TANGENT: Final = Table(
    "tangent",
    "Tangent mode. Entering while in a tangent, or exiting when not in one, is illegal "
    "(never an idempotent no-op)." + _NEEDS_CONVERSATION,
    [
        Row("main", ev.TangentEntered, "tangent", note="the main conversation is kept aside"),
        Row("tangent", ev.TangentExited, "main", note="tail: none, last_entry or thread"),
    ],
)

CONTEXT_FILE: Final = Table(
    "context file",
    "Sticky context files, one entity per path." + _NEEDS_CONVERSATION,
    [
        Row(ABSENT, ev.ContextFileAdded, "present"),
        Row("present", ev.ContextFileRemoved, ABSENT),
    ],
)

CHECKPOINT: Final = Table(
    "checkpoint",
    "Checkpoints, one entity per tag. Restoring an unknown tag is illegal; a restore "
    "rewinds the conversation, not the checkpoint list." + _NEEDS_CONVERSATION,
    [
        Row(ABSENT, ev.CheckpointCreated, "created", note="tag not blank"),
        Row("created", ev.CheckpointRestored, "created"),
    ],
)

TABLES: Final[tuple[Table, ...]] = (
    MESSAGE, STREAM, TOOL, STEP, PART, CONVERSATION, TANGENT, CONTEXT_FILE, CHECKPOINT,
)

# Which table decides each conversation event (engine.conversation reads it).
CONVERSATION_TABLE: Final[dict[type[ev.Event], Table]] = {
    row.event: table
    for table in (CONVERSATION, TANGENT, CONTEXT_FILE, CHECKPOINT)
    for row in table.rows
}

# Events that need their message open. Everything else that targets a part may
# also happen later (compacting an old tool output).
NEEDS_OPEN_MESSAGE: Final[frozenset[type[ev.Event]]] = frozenset(
    row.event
    for table in (STREAM, TOOL, STEP, PART)
    for row in table.rows
    if row.event is not ev.ToolOutputCompacted
)

# Which table decides the part-level state of each part event (the entity it moves).
PART_TABLE: Final[dict[type[ev.Event], Table]] = {
    row.event: table for table in (STREAM, TOOL, PART) for row in table.rows
}

# Which part kind each part-creating event makes.
PART_KIND: Final[dict[type[ev.Event], str]] = {
    ev.TextAdded: "text",
    ev.ReasoningAdded: "reasoning",
    ev.FileAdded: "file",
    ev.ToolAdded: "tool",
    ev.StepStarted: "step-start",
    ev.StepFinished: "step-finish",
    ev.SnapshotAdded: "snapshot",
    ev.PatchAdded: "patch",
    ev.AgentAdded: "agent",
    ev.SubtaskAdded: "subtask",
    ev.RetryAdded: "retry",
    ev.CompactionAdded: "compaction",
}

# Part states in which a tool or stream part is still unsettled.
UNSETTLED: Final = frozenset({"streaming", "pending", "awaiting-approval", "approved", "running"})


def all_rows() -> list[tuple[Table, Row]]:
    return [(t, r) for t in TABLES for r in t.rows]


def render_markdown() -> str:
    """docs/transitions.md, generated from the tables above."""
    out = [
        "# Transition tables",
        "",
        "Generated from `engine/tables.py` by `python -m engine.docgen`; a test fails when",
        "this file is stale. `absent` is the state of an entity that does not exist yet.",
        "An event with no row from the current state raises `IllegalTransition` and the",
        "log stays unchanged. Repeating the event that entered the current state, with an",
        "identical payload, is accepted as a no-op.",
        "",
    ]
    for table in TABLES:
        out += [f"## {table.entity}", "", table.summary, ""]
        out += ["| from | event | to | only kinds | note |", "|---|---|---|---|---|"]
        for row in table.rows:
            kinds = ", ".join(sorted(row.kinds)) if row.kinds else ""
            out.append(f"| {row.source} | `{row.tag}` | {row.target} | {kinds} | {row.note} |")
        out += ["", f"Terminal states: {', '.join(table.terminal) or 'none'}.", ""]
    tags = sorted(tag_of(e) for e in NEEDS_OPEN_MESSAGE)
    out += [
        "## Context rules",
        "",
        "These events need their message in state `open`: " + ", ".join(f"`{t}`" for t in tags)
        + ".",
        "",
    ]
    return "\n".join(out)
