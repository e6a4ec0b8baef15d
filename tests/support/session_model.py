"""The model behind the session machines (tests/engine/test_session_machine*.py).

Strategies for every event type, an oracle written from the transition tables'
data (not from ``engine.lifecycle``) that predicts each command's outcome, the
commands that send an event through the public ``Session`` API, and the
observation helpers the machines' invariants use (a lifecycle that records every
move it folds, projection comparisons, captured rejection logs).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import msgspec
import structlog
from hypothesis import strategies as st
from structlog.testing import capture_logs

from engine import events as ev
from engine import lifecycle
from engine import tables as tb
from engine.errors import DuplicateEventId, IllegalTransition, PartValidationError
from engine.events import Event, tag_of
from engine.lifecycle import Lifecycle
from engine.session import PartRef, Session
from engine.store import MemoryStore, Store
from projections import views as v
from projections.withparts import WithPartsProjection

ABSENT = tb.ABSENT
Via = Literal["command", "raw"]
Kind = Literal["accept", "noop", "reject"]
REJECTIONS = (IllegalTransition, PartValidationError, DuplicateEventId)
UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

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
    ev.SessionImported: st.builds(ev.SessionImported, format=st.sampled_from(["codex", "aider"]),
                                  source=st.sampled_from(["r.jsonl", "s.json"]),
                                  original_id=TEXT, tool_version=TEXT, metadata=METADATA),
    ev.SessionTitled: st.builds(ev.SessionTitled, title=NONBLANK, source=TEXT),
    ev.ItemPopped: st.builds(ev.ItemPopped, event_id=NONBLANK, memory=TEXT),
    ev.ItemsCleared: st.builds(ev.ItemsCleared, memory=TEXT),
    ev.GuardrailTripped: st.builds(
        ev.GuardrailTripped, guardrail=NONBLANK,
        stage=st.sampled_from(get_args(ev.GuardrailStage)), agent=TEXT, info=METADATA),
    ev.RunUsageRecorded: st.builds(ev.RunUsageRecorded, turn=NONBLANK, requests=COUNT,
                                   total=COUNT, details=METADATA, memory=TEXT),
    ev.GraphCheckpointSaved: st.builds(ev.GraphCheckpointSaved, checkpoint_id=NONBLANK,
                                       ns=TEXT, parent_id=TEXT, metadata=METADATA),
    ev.GraphWritesSaved: st.builds(ev.GraphWritesSaved, checkpoint_id=NONBLANK,
                                   task_id=NONBLANK, ns=TEXT, task_path=TEXT),
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
    if cls is ev.SessionImported:
        return tb.IMPORT
    if cls is ev.SessionTitled:
        return tb.TITLE
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
    imported: Event | None = None  # session.imported
    titled: Event | None = None  # the latest session.titled

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
        if table is tb.IMPORT:
            return (ABSENT if self.imported is None else "imported"), self.imported
        if table is tb.TITLE:
            return (ABSENT if self.titled is None else "titled"), self.titled
        created = self.checkpoints.get(e.tag)  # type: ignore[attr-defined]
        return (ABSENT, None) if created is None else ("created", created)


@dataclass
class Model:
    messages: dict[str, MsgM] = field(default_factory=dict)
    call_ids: set[tuple[str, str]] = field(default_factory=set)  # (message id, call id)
    conversation: ConversationM = field(default_factory=ConversationM)
    length: int = 0  # events folded (session.imported is legal only at the start)

    def copy(self) -> Model:
        c = self.conversation
        return Model(
            {mid: replace(m, parts={pid: replace(p) for pid, p in m.parts.items()})
             for mid, m in self.messages.items()},
            set(self.call_ids),
            replace(c, context_files=dict(c.context_files), checkpoints=dict(c.checkpoints)),
            self.length,
        )

    @classmethod
    def of(cls, events: Sequence[Event]) -> Model:
        m = cls()
        for e in events:
            m.fold(e)
        return m

    def fold(self, e: Event) -> None:
        self.length += 1
        if isinstance(e, ev.ConversationEvent):
            c = self.conversation
            if isinstance(e, ev.SessionImported):
                c.imported = e
            elif isinstance(e, ev.SessionTitled):
                c.titled = e
            elif isinstance(e, ev.ConversationCreated):
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
                self.call_ids.add((e.message_id, e.call_id))
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
        if table is tb.IMPORT:  # once, and only as the session's first event
            imported = m.conversation.imported
            if imported is not None:
                return NOOP if same(imported, e) else ILLEGAL
            return ACCEPT if m.length == 0 else ILLEGAL
        if table not in (tb.CONVERSATION, tb.TITLE) and m.conversation.entered is None:
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
            if not UUID_PATTERN.match(e.message_id.lower()):
                return INVALID
            if e.parent_id is not None and e.parent_id not in m.messages:
                return INVALID
            if e.role == "assistant" and e.summary is not None:
                return INVALID  # BR-11: a summary is a user message's
            return ACCEPT
        assert msg is not None
        if any(p.state in UNSETTLED for p in msg.parts.values()):
            return ILLEGAL
        if msg.step != "idle" and e.error is None:
            return ILLEGAL
        if msg.role == "user" and (e.cost or e.tokens is not None):
            return INVALID  # BR-12, BR-13: cost and tokens are an assistant's
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
    if isinstance(e, ev.ToolAdded) and (not e.call_id or not e.tool
                                        or (e.message_id, e.call_id) in m.call_ids):
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
    if isinstance(e, ev.TranscriptReplaced | ev.SessionImported | ev.SessionTitled | ev.ItemPopped
                  | ev.ItemsCleared | ev.GuardrailTripped | ev.RunUsageRecorded
                  | ev.GraphCheckpointSaved | ev.GraphWritesSaved):
        return False  # raw only (importers and integrations write them)
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
        if table is tb.IMPORT:
            return ("imported" if c.imported is not None else ABSENT), None
        if table is tb.TITLE:
            return ("titled" if c.titled is not None else ABSENT), None
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
