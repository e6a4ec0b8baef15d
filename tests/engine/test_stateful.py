"""Hypothesis stateful tests: random command sequences against a Session.

The machine drives a session with every command (and with raw events through
``Session.append``), legal and illegal alike, and checks after every step:

1. an incrementally maintained WithParts projection equals a replay of the store
   (``messages()`` and byte-identical ``to_json()``);
2. ``restore(snapshot())`` and ``thaw(freeze())`` at the current point, and
   projections restored earlier that kept folding since, equal the replay;
3. a rejected command leaves the log, the version and the lifecycle as they
   were, and a session rebuilt from the log (``Session.open``) accepts or rejects
   the same command with the same events;
4. every accepted event moved its entity along a row of the right table.

An oracle written here from the transition tables' data (not from
``engine.lifecycle``) predicts each command's outcome: accepted (which events),
an idempotent no-op, or rejected (which error). Time travel (``at``,
``at_time``, ``Timeline``, ``write_snapshots``) and forks are rules too.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import msgspec
import pytest
import structlog
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from structlog.testing import capture_logs

from engine import events as ev
from engine import lifecycle
from engine import tables as tb
from engine.codec import encode_msgpack
from engine.errors import DuplicateEventId, IllegalTransition, PartValidationError
from engine.events import Event, tag_of
from engine.ids import uuid7
from engine.lifecycle import Lifecycle
from engine.session import PartRef, Session, StepClock
from engine.settle import ABORTED_TOOL_ERROR
from engine.store import MemoryStore, SQLiteStore, Store
from projections import views as v
from projections.timetravel import Timeline, at, at_time, write_snapshots
from projections.withparts import WithPartsProjection

ABSENT = tb.ABSENT
Via = Literal["command", "raw"]
Kind = Literal["accept", "noop", "reject"]
REJECTIONS = (IllegalTransition, PartValidationError, DuplicateEventId)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

# --------------------------------------------------------------------------- clock


# --------------------------------------------------------------------------- strategies

SAMPLES = ["", " ", "héllo wörld", "日本語のテキスト", "😀🚀", "a\nb\tc", "\x00", "\u200b",
           "{\"a\":"]
TEXT: st.SearchStrategy[str] = st.one_of(st.text(max_size=8), st.sampled_from(SAMPLES))
NONBLANK = st.text(min_size=1, max_size=8).map(lambda x: x if x.strip() else "x")
OPT_TEXT: st.SearchStrategy[str | None] = st.none() | TEXT
VIA: st.SearchStrategy[Via] = st.sampled_from(["command", "raw"])
JSON_SCALAR: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
)
JSON_VALUE: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALAR,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=6,
)
# "sessionID" / "messageID" keys inside user metadata must survive fork renames.
KEYS = st.one_of(
    st.sampled_from(["a", "b", "title", "kind", "sessionID", "messageID", "deadline"]),
    st.text(max_size=4),
)
JSON_OBJ: st.SearchStrategy[dict[str, Any]] = st.dictionaries(KEYS, JSON_VALUE, max_size=3)
METADATA: st.SearchStrategy[dict[str, Any] | None] = st.none() | JSON_OBJ
COST = st.one_of(st.just(0.0), st.floats(0, 100, allow_nan=False))
TOKENS = st.builds(
    ev.Tokens, input=st.integers(0, 10**6), output=st.integers(0, 10**6),
    reasoning=st.integers(0, 1000),
    cache=st.builds(ev.CacheTokens, read=st.integers(0, 1000), write=st.integers(0, 1000)),
)
MODEL = st.none() | st.builds(ev.ModelRef, provider_id=TEXT, model_id=TEXT)
MESSAGE_ERROR = st.builds(
    ev.MessageError, kind=st.sampled_from(get_args(ev.MessageErrorKind)), message=TEXT,
    status_code=st.none() | st.integers(100, 599), retryable=st.none() | st.booleans(),
)
SOURCE_TEXT = st.builds(ev.SourceText, value=TEXT, start=st.integers(0, 99),
                        end=st.integers(0, 99))
FILE_SOURCE: st.SearchStrategy[ev.FilePartSource | None] = st.none() | st.one_of(
    st.builds(ev.FileSource, path=TEXT, text=st.none() | SOURCE_TEXT),
    st.builds(ev.SymbolSource, path=TEXT, name=TEXT, kind=st.integers(0, 30), range=JSON_OBJ,
              text=st.none() | SOURCE_TEXT),
    st.builds(ev.ResourceSource, client_name=TEXT, uri=TEXT, text=st.none() | SOURCE_TEXT),
)
FRESH_PART = st.uuids().map(lambda u: f"prt_{u.hex[:16]}")
# Mostly fresh ids; sometimes a colliding, empty or malformed one.
PART_IDS = st.one_of(FRESH_PART, FRESH_PART, FRESH_PART,
                     st.sampled_from(["prt_a", "prt_b", ""]))
FRESH_CALL = st.uuids().map(lambda u: f"call_{u.hex[:8]}")
CALL_IDS = st.one_of(FRESH_CALL, FRESH_CALL, FRESH_CALL, st.sampled_from(["call_1", ""]))
MESSAGE_IDS = st.one_of(st.uuids().map(str), st.uuids().map(str),
                        st.uuids().map(lambda u: str(u).upper()),
                        st.sampled_from(["not-a-uuid", ""]))
ATTACHMENT = st.builds(
    ev.Attachment, part_id=st.one_of(FRESH_PART, st.sampled_from(["prt_att", "prt_a", ""])),
    mime=st.sampled_from(["text/plain", "image/png"]), url=TEXT, filename=OPT_TEXT,
    source=FILE_SOURCE,
)

MESSAGE_STARTED_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "role": st.sampled_from(["user", "assistant"]), "agent": TEXT, "model": MODEL,
    "system": OPT_TEXT, "tools": st.none() | st.dictionaries(TEXT, st.booleans(), max_size=2),
    "variant": OPT_TEXT,
    "summary": st.none() | st.builds(ev.UserSummary, title=OPT_TEXT, body=OPT_TEXT,
                                     diffs=st.none() | st.lists(JSON_OBJ, max_size=2)),
    "path": st.none() | st.builds(ev.PathInfo, cwd=TEXT, root=TEXT),
}
MESSAGE_COMPLETED_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "cost": COST, "tokens": st.none() | TOKENS, "finish": OPT_TEXT,
    "error": st.none() | MESSAGE_ERROR,
}
# Field strategies of every part event; ToolStarted.deadline is relative to the clock.
PART_FIELDS: dict[type[Event], dict[str, st.SearchStrategy[Any]]] = {
    ev.TextAdded: {"text": TEXT, "synthetic": st.booleans(), "ignored": st.booleans(),
                   "metadata": METADATA},
    ev.TextDelta: {"delta": TEXT},
    ev.ReasoningAdded: {"text": TEXT, "metadata": METADATA},
    ev.ReasoningDelta: {"delta": TEXT},
    ev.PartEnded: {"metadata": METADATA},
    ev.FileAdded: {"mime": st.sampled_from(["text/plain", "image/png"]), "url": TEXT,
                   "filename": OPT_TEXT, "source": FILE_SOURCE},
    ev.ToolAdded: {"call_id": CALL_IDS,
                   "tool": st.sampled_from(["read", "bash", "write", "read", "bash", ""]),
                   "input": JSON_OBJ, "raw": TEXT, "metadata": METADATA},
    ev.ToolInputDelta: {"fragment": TEXT},
    ev.ToolInputReady: {"input": JSON_OBJ},
    ev.ToolApprovalRequested: {"reason": OPT_TEXT, "metadata": METADATA},
    ev.ToolApprovalGranted: {"reason": OPT_TEXT},
    ev.ToolApprovalDenied: {"reason": TEXT},
    ev.ToolStarted: {"input": st.none() | JSON_OBJ, "title": OPT_TEXT, "metadata": METADATA,
                     "deadline": st.none() | st.integers(-5, 60)},
    ev.ToolProgress: {"title": OPT_TEXT, "metadata": METADATA},
    ev.ToolCompleted: {"output": st.one_of(TEXT, NONBLANK, st.just("file contents")),
                       "title": TEXT,
                       "metadata": METADATA, "attachments": st.lists(ATTACHMENT, max_size=2)},
    ev.ToolFailed: {"error": st.one_of(NONBLANK, NONBLANK, st.sampled_from(["", "  ", "boom"])),
                    "kind": st.sampled_from(get_args(ev.ToolFailureKind)), "metadata": METADATA},
    ev.ToolOutputCompacted: {},
    ev.StepStarted: {"snapshot": OPT_TEXT},
    ev.StepFinished: {"reason": TEXT, "cost": COST, "tokens": TOKENS, "snapshot": OPT_TEXT},
    ev.SnapshotAdded: {"snapshot": TEXT},
    ev.PatchAdded: {"hash": TEXT, "files": st.lists(TEXT, max_size=3)},
    ev.AgentAdded: {"name": TEXT, "source": st.none() | SOURCE_TEXT},
    ev.SubtaskAdded: {"prompt": TEXT, "description": TEXT, "agent": TEXT, "model": MODEL,
                      "command": OPT_TEXT},
    ev.RetryAdded: {"attempt": st.integers(0, 5), "error": MESSAGE_ERROR},
    ev.CompactionAdded: {"auto": st.booleans(), "overflow": st.none() | st.booleans()},
}
PART_EVENTS: tuple[type[Event], ...] = tuple(PART_FIELDS)
OTHER_PARTS = (ev.FileAdded, ev.SnapshotAdded, ev.PatchAdded, ev.AgentAdded, ev.SubtaskAdded,
               ev.RetryAdded, ev.CompactionAdded)


MODEL_INFO = st.builds(
    ev.ModelInfo, model_id=NONBLANK, model_name=OPT_TEXT, description=OPT_TEXT,
    context_window_tokens=st.none() | st.integers(0, 10**6),
    rate_multiplier=st.none() | st.floats(0, 10, allow_nan=False), rate_unit=OPT_TEXT,
)


@st.composite
def tools_changed(draw: st.DrawFn) -> ev.ToolsChanged:
    origin = draw(st.sampled_from(get_args(ev.ToolOrigin)))
    specs = draw(st.lists(st.builds(ev.ToolSpec, name=NONBLANK, description=TEXT,
                                    input_schema=JSON_OBJ),
                          max_size=3, unique_by=lambda t: t.name))
    server = draw(OPT_TEXT) if origin == "mcp" else None
    return ev.ToolsChanged(origin=origin, tools=specs, server=server)


PATHS = st.sampled_from(["README.md", "src/*.py", "docs/ü.md"])
TAGS = st.sampled_from(["t1", "t2", "t3"])
COUNT = st.integers(0, 100)
# Conversation events, always with payloads their field rules accept.
CONVERSATION: dict[type[Event], st.SearchStrategy[Event]] = {
    ev.ConversationCreated: st.builds(
        ev.ConversationCreated, conversation_id=st.sampled_from(["conv-1", "conv-2"]),
        model_info=st.none() | MODEL_INFO, mcp_enabled=st.booleans(), os=TEXT, cwd=TEXT,
        utc_offset_minutes=st.integers(-720, 840)),
    ev.ModelSelected: st.builds(ev.ModelSelected, model_info=MODEL_INFO),
    ev.ToolsChanged: tools_changed(),
    ev.ContextFileAdded: st.builds(ev.ContextFileAdded, path=PATHS),
    ev.ContextFileRemoved: st.builds(ev.ContextFileRemoved, path=PATHS),
    ev.NextMessageSet: st.builds(ev.NextMessageSet, prompt=TEXT, additional_context=TEXT),
    ev.NextMessageCleared: st.builds(ev.NextMessageCleared),
    ev.HistoryCompacted: st.builds(ev.HistoryCompacted, summary=NONBLANK,
                                   request_metadata=METADATA, keep_last=st.integers(0, 5),
                                   custom_instruction=OPT_TEXT),
    ev.HistoryCleared: st.builds(ev.HistoryCleared),
    ev.TangentEntered: st.builds(ev.TangentEntered),
    ev.TangentExited: st.builds(ev.TangentExited,
                                tail=st.sampled_from(get_args(ev.TangentTail))),
    ev.CheckpointCreated: st.builds(ev.CheckpointCreated, tag=TAGS, description=TEXT,
                                    is_turn=st.booleans(), tool_name=OPT_TEXT),
    ev.CheckpointRestored: st.builds(ev.CheckpointRestored, tag=TAGS),
    ev.FileLinesChanged: st.builds(ev.FileLinesChanged, path=PATHS, before_lines=COUNT,
                                   after_lines=COUNT, lines_added_by_agent=COUNT,
                                   lines_removed_by_agent=COUNT),
    ev.TranscriptNoted: st.builds(ev.TranscriptNoted, text=TEXT),
    ev.TranscriptReplaced: st.builds(ev.TranscriptReplaced, lines=st.lists(TEXT, max_size=3)),
}
CONVERSATION_EVENTS: tuple[type[Event], ...] = tuple(CONVERSATION)


def part_event(cls: type[Event], ref: PartRef) -> st.SearchStrategy[Event]:
    return st.builds(cls, message_id=st.just(ref.message_id), part_id=st.just(ref.part_id),
                     **PART_FIELDS[cls])


# --------------------------------------------------------------------------- the oracle
# A model of the lifecycle folded from the log with this file's own code, reading
# only the tables' data.

# Which table judges each event, by its tag (independent of tables.PART_TABLE).
def table_for(cls: type[Event]) -> tb.Table:
    tag = tag_of(cls)
    if tag.startswith("message."):
        return tb.MESSAGE
    if tag.startswith(("text.", "reasoning.")) or tag == "part.ended":
        return tb.STREAM
    if tag.startswith("tool.") and tag != "tools.changed":
        return tb.TOOL
    if tag.startswith("tangent."):
        return tb.TANGENT
    if tag.startswith("context_file."):
        return tb.CONTEXT_FILE
    if tag.startswith("checkpoint."):
        return tb.CHECKPOINT
    if issubclass(cls, ev.ConversationEvent):
        return tb.CONVERSATION
    return tb.PART


# The WithParts part type each creating event makes.
CREATES: dict[type[Event], str] = {
    ev.TextAdded: "text", ev.ReasoningAdded: "reasoning", ev.FileAdded: "file",
    ev.ToolAdded: "tool", ev.StepStarted: "step-start", ev.StepFinished: "step-finish",
    ev.SnapshotAdded: "snapshot", ev.PatchAdded: "patch", ev.AgentAdded: "agent",
    ev.SubtaskAdded: "subtask", ev.RetryAdded: "retry", ev.CompactionAdded: "compaction",
}
# Which part kinds an event that does not create a part may address.
ADDRESSES: dict[type[Event], frozenset[str]] = {
    ev.TextDelta: frozenset({"text"}),
    ev.ReasoningDelta: frozenset({"reasoning"}),
    ev.PartEnded: frozenset({"text", "reasoning"}),
    **{cls: frozenset({"tool"}) for cls in PART_EVENTS
       if tag_of(cls).startswith("tool.") and cls is not ev.ToolAdded},
}
UNSETTLED = frozenset({"streaming", "pending", "awaiting-approval", "approved", "running"})


def strip(e: Event) -> Event:
    """The event without its envelope."""
    return msgspec.structs.replace(e, id="", session_id="", seq=0, time=0, actor="", v=1)


def same(a: Event, b: Event) -> bool:
    return type(a) is type(b) and strip(a) == strip(b)


@dataclass
class PartM:
    kind: str
    state: str
    entered: Event
    deadline: int | None = None


@dataclass
class MsgM:
    role: str
    state: str
    entered: Event
    step: str = "idle"
    parts: dict[str, PartM] = field(default_factory=dict)


@dataclass
class ConversationM:
    entered: Event | None = None  # conversation.created; None while absent
    tangent: str = "main"
    context_files: dict[str, Event] = field(default_factory=dict)
    checkpoints: dict[str, Event] = field(default_factory=dict)

    def entity(self, e: Event) -> tuple[str, Event | None]:
        """State of the entity ``e`` addresses, and the event that entered it."""
        table = table_for(type(e))
        if table is tb.CONVERSATION:
            return (ABSENT if self.entered is None else "active"), self.entered
        if table is tb.TANGENT:
            return self.tangent, None
        if table is tb.CONTEXT_FILE:
            added = self.context_files.get(e.path)  # type: ignore[attr-defined]
            return (ABSENT, None) if added is None else ("present", added)
        created = self.checkpoints.get(e.tag)  # type: ignore[attr-defined]
        return (ABSENT, None) if created is None else ("created", created)


@dataclass
class Model:
    messages: dict[str, MsgM] = field(default_factory=dict)
    call_ids: set[str] = field(default_factory=set)
    conversation: ConversationM = field(default_factory=ConversationM)

    def copy(self) -> Model:
        c = self.conversation
        return Model(
            {mid: replace(m, parts={pid: replace(p) for pid, p in m.parts.items()})
             for mid, m in self.messages.items()},
            set(self.call_ids),
            replace(c, context_files=dict(c.context_files), checkpoints=dict(c.checkpoints)),
        )

    @classmethod
    def of(cls, events: Sequence[Event]) -> Model:
        m = cls()
        for e in events:
            m.fold(e)
        return m

    def fold(self, e: Event) -> None:
        if isinstance(e, ev.ConversationEvent):
            c = self.conversation
            if isinstance(e, ev.ConversationCreated):
                c.entered = e
            elif isinstance(e, ev.TangentEntered | ev.TangentExited):
                c.tangent = tb.TANGENT.index[(c.tangent, type(e))].target
            elif isinstance(e, ev.ContextFileAdded):
                c.context_files[e.path] = e
            elif isinstance(e, ev.ContextFileRemoved):
                del c.context_files[e.path]
            elif isinstance(e, ev.CheckpointCreated):
                c.checkpoints[e.tag] = e
            return
        if isinstance(e, ev.MessageStarted):
            self.messages[e.message_id] = MsgM(e.role, "open", e)
            return
        if isinstance(e, ev.MessageCompleted):
            msg = self.messages[e.message_id]
            msg.state, msg.entered = "completed", e
            return
        assert isinstance(e, ev.PartEvent)
        cls = type(e)
        msg = self.messages[e.message_id]
        part = msg.parts.get(e.part_id)
        row = table_for(cls).index[(ABSENT if part is None else part.state, cls)]
        if part is None:
            part = msg.parts[e.part_id] = PartM(CREATES[cls], row.target, e)
            if isinstance(e, ev.ToolAdded):
                self.call_ids.add(e.call_id)
        elif row.target != part.state:
            part.state, part.entered = row.target, e
        if isinstance(e, ev.ToolStarted):
            part.deadline = e.deadline
        if isinstance(e, ev.ToolCompleted):
            for att in e.attachments:
                msg.parts[att.part_id] = PartM("attachment", "added", e)
        if cls in (ev.StepStarted, ev.StepFinished):
            msg.step = tb.STEP.index[(msg.step, cls)].target

    def entered(self, e: Event) -> Event | None:
        if isinstance(e, ev.ConversationEvent):
            return self.conversation.entity(e)[1]
        msg = self.messages.get(e.message_id)  # type: ignore[attr-defined]
        if msg is None or not isinstance(e, ev.PartEvent):
            return None if msg is None else msg.entered
        part = msg.parts.get(e.part_id)
        return None if part is None else part.entered


@dataclass
class Prediction:
    kind: Kind
    error: type[Exception] | None = None
    events: list[Event] = field(default_factory=list)
    noop_seq: int | None = None  # for a single no-op event: the seq of the event it repeats


ACCEPT: tuple[Kind, type[Exception] | None] = ("accept", None)
NOOP: tuple[Kind, type[Exception] | None] = ("noop", None)
ILLEGAL: tuple[Kind, type[Exception] | None] = ("reject", IllegalTransition)
INVALID: tuple[Kind, type[Exception] | None] = ("reject", PartValidationError)


def predict_one(m: Model, e: Event) -> tuple[Kind, type[Exception] | None]:
    """What the rules of the issue say about ``e`` in the state ``m``."""
    cls = type(e)
    if isinstance(e, ev.ConversationEvent):
        # Payloads generated here always satisfy the conversation's field rules.
        table = table_for(cls)
        if table is not tb.CONVERSATION and m.conversation.entered is None:
            return ILLEGAL
        state, entered = m.conversation.entity(e)
        if (state, cls) in table.index:
            return ACCEPT
        repeat = table is not tb.TANGENT and entered is not None and same(entered, e)
        return NOOP if repeat else ILLEGAL
    if isinstance(e, ev.MessageStarted | ev.MessageCompleted):
        msg = m.messages.get(e.message_id)
        row = tb.MESSAGE.index.get((ABSENT if msg is None else msg.state, cls))
        if row is None:
            return NOOP if msg is not None and same(msg.entered, e) else ILLEGAL
        if isinstance(e, ev.MessageStarted):
            if not _UUID.match(e.message_id.lower()):
                return INVALID
            if e.parent_id is not None and e.parent_id not in m.messages:
                return INVALID
            return ACCEPT
        assert msg is not None
        if any(p.state in UNSETTLED for p in msg.parts.values()):
            return ILLEGAL
        if msg.step != "idle" and e.error is None:
            return ILLEGAL
        return ACCEPT
    assert isinstance(e, ev.PartEvent)
    msg = m.messages.get(e.message_id)
    if msg is None:
        return ILLEGAL
    part = msg.parts.get(e.part_id)
    row = table_for(cls).index.get((ABSENT if part is None else part.state, cls))
    # Retrying the event that moved a part into its state is a no-op, even once the
    # message completed (a self-loop such as a delta is applied again instead).
    if part is not None and row is None and same(part.entered, e):
        return NOOP
    if msg.state != "open" and cls is not ev.ToolOutputCompacted:
        return ILLEGAL
    if part is not None and cls in CREATES:
        return INVALID  # BR-02: part ids are unique within their message
    if part is not None and part.kind not in ADDRESSES.get(cls, ()):
        return ILLEGAL
    if row is None:
        return ILLEGAL
    if row.kinds is not None and getattr(e, "kind", None) not in row.kinds:
        return ILLEGAL
    if cls in (ev.StepStarted, ev.StepFinished) and (msg.step, cls) not in tb.STEP.index:
        return ILLEGAL
    if not e.part_id:
        return INVALID
    if isinstance(e, ev.ToolAdded) and (not e.call_id or not e.tool or e.call_id in m.call_ids):
        return INVALID
    if isinstance(e, ev.ToolCompleted):
        if not e.output:
            return INVALID
        ids = [a.part_id for a in e.attachments]
        if (len(set(ids)) != len(ids) or "" in ids or e.part_id in ids
                or any(i in msg.parts for i in ids)):
            return INVALID
    if isinstance(e, ev.ToolFailed) and not e.error.strip():
        return INVALID
    return ACCEPT


def predict(m: Model, events: Sequence[Event]) -> Prediction:
    """A batch is all or nothing; no-ops inside it are skipped."""
    work = m.copy()
    accepted: list[Event] = []
    for e in events:
        kind, error = predict_one(work, e)
        if kind == "reject":
            return Prediction("reject", error)
        if kind == "accept":
            work.fold(e)
            accepted.append(e)
    noop_seq = None
    if len(events) == 1 and not accepted:
        entered = m.entered(events[0])
        noop_seq = None if entered is None else entered.seq
    return Prediction("accept" if accepted else "noop", None, accepted, noop_seq)


# --------------------------------------------------------------------------- commands

def send_command(s: Session, e: Event) -> object:
    """Issue ``e`` through the Session command made for it."""
    ref = PartRef(e.message_id, e.part_id) if isinstance(e, ev.PartEvent) else None
    match e:
        case ev.ConversationCreated():
            return s.create_conversation(
                e.conversation_id, model_info=e.model_info, mcp_enabled=e.mcp_enabled, os=e.os,
                cwd=e.cwd, utc_offset_minutes=e.utc_offset_minutes)
        case ev.ModelSelected():
            return s.select_model(e.model_info)
        case ev.ToolsChanged():
            return s.change_tools(e.origin, e.tools, server=e.server)
        case ev.ContextFileAdded():
            return s.add_context_file(e.path)
        case ev.ContextFileRemoved():
            return s.remove_context_file(e.path)
        case ev.NextMessageSet():
            return s.set_next_message(e.prompt, additional_context=e.additional_context)
        case ev.NextMessageCleared():
            return s.clear_next_message()
        case ev.HistoryCompacted():
            return s.compact_history(e.summary, keep_last=e.keep_last,
                                     request_metadata=e.request_metadata,
                                     custom_instruction=e.custom_instruction)
        case ev.HistoryCleared():
            return s.clear_history()
        case ev.TangentEntered():
            return s.enter_tangent()
        case ev.TangentExited():
            return s.exit_tangent(e.tail)
        case ev.CheckpointCreated():
            return s.create_checkpoint(e.tag, description=e.description, is_turn=e.is_turn,
                                       tool_name=e.tool_name)
        case ev.CheckpointRestored():
            return s.restore_checkpoint(e.tag)
        case ev.FileLinesChanged():
            return s.change_file_lines(
                e.path, before_lines=e.before_lines, after_lines=e.after_lines,
                lines_added_by_agent=e.lines_added_by_agent,
                lines_removed_by_agent=e.lines_removed_by_agent)
        case ev.TranscriptNoted():
            return s.note_transcript(e.text)
        case ev.MessageStarted():
            return s.start_message(e.role, message_id=e.message_id, agent=e.agent,
                                   model=e.model, system=e.system, tools=e.tools,
                                   variant=e.variant, summary=e.summary, path=e.path,
                                   parent_id=e.parent_id)
        case ev.MessageCompleted():
            return s.complete_message(e.message_id, cost=e.cost, tokens=e.tokens,
                                      finish=e.finish, error=e.error)
        case ev.TextAdded():
            return s.add_text(e.message_id, e.text, synthetic=e.synthetic, ignored=e.ignored,
                              metadata=e.metadata, part_id=e.part_id)
        case ev.ReasoningAdded():
            return s.add_reasoning(e.message_id, e.text, metadata=e.metadata, part_id=e.part_id)
        case ev.TextDelta():
            assert ref is not None
            return s.text_delta(ref, e.delta)
        case ev.ReasoningDelta():
            assert ref is not None
            return s.reasoning_delta(ref, e.delta)
        case ev.PartEnded():
            assert ref is not None
            return s.end_part(ref, metadata=e.metadata)
        case ev.FileAdded():
            return s.add_file(e.message_id, e.mime, e.url, filename=e.filename, source=e.source,
                              part_id=e.part_id)
        case ev.ToolAdded():
            return s.add_tool(e.message_id, e.call_id, e.tool, input=e.input, raw=e.raw,
                              metadata=e.metadata, part_id=e.part_id)
        case ev.ToolInputDelta():
            assert ref is not None
            return s.tool_input_delta(ref, e.fragment)
        case ev.ToolInputReady():
            assert ref is not None
            return s.tool_input_ready(ref, e.input)
        case ev.ToolApprovalRequested():
            assert ref is not None
            return s.request_approval(ref, reason=e.reason, metadata=e.metadata)
        case ev.ToolApprovalGranted():
            assert ref is not None
            return s.approve(ref, reason=e.reason)
        case ev.ToolApprovalDenied():
            assert ref is not None
            return s.deny(ref, e.reason)
        case ev.ToolStarted():
            assert ref is not None
            return s.start_tool(ref, input=e.input, title=e.title, metadata=e.metadata,
                                deadline=e.deadline)
        case ev.ToolProgress():
            assert ref is not None
            return s.tool_progress(ref, title=e.title, metadata=e.metadata)
        case ev.ToolCompleted():
            assert ref is not None
            return s.complete_tool(ref, e.output, title=e.title, metadata=e.metadata,
                                   attachments=e.attachments)
        case ev.ToolFailed():
            assert ref is not None
            return s.fail_tool(ref, e.error, kind=e.kind, metadata=e.metadata)
        case ev.ToolOutputCompacted():
            assert ref is not None
            return s.compact_tool_output(ref)
        case ev.StepStarted():
            return s.start_step(e.message_id, snapshot=e.snapshot, part_id=e.part_id)
        case ev.StepFinished():
            return s.finish_step(e.message_id, e.reason, cost=e.cost, tokens=e.tokens,
                                 snapshot=e.snapshot, part_id=e.part_id)
        case ev.SnapshotAdded():
            return s.add_snapshot(e.message_id, e.snapshot, part_id=e.part_id)
        case ev.PatchAdded():
            return s.add_patch(e.message_id, e.hash, e.files, part_id=e.part_id)
        case ev.AgentAdded():
            return s.add_agent(e.message_id, e.name, source=e.source, part_id=e.part_id)
        case ev.SubtaskAdded():
            return s.add_subtask(e.message_id, e.prompt, e.description, e.agent, model=e.model,
                                 command=e.command, part_id=e.part_id)
        case ev.RetryAdded():
            return s.add_retry(e.message_id, e.attempt, e.error, part_id=e.part_id)
        case ev.CompactionAdded():
            return s.add_compaction(e.message_id, auto=e.auto, overflow=e.overflow,
                                    part_id=e.part_id)
    raise AssertionError(f"no command for {type(e).__name__}")


def command_can_carry(e: Event) -> bool:
    """Commands generate ids for empty ones and turn an aborted completion into an abort."""
    if isinstance(e, ev.TranscriptReplaced):
        return False  # raw only
    if isinstance(e, ev.MessageStarted):
        return bool(e.message_id)
    if isinstance(e, ev.MessageCompleted):
        return e.error is None or e.error.kind != "aborted"
    return not isinstance(e, ev.PartEvent) or bool(e.part_id)


# --------------------------------------------------------------------------- observation

@dataclass(frozen=True)
class Taken:
    event: Event
    row: tb.Row
    before: str
    after: str
    step_before: str | None
    step_after: str | None


def observe(lc: Lifecycle, e: Event) -> tuple[str, str | None]:
    if isinstance(e, ev.ConversationEvent):
        c = lc.conversation
        table = table_for(type(e))
        if table is tb.CONVERSATION:
            return c.state, None
        if table is tb.TANGENT:
            return c.tangent, None
        if table is tb.CONTEXT_FILE:
            return ("present" if e.path in c.context_files else ABSENT), None  # type: ignore[attr-defined]
        return ("created" if e.tag in c.checkpoints else ABSENT), None  # type: ignore[attr-defined]
    msg = lc.messages.get(e.message_id)  # type: ignore[attr-defined]
    if not isinstance(e, ev.PartEvent):
        return (ABSENT if msg is None else msg.state), None
    assert msg is not None
    part = msg.parts.get(e.part_id)
    return (ABSENT if part is None else part.state), msg.step


class RecordingLifecycle(Lifecycle):
    """Records the lifecycle state of the moved entity around every folded event."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.taken: list[Taken] = []

    def evolve(self, e: Event, row: tb.Row) -> None:
        before, step_before = observe(self, e)
        super().evolve(e, row)
        after, step_after = observe(self, e)
        self.taken.append(Taken(e, row, before, after, step_before, step_after))

    def apply(self, e: Event) -> bool:
        # The delta fast path folds without evolve: record its move here, with the
        # row the table names for it, so check_taken judges it like any other.
        n = len(self.taken)
        if type(e) not in lifecycle._SELF_LOOP or e.message_id not in self.messages:  # type: ignore[attr-defined]
            return super().apply(e)  # decided by the full check (maybe a rejection)
        before, step_before = observe(self, e)
        applied = super().apply(e)
        if applied and len(self.taken) == n:
            after, step_after = observe(self, e)
            row = table_for(type(e)).index[(before, type(e))]
            self.taken.append(Taken(e, row, before, after, step_before, step_after))
        return applied


ROWS_TAKEN: set[tuple[str, str, str]] = set()


def check_taken(t: Taken) -> None:
    """Invariant 4: (source, event) -> target is a row of the table for the event."""
    cls = type(t.event)
    table = table_for(cls)
    assert t.row in table.rows, (t.row, table.entity)
    assert t.row.event is cls
    assert table.index[(t.before, cls)] is t.row
    assert (t.row.source, t.row.target) == (t.before, t.after), t
    if t.row.kinds is not None:
        assert getattr(t.event, "kind", None) in t.row.kinds
    ROWS_TAKEN.add((table.entity, t.row.source, tag_of(cls)))
    if cls in (ev.StepStarted, ev.StepFinished):
        assert t.step_before is not None
        step_row = tb.STEP.index[(t.step_before, cls)]
        assert step_row.target == t.step_after
        ROWS_TAKEN.add((tb.STEP.entity, step_row.source, tag_of(cls)))
    else:
        assert t.step_before == t.step_after


def lc_summary(lc: Lifecycle) -> Any:
    enc = msgspec.json.encode
    c = lc.conversation
    return (
        (c.state, enc(c.entered), c.tangent,
         [(k, enc(x)) for k, x in c.context_files.items()],
         [(k, enc(x)) for k, x in c.checkpoints.items()]),
        lc.version,
        [(mid, m.role, m.state, m.step, enc(m.entered), list(m.unsettled),
          [(pid, p.kind, p.state, p.deadline, enc(p.entered)) for pid, p in m.parts.items()])
         for mid, m in lc.messages.items()],
        sorted(lc.call_ids.items()),
    )


def view_state(p: v.Part) -> str:
    """The lifecycle state a WithParts part shows."""
    if isinstance(p, v.TextPart | v.ReasoningPart):
        assert p.time is not None
        return "streaming" if p.time.end is None else "done"
    if isinstance(p, v.ToolPart):
        s = p.state
        if isinstance(s, v.ToolStatePending):
            approval = None if p.approval is None else p.approval.state
            return {None: "pending", "requested": "awaiting-approval",
                    "approved": "approved"}[approval]
        if isinstance(s, v.ToolStateCompleted):
            return "completed" if s.time.compacted is None else "compacted"
        return s.TAG
    return "added"


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def assert_same_projection(got: WithPartsProjection, want: WithPartsProjection,
                           what: str) -> None:
    assert got.seq == want.seq, (what, got.seq, want.seq)
    assert got.messages() == want.messages(), what
    assert dumps(got.to_json()) == dumps(want.to_json()), what


def replay(session_id: str, events: Sequence[Event]) -> WithPartsProjection:
    return WithPartsProjection(session_id).apply_all(events)


def rename_session(messages: list[Any], session_id: str) -> list[Any]:
    """WithParts JSON with its structural sessionID fields set (never user metadata)."""
    out: list[Any] = json.loads(json.dumps(messages))
    for m in out:
        m["info"]["sessionID"] = session_id
        for p in m["parts"]:
            p["sessionID"] = session_id
            for a in (p.get("state") or {}).get("attachments") or ():
                a["sessionID"] = session_id
    return out


def clone(store: Store, session_id: str) -> MemoryStore:
    """A private memory store holding a copy of the session's log."""
    copy = MemoryStore()
    copy.create_session(session_id, created=0)
    copy.append(session_id, list(store.read(session_id)), 0)
    return copy


@dataclass
class Result:
    kind: Kind
    error: BaseException | None = None
    new: list[Event] = field(default_factory=list)
    value: object = None


def run(session: Session, call: Callable[[Session], object]) -> Result:
    before = session.version
    try:
        value = call(session)
    except REJECTIONS as exc:
        return Result("reject", exc)
    new: list[Event] = list(session.store.read(session.id, before + 1))
    return Result("accept" if new else "noop", None, new, value)


@contextmanager
def captured_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """structlog entries at every level, whatever level another test configured."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)


# --------------------------------------------------------------------------- the machine

class SessionMachine(RuleBasedStateMachine):
    messages: Bundle[str] = Bundle("messages")
    parts: Bundle[PartRef] = Bundle("parts")
    streams: Bundle[PartRef] = Bundle("streams")
    tools: Bundle[PartRef] = Bundle("tools")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="convlog-stateful-"))
        self.store = self.new_store()
        self.clock = StepClock()
        sid = uuid7(self.clock())
        info = self.store.create_session(sid, created=self.clock())
        self.lc = RecordingLifecycle(sid)
        self.session = Session(self.store, info, self.lc, self.clock)
        self.sid = sid
        self.live = WithPartsProjection(sid)
        self.session.subscribe(self.live)
        self.notified: list[Event] = []
        self.session.subscribe(self.notified.append)
        # Projections restored / thawed at some earlier point that kept folding since.
        self.followers: list[tuple[str, WithPartsProjection, Callable[[], None]]] = []
        # Rejections are logged with structlog; capture (and silence) them.
        self._capturing = captured_logs()
        self.logs = self._capturing.__enter__()

    def new_store(self) -> Store:
        return MemoryStore()

    def teardown(self) -> None:
        self._capturing.__exit__(None, None, None)
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def log(self) -> list[Event]:
        return list(self.store.read(self.sid))

    def dump(self) -> list[bytes]:
        return [encode_msgpack(e) for e in self.store.read(self.sid)]

    def execute(self, planned: Sequence[Event], call: Callable[[Session], object], *,
                expect: Prediction | None = None,
                key: Callable[[Event], object] = strip) -> Result:
        """Run a command on the live session and on a rebuild; check both against the oracle."""
        log_before = self.dump()
        version = self.session.version
        lc_before = lc_summary(self.lc)
        notified = len(self.notified)
        prediction = expect or predict(Model.of(self.log()), planned)

        shadow_store = clone(self.store, self.sid)
        shadow = Session.open(shadow_store, self.sid, clock=StepClock(self.clock.now))
        assert lc_summary(shadow.lifecycle) == lc_before, "lifecycle != rebuild from the log"
        mirrored = run(shadow, call)

        self.lc.taken.clear()
        logged = len(self.logs)
        result = run(self.session, call)
        if isinstance(result.error, IllegalTransition):
            entries = [x for x in self.logs[logged:] if x["event"] == "transition_rejected"]
            assert len(entries) == 1, self.logs[logged:]
            assert entries[0]["event_type"] == result.error.event_type
            assert entries[0]["current"] == result.error.current

        assert result.kind == prediction.kind, (result, prediction, planned)
        assert mirrored.kind == result.kind, (mirrored, result)
        assert type(mirrored.error) is type(result.error)
        assert [key(e) for e in mirrored.new] == [key(e) for e in result.new]
        if result.kind == "reject":
            assert prediction.error is not None
            assert isinstance(result.error, prediction.error), (result.error, prediction)
            assert self.dump() == log_before
            assert self.session.version == version
            assert lc_summary(self.lc) == lc_before, "a rejected batch was not rolled back"
            assert len(self.notified) == notified
            return result
        assert [key(e) for e in result.new] == [key(e) for e in prediction.events]
        assert self.dump()[:len(log_before)] == log_before
        assert self.session.version == version + len(result.new)
        for offset, e in enumerate(result.new, start=1):
            assert e.seq == version + offset
            assert e.session_id == self.sid
            assert _UUID.match(e.id)
            assert e.actor
            assert e.time > 0
        assert self.notified[notified:] == result.new
        assert [t.event for t in self.lc.taken] == result.new
        for t in self.lc.taken:
            check_taken(t)
        return result

    def send(self, e: Event, via: Via) -> Result:
        """One event, through its command or as a raw event; checks the returned value."""
        if via == "command" and not command_can_carry(e):
            via = "raw"
        prediction = predict(Model.of(self.log()), [e])

        def call(s: Session) -> object:
            return send_command(s, e) if via == "command" else s.append([e])

        result = self.execute([e], call, expect=prediction)
        if result.kind == "reject":
            return result
        seq = result.new[-1].seq if result.new else prediction.noop_seq
        if via == "raw":
            assert result.value == [seq]
        elif isinstance(e, ev.MessageStarted):
            assert result.value == e.message_id
        elif type(e) in CREATES:
            assert isinstance(e, ev.PartEvent)
            assert result.value == PartRef(e.message_id, e.part_id)
        else:
            assert result.value == seq
        return result

    def aim(self, cls: type[Event], ref: PartRef, data: st.DataObject) -> PartRef:
        """Usually retarget to an entity where ``cls`` is legal; else keep the bundle's ref.

        Random refs are mostly illegal; aiming keeps sessions long and busy enough
        to reach every state while a quarter of the commands stay random.
        """
        if data.draw(st.integers(0, 3)) == 0:
            return ref
        model = Model.of(self.log())
        if cls in CREATES:
            steps = {ev.StepStarted: "idle", ev.StepFinished: "in-step"}
            mids = [mid for mid, m in model.messages.items() if m.state == "open"
                    and m.step == steps.get(cls, m.step)]
            return PartRef(data.draw(st.sampled_from(mids)), ref.part_id) if mids else ref
        table = table_for(cls)
        refs = [PartRef(mid, pid) for mid, m in model.messages.items()
                if m.state == "open" or cls is ev.ToolOutputCompacted
                for pid, p in m.parts.items()
                if p.kind in ADDRESSES.get(cls, ()) and (p.state, cls) in table.index]
        return data.draw(st.sampled_from(refs)) if refs else ref

    def aim_message(self, mid: str, data: st.DataObject) -> str:
        if data.draw(st.booleans()):
            return mid
        mids = [m for m, msg in Model.of(self.log()).messages.items() if msg.state == "open"]
        return data.draw(st.sampled_from(mids)) if mids else mid

    def send_part(self, cls: type[Event], ref: PartRef, data: st.DataObject, via: Via, *,
                  aim: bool = True) -> Result:
        if aim:
            ref = self.aim(cls, ref, data)
        e = data.draw(part_event(cls, ref))
        if isinstance(e, ev.ToolStarted) and e.deadline is not None:
            e = msgspec.structs.replace(e, deadline=self.clock.now + e.deadline)
        return self.send(e, via)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def projections_equal_replay(self) -> None:
        events = self.log()
        assert self.notified == events
        want = replay(self.sid, events)
        assert want.seq == self.session.version == self.store.version(self.sid)
        assert_same_projection(self.live, want, "incremental")
        restored = WithPartsProjection.restore(self.sid, self.live.snapshot())
        assert_same_projection(restored, want, "restore(snapshot())")
        thawed = WithPartsProjection.thaw(self.sid, self.live.freeze())
        assert_same_projection(thawed, want, "thaw(freeze())")
        for name, proj, _ in self.followers:
            assert_same_projection(proj, want, name)

    @invariant()
    def lifecycle_agrees(self) -> None:
        """The live lifecycle, a rebuild, the oracle's model and the projection agree."""
        assert lc_summary(Session.open(self.store, self.sid).lifecycle) == lc_summary(self.lc)
        model = Model.of(self.log())
        views = {wp.info.id: wp for wp in self.live.messages()}
        assert list(model.messages) == list(self.lc.messages) == list(views)
        assert set(self.lc.call_ids) == model.call_ids
        c, cm = self.lc.conversation, model.conversation
        assert (c.state, c.entered, c.tangent) == (
            ABSENT if cm.entered is None else "active", cm.entered, cm.tangent)
        assert (c.context_files, c.checkpoints) == (cm.context_files, cm.checkpoints)
        for mid, msg in self.lc.messages.items():
            mm, wp = model.messages[mid], views[mid]
            assert (msg.role, msg.state, msg.step) == (mm.role, mm.state, mm.step)
            assert msg.role == wp.info.role
            assert msg.state == ("open" if wp.info.time.completed is None else "completed")
            starts = sum(isinstance(p, v.StepStartPart) for p in wp.parts)
            finishes = sum(isinstance(p, v.StepFinishPart) for p in wp.parts)
            assert msg.step == ("in-step" if starts > finishes else "idle")
            assert list(msg.unsettled) == [
                pid for pid, p in mm.parts.items() if p.state in UNSETTLED]
            assert [(pid, p.kind, p.state, p.deadline) for pid, p in msg.parts.items()] == [
                (pid, p.kind, p.state, p.deadline) for pid, p in mm.parts.items()]
            shown = [(p.id, p.TAG, view_state(p)) for p in wp.parts]
            assert shown == [(pid, p.kind, p.state) for pid, p in msg.parts.items()
                             if p.kind != "attachment"]
            attached = {a.id for p in wp.parts if isinstance(p, v.ToolPart)
                        and isinstance(p.state, v.ToolStateCompleted)
                        for a in p.state.attachments or ()}
            assert attached == {pid for pid, p in msg.parts.items() if p.kind == "attachment"}

    # ------------------------------------------------------------------ messages

    @initialize(target=messages, role=st.sampled_from(["user", "assistant"]),
                mid=st.uuids().map(str))
    def first_message(self, role: Literal["user", "assistant"], mid: str) -> str:
        result = self.send(ev.MessageStarted(message_id=mid, role=role), "command")
        assert result.kind == "accept"
        return mid

    @initialize(targets=(tools, parts), call_id=FRESH_CALL, mid=st.uuids().map(str))
    def first_tool(self, call_id: str, mid: str) -> PartRef:
        """A tool call from the start (in its own assistant message), so tool rules can run."""
        started = ev.MessageStarted(message_id=mid, role="assistant")
        assert self.send(started, "raw").kind == "accept"
        ref = PartRef(mid, "prt_tool")
        added = ev.ToolAdded(message_id=mid, part_id=ref.part_id, call_id=call_id, tool="read")
        assert self.send(added, "command").kind == "accept"
        return ref

    @rule(target=messages, mid=MESSAGE_IDS, parent=st.one_of(st.none(), messages),
          data=st.data(), via=VIA)
    def start_message(self, mid: str, parent: str | None, data: st.DataObject,
                      via: Via) -> str | MultipleResults[str]:
        e = data.draw(st.builds(ev.MessageStarted, message_id=st.just(mid),
                                parent_id=st.just(parent), **MESSAGE_STARTED_FIELDS))
        return multiple() if self.send(e, via).kind == "reject" else mid

    @rule(target=messages, text=TEXT, mid=st.uuids().map(str))
    def user_message(self, text: str, mid: str) -> str | MultipleResults[str]:
        placeholder = "prt_user_text"
        planned: list[Event] = [
            ev.MessageStarted(message_id=mid, role="user"),
            ev.TextAdded(message_id=mid, part_id=placeholder, text=text),
            ev.PartEnded(message_id=mid, part_id=placeholder),
            ev.MessageCompleted(message_id=mid),
        ]

        def key(e: Event) -> object:
            if isinstance(e, ev.PartEvent):
                return strip(msgspec.structs.replace(e, part_id=placeholder))
            return strip(e)

        result = self.execute(planned, lambda s: s.user_message(text, message_id=mid), key=key)
        if result.kind == "reject":  # the drawn id is already taken
            return multiple()
        assert result.value == mid
        return mid

    @rule(mid=messages, data=st.data(), via=VIA)
    def complete_message(self, mid: str, data: st.DataObject, via: Via) -> None:
        mid = self.aim_message(mid, data)
        e = data.draw(st.builds(ev.MessageCompleted, message_id=st.just(mid),
                                **MESSAGE_COMPLETED_FIELDS))
        self.send(e, via)

    @rule(mid=st.one_of(messages, st.uuids().map(str)), reason=TEXT)
    def abort(self, mid: str, reason: str) -> None:
        model = Model.of(self.log())
        planned: list[Event] = []
        msg = model.messages.get(mid)
        for pid, p in (msg.parts.items() if msg else ()):
            if p.state in UNSETTLED and p.kind == "tool":
                planned.append(ev.ToolFailed(message_id=mid, part_id=pid, kind="aborted",
                                             error=ABORTED_TOOL_ERROR,
                                             metadata={"interrupted": True}))
            elif p.state in UNSETTLED:
                planned.append(ev.PartEnded(message_id=mid, part_id=pid))
        planned.append(ev.MessageCompleted(
            message_id=mid, finish="aborted",
            error=ev.MessageError(kind="aborted", message=reason or "aborted")))
        result = self.execute(planned, lambda s: s.abort(mid, reason or "aborted"))
        if result.kind == "accept":
            assert result.value == result.new[-1].seq
            assert not any(p.state in UNSETTLED for p in self.lc.messages[mid].parts.values())

    @rule(offset=st.integers(-20, 80))
    def expire(self, offset: int) -> None:
        now = self.clock.now + offset
        planned: list[ev.ToolFailed] = [
            ev.ToolFailed(message_id=mid, part_id=pid, kind="timeout", error="timeout")
            for mid, m in Model.of(self.log()).messages.items()
            for pid, p in m.parts.items()
            if p.state == "running" and p.deadline is not None and p.deadline <= now
        ]

        def key(e: Event) -> object:
            assert isinstance(e, ev.ToolFailed)
            return (e.message_id, e.part_id, e.kind, bool(e.error.strip()))

        result = self.execute(planned, lambda s: s.expire(now), key=key)
        assert result.kind == ("accept" if planned else "noop")
        assert result.value == [PartRef(e.message_id, e.part_id) for e in planned]

    # ------------------------------------------------------------------ text and reasoning

    @rule(targets=(streams, parts), mid=messages, pid=PART_IDS, reasoning=st.booleans(),
          streaming=st.booleans(), data=st.data(), via=VIA)
    def add_stream(self, *, mid: str, pid: str, reasoning: bool, streaming: bool,
                   data: st.DataObject, via: Via) -> PartRef | MultipleResults[PartRef]:
        cls = ev.ReasoningAdded if reasoning else ev.TextAdded
        ref = self.aim(cls, PartRef(mid, pid), data)
        mid = ref.message_id
        added = data.draw(part_event(cls, ref))
        if streaming:
            result = self.send(added, via)
        else:
            planned = [added, ev.PartEnded(message_id=mid, part_id=pid)]

            def call(s: Session) -> object:
                if via == "raw" or not pid:
                    return s.append(planned)
                if isinstance(added, ev.TextAdded):
                    return s.add_text(mid, added.text, streaming=False,
                                      synthetic=added.synthetic, ignored=added.ignored,
                                      metadata=added.metadata, part_id=pid)
                assert isinstance(added, ev.ReasoningAdded)
                return s.add_reasoning(mid, added.text, streaming=False,
                                       metadata=added.metadata, part_id=pid)

            result = self.execute(planned, call)
        return multiple() if result.kind == "reject" else ref

    @rule(ref=streams, reasoning=st.booleans(), data=st.data(), via=VIA)
    def delta(self, ref: PartRef, reasoning: bool, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ReasoningDelta if reasoning else ev.TextDelta, ref, data, via)

    @rule(ref=streams, data=st.data(), via=VIA)
    def end_part(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.PartEnded, ref, data, via)

    # ------------------------------------------------------------------ tools

    @rule(targets=(tools, parts), mid=messages, pid=PART_IDS, data=st.data(), via=VIA)
    def add_tool(self, mid: str, pid: str, data: st.DataObject,
                 via: Via) -> PartRef | MultipleResults[PartRef]:
        ref = self.aim(ev.ToolAdded, PartRef(mid, pid), data)
        result = self.send_part(ev.ToolAdded, ref, data, via, aim=False)
        return multiple() if result.kind == "reject" else ref

    @rule(ref=tools, data=st.data(), via=VIA)
    def tool_input_delta(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolInputDelta, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def tool_input_ready(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolInputReady, ref, data, via)

    @rule(ref=tools, cls=st.sampled_from([ev.ToolApprovalRequested, ev.ToolApprovalGranted,
                                          ev.ToolApprovalDenied]), data=st.data(), via=VIA)
    def approval(self, ref: PartRef, cls: type[Event], data: st.DataObject, via: Via) -> None:
        self.send_part(cls, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def start_tool(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolStarted, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def tool_progress(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolProgress, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def complete_tool(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolCompleted, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def fail_tool(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolFailed, ref, data, via)

    @rule(ref=tools, data=st.data(), via=VIA)
    def compact_tool_output(self, ref: PartRef, data: st.DataObject, via: Via) -> None:
        self.send_part(ev.ToolOutputCompacted, ref, data, via)

    @rule(ref=tools, output=TEXT, via=VIA)
    def complete_again(self, ref: PartRef, output: str, via: Via) -> None:
        """Completing a tool again: identical is a no-op, a different output is rejected."""
        entered = Model.of(self.log()).entered(
            ev.ToolCompleted(message_id=ref.message_id, part_id=ref.part_id, output=""))
        if not isinstance(entered, ev.ToolCompleted):
            return
        again = msgspec.structs.replace(strip(entered), output=output)
        result = self.send(again, via)
        message_open = self.lc.messages[ref.message_id].state == "open"
        part = self.lc.part(ref.message_id, ref.part_id)
        assert part is not None
        if output == entered.output and message_open and part.state == "completed":
            assert result.kind == "noop"
        else:
            assert result.kind == "reject"

    # ------------------------------------------------------------------ steps and other parts

    @rule(target=parts, mid=messages, pid=PART_IDS, finish=st.booleans(), data=st.data(),
          via=VIA)
    def step(self, mid: str, pid: str, finish: bool, data: st.DataObject,
             via: Via) -> PartRef | MultipleResults[PartRef]:
        cls = ev.StepFinished if finish else ev.StepStarted
        ref = self.aim(cls, PartRef(mid, pid), data)
        result = self.send_part(cls, ref, data, via, aim=False)
        return multiple() if result.kind == "reject" else ref

    @rule(target=parts, mid=messages, pid=PART_IDS, cls=st.sampled_from(OTHER_PARTS),
          data=st.data(), via=VIA)
    def other_part(self, mid: str, pid: str, cls: type[Event], data: st.DataObject,
                   via: Via) -> PartRef | MultipleResults[PartRef]:
        ref = self.aim(cls, PartRef(mid, pid), data)
        result = self.send_part(cls, ref, data, via, aim=False)
        return multiple() if result.kind == "reject" else ref

    # ------------------------------------------------------------------ deliberately random

    @rule(ref=parts, cls=st.sampled_from(PART_EVENTS), data=st.data(), via=VIA)
    def random_part_event(self, ref: PartRef, cls: type[Event], data: st.DataObject,
                          via: Via) -> None:
        self.send_part(cls, ref, data, via, aim=False)

    @rule(mid=st.uuids().map(str), pid=PART_IDS, cls=st.sampled_from(PART_EVENTS),
          data=st.data(), via=VIA)
    def event_on_unknown_message(self, mid: str, pid: str, cls: type[Event],
                                 data: st.DataObject, via: Via) -> None:
        assert self.send_part(cls, PartRef(mid, pid), data, via, aim=False).kind == "reject"

    @rule(size=st.integers(1, 4), data=st.data())
    def raw_batch(self, size: int, data: st.DataObject) -> None:
        """A raw batch is checked event by event and appended all or nothing."""
        model = Model.of(self.log())
        refs = [PartRef(mid, pid) for mid, m in model.messages.items()
                for pid in [*m.parts, "prt_a"]]
        batch = [data.draw(part_event(data.draw(st.sampled_from(PART_EVENTS)),
                                      data.draw(st.sampled_from(refs))))
                 for _ in range(size)]
        self.execute(batch, lambda s: s.append(batch))

    @rule(data=st.data(), via=VIA)
    def resend_entered(self, data: st.DataObject, via: Via) -> None:
        """Repeat, with a new id, the event that moved an entity into its state."""
        events = self.log()
        e = strip(events[data.draw(st.integers(0, len(events) - 1))])
        entered = Model.of(events).entered(e)
        result = self.send(e, via)
        if entered is not None and same(entered, e):
            assert result.kind in ("noop", "reject")

    @rule(data=st.data())
    def resend_logged_event(self, data: st.DataObject) -> None:
        """An event whose id is already in the log is a no-op reporting its original seq."""
        events = self.log()
        i = data.draw(st.integers(0, len(events) - 1))
        old = events[i]
        ids = data.draw(st.lists(st.uuids().map(str), min_size=4, max_size=4, unique=True))
        fresh = ev.MessageStarted(id=ids[0], message_id=ids[1], role="user")
        batch: list[Event] = [old, fresh] if data.draw(st.booleans()) else [old]
        result = self.execute(batch, lambda s: s.append(batch), expect=predict(
            Model.of(events), batch[1:]))
        assert isinstance(result.value, list)
        assert result.value[0] == old.seq
        dup = ev.MessageStarted(id=ids[2], message_id=ids[3], role="user")
        duplicated: list[Event] = [dup, dup]
        self.execute(duplicated, lambda s: s.append(duplicated),
                     expect=Prediction("reject", DuplicateEventId))

    @rule(mid=messages, other=st.uuids().map(str))
    def foreign_session_event(self, mid: str, other: str) -> None:
        e = ev.MessageCompleted(message_id=mid, session_id=other)
        self.execute([e], lambda s: s.append([e]),
                     expect=Prediction("reject", PartValidationError))

    # ------------------------------------------------------------------ the conversation

    @rule(data=st.data(), via=VIA)
    def create_conversation(self, data: st.DataObject, via: Via) -> None:
        self.send(data.draw(CONVERSATION[ev.ConversationCreated]), via)

    @rule(cls=st.sampled_from(CONVERSATION_EVENTS), data=st.data(), via=VIA)
    def conversation_event(self, cls: type[Event], data: st.DataObject, via: Via) -> None:
        e = data.draw(CONVERSATION[cls])
        if data.draw(st.integers(0, 3)):  # usually aim at a legal move
            c = Model.of(self.log()).conversation
            if c.entered is None:
                e = data.draw(CONVERSATION[ev.ConversationCreated])
            elif isinstance(e, ev.TangentEntered | ev.TangentExited):
                e = ev.TangentEntered() if c.tangent == "main" else ev.TangentExited()
            elif isinstance(e, ev.ContextFileRemoved) and c.context_files:
                e = ev.ContextFileRemoved(path=data.draw(st.sampled_from(sorted(c.context_files))))
            elif isinstance(e, ev.CheckpointRestored) and c.checkpoints:
                e = ev.CheckpointRestored(tag=data.draw(st.sampled_from(sorted(c.checkpoints))))
        self.send(e, via)

    @rule(delta=st.integers(-30, 30))
    def move_clock(self, delta: int) -> None:
        """Times need not be monotonic (clock skew, imported logs)."""
        self.clock.now += delta

    # ------------------------------------------------------------------ snapshots and time travel

    @rule()
    def refollow(self) -> None:
        """Restore and thaw the live projection now; they keep folding from here."""
        for _, _, unsubscribe in self.followers:
            unsubscribe()
        restored = WithPartsProjection.restore(self.sid, self.live.snapshot())
        thawed = WithPartsProjection.thaw(self.sid, self.live.freeze())
        self.followers = [
            (f"restored at {self.session.version}", restored, self.session.subscribe(restored)),
            (f"thawed at {self.session.version}", thawed, self.session.subscribe(thawed)),
        ]

    @rule(data=st.data(), every=st.integers(1, 6))
    def time_travel(self, data: st.DataObject, every: int) -> None:
        events = self.log()
        k = data.draw(st.integers(0, len(events)))
        want = replay(self.sid, events[:k])
        full = replay(self.sid, events)
        assert_same_projection(at(self.store, self.sid, k, use_snapshots=False), want, "at")
        assert_same_projection(at(self.store, self.sid, k), want, "at, old snapshots")
        write_snapshots(self.store, self.sid, every=every)
        from_snapshot = at(self.store, self.sid, k)
        assert_same_projection(from_snapshot, want, f"at, snapshots every {every}")
        assert_same_projection(from_snapshot.apply_all(events[k:]), full, "at(k) + rest")
        timeline = Timeline(self.store, self.sid, every=every)
        assert_same_projection(timeline.at(k), want, f"Timeline(every={every}).at")
        assert_same_projection(timeline.at(k).apply_all(events[k:]), full, "Timeline + rest")
        assert_same_projection(timeline.latest, full, "Timeline.latest")

    @rule(data=st.data())
    def time_travel_by_time(self, data: st.DataObject) -> None:
        events = self.log()
        times = [e.time for e in events]
        t = data.draw(st.integers(min(times) - 2, max(times) + 2))
        k = 0
        while k < len(events) and events[k].time <= t:
            k += 1
        want = replay(self.sid, events[:k])
        assert self.store.seq_at_time(self.sid, t) == k
        assert_same_projection(at_time(self.store, self.sid, t), want, f"at_time({t})")
        assert_same_projection(at_time(self.store, self.sid, t, use_snapshots=False), want,
                               "at_time without snapshots")
        timeline = Timeline(self.store, self.sid, every=3)
        assert timeline.seq_at_time(t) == k
        assert_same_projection(timeline.at_time(t), want, "Timeline.at_time")

    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        events = self.log()
        k = data.draw(st.integers(0, len(events)))
        child = self.session.fork(at=k)
        assert child.version == k
        assert self.store.session_info(child.id).parent == self.sid
        assert list(self.store.read(child.id)) == events[:k]
        parent_at_k = at(self.store, self.sid, k)
        for use_snapshots in (True, False):
            got = at(self.store, child.id, k, use_snapshots=use_snapshots)
            assert_same_projection(got, replay(child.id, events[:k]), "fork at k")
            assert dumps(got.to_json()) == dumps(rename_session(parent_at_k.to_json(), child.id))
        rebuilt = Lifecycle(child.id)
        for e in events[:k]:
            rebuilt.replay(e)
        rebuilt.version = k
        assert lc_summary(child.lifecycle) == lc_summary(rebuilt)
        # The fork diverges without touching its parent.
        before = self.dump()
        child.start_message("user", message_id=data.draw(st.uuids().map(str)))
        assert self.dump() == before
        assert self.session.version == len(events)
        child_events = list(self.store.read(child.id))
        assert child_events[:k] == events[:k]
        assert len(child_events) == k + 1
        assert_same_projection(at(self.store, child.id), replay(child.id, child_events),
                               "diverged fork")
        # A fork of the fork shares both prefixes.
        j = data.draw(st.integers(0, k + 1))
        grandchild = child.fork(at=j)
        assert list(self.store.read(grandchild.id)) == child_events[:j]
        assert_same_projection(at(self.store, grandchild.id, j),
                               replay(grandchild.id, child_events[:j]), "fork of a fork")


class SQLiteSessionMachine(SessionMachine):
    def new_store(self) -> Store:
        return SQLiteStore(str(self.tmp / "log.db"), synchronous="OFF")


STATEFUL = settings(
    max_examples=100, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)


def test_session_machine_memory() -> None:
    run_state_machine_as_test(SessionMachine, settings=STATEFUL)


def test_session_machine_sqlite() -> None:
    run_state_machine_as_test(
        SQLiteSessionMachine, settings=settings(STATEFUL, max_examples=15, stateful_step_count=30)
    )


def test_stateful_runs_took_transitions() -> None:
    """Sanity: the machines above did drive entities through table rows."""
    if not ROWS_TAKEN:  # run alone: drive a short machine first
        run_state_machine_as_test(SessionMachine, settings=settings(STATEFUL, max_examples=10))
    assert ("message", ABSENT, "message.started") in ROWS_TAKEN
    assert len(ROWS_TAKEN) >= 10


def test_oracle_knows_every_event_type() -> None:
    """The machine generates every event type of the catalog."""
    generated = {ev.MessageStarted, ev.MessageCompleted, *PART_EVENTS, *CONVERSATION_EVENTS}
    assert generated == set(ev.EVENT_TYPES)
    assert set(CONVERSATION_EVENTS) == set(ev.CONVERSATION_EVENT_TYPES)


def test_attachment_part_ids_must_be_present_and_unique() -> None:
    """Regression (found by the machine): attachments become file parts (BR-01, BR-02)."""
    clock = StepClock()
    session = Session.create(MemoryStore(), clock=clock)
    mid = session.start_message("assistant")
    tool = session.add_tool(mid, "call_1", "read", part_id="prt_tool")
    session.start_tool(tool)
    for ids in (["prt_x", "prt_x"], [""], ["prt_tool"]):
        attachments = [ev.Attachment(part_id=i, mime="text/plain", url="file:///a") for i in ids]
        version = session.version
        with pytest.raises(PartValidationError, match=r"^BR-0[12]: ") as info:
            session.complete_tool(tool, "ok", attachments=attachments)
        assert info.value.rule in ("BR-01", "BR-02")
        assert session.version == version
    session.complete_tool(tool, "ok", attachments=[
        ev.Attachment(part_id="prt_x", mime="text/plain", url="file:///a"),
        ev.Attachment(part_id="prt_y", mime="text/plain", url="file:///b")])
    assert session.lifecycle.part(mid, "prt_y") is not None
