"""The event catalog: every change to a session is one of these immutable structs.

This module is the single definition of each event type. The JSON / msgpack wire
format, ``docs/events.md`` and the transition tables all derive from it.

Every event carries the envelope fields of :class:`Event`. ``id``, ``session_id``,
``seq`` and ``time`` may be left empty by a writer of raw events: the log fills
them in when it appends (``seq`` is always assigned by the log).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

import msgspec

Role = Literal["user", "assistant"]
ToolFailureKind = Literal["error", "aborted", "timeout", "cancelled", "denied"]
MessageErrorKind = Literal[
    "aborted", "output_length", "context_overflow", "api", "auth", "timeout", "unknown"
]
JSONObject = dict[str, Any]

# Actors that are not agent ids.
BUILTIN_ACTORS: Final = ("user", "assistant", "tool", "system")


class _Value(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
             forbid_unknown_fields=True):
    """Base of the small value types nested inside events."""


class ModelRef(_Value, frozen=True):
    provider_id: str
    model_id: str


class PathInfo(_Value, frozen=True):
    cwd: str
    root: str


class CacheTokens(_Value, frozen=True):
    read: int = 0
    write: int = 0


class Tokens(_Value, frozen=True):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: CacheTokens = msgspec.field(default_factory=CacheTokens)


class MessageError(_Value, frozen=True):
    """Why an assistant message ended badly (OpenCode's typed message errors)."""

    kind: MessageErrorKind
    message: str = ""
    status_code: int | None = None
    retryable: bool | None = None


class UserSummary(_Value, frozen=True):
    """BR-11: only produced when the context is compacted."""

    title: str | None = None
    body: str | None = None
    diffs: list[JSONObject] | None = None


class SourceText(_Value, frozen=True):
    value: str
    start: int
    end: int


class FileSource(_Value, frozen=True, tag="file", tag_field="type"):
    path: str
    text: SourceText | None = None


class SymbolSource(_Value, frozen=True, tag="symbol", tag_field="type"):
    path: str
    name: str
    kind: int
    range: JSONObject = msgspec.field(default_factory=dict)
    text: SourceText | None = None


class ResourceSource(_Value, frozen=True, tag="resource", tag_field="type"):
    client_name: str
    uri: str
    text: SourceText | None = None


FilePartSource = FileSource | SymbolSource | ResourceSource


class Attachment(_Value, frozen=True):
    """A file produced by a tool; it becomes a file part inside the completed state."""

    part_id: str
    mime: str
    url: str
    filename: str | None = None
    source: FilePartSource | None = None


# --------------------------------------------------------------------------- envelope


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
            omit_defaults=True, forbid_unknown_fields=True):
    """Envelope shared by every event.

    ``v`` is the schema version of the event's type. Its default stays 1 forever
    (bytes that omit it were written as version 1); a type whose schema changes
    writes its new version explicitly.
    """

    id: str = ""
    session_id: str = ""
    seq: int = 0
    time: int = 0
    actor: str = ""
    v: int = 1


class MessageEvent(Event, frozen=True, kw_only=True):
    message_id: str


class PartEvent(MessageEvent, frozen=True, kw_only=True):
    part_id: str


# --------------------------------------------------------------------------- messages


class MessageStarted(MessageEvent, frozen=True, tag="message.started"):
    """A user or assistant message opens (``info`` of WithParts)."""

    role: Role
    agent: str = ""
    model: ModelRef | None = None
    system: str | None = None
    tools: dict[str, bool] | None = None
    variant: str | None = None
    summary: UserSummary | None = None
    path: PathInfo | None = None
    parent_id: str | None = None


class MessageCompleted(MessageEvent, frozen=True, tag="message.completed"):
    """The message closes; no part may be added after it (BR-14 sets time.completed)."""

    cost: float = 0.0
    tokens: Tokens | None = None
    finish: str | None = None
    error: MessageError | None = None


# --------------------------------------------------------------------------- text and reasoning


class TextAdded(PartEvent, frozen=True, tag="text.added"):
    """A text part opens in state ``streaming``; ``part.ended`` makes it ``done``."""

    text: str = ""
    synthetic: bool = False
    ignored: bool = False
    metadata: JSONObject | None = None


class TextDelta(PartEvent, frozen=True, tag="text.delta"):
    delta: str


class ReasoningAdded(PartEvent, frozen=True, tag="reasoning.added"):
    text: str = ""
    metadata: JSONObject | None = None


class ReasoningDelta(PartEvent, frozen=True, tag="reasoning.delta"):
    delta: str


class PartEnded(PartEvent, frozen=True, tag="part.ended"):
    """A streaming text or reasoning part is done; ``metadata`` is merged (e.g. a signature)."""

    metadata: JSONObject | None = None


# --------------------------------------------------------------------------- files


class FileAdded(PartEvent, frozen=True, tag="file.added"):
    mime: str
    url: str
    filename: str | None = None
    source: FilePartSource | None = None


# --------------------------------------------------------------------------- tools


class ToolAdded(PartEvent, frozen=True, tag="tool.added"):
    """A tool call appears in state ``pending`` (BR-06: ``raw`` keeps the raw arguments)."""

    call_id: str
    tool: str
    input: JSONObject = msgspec.field(default_factory=dict)
    raw: str = ""
    metadata: JSONObject | None = None


class ToolInputDelta(PartEvent, frozen=True, tag="tool.input_delta"):
    """A raw JSON fragment of the tool's arguments, appended to ``raw`` while pending."""

    fragment: str


class ToolInputReady(PartEvent, frozen=True, tag="tool.input_ready"):
    """The arguments are complete and parsed (pending stays pending)."""

    input: JSONObject


class ToolApprovalRequested(PartEvent, frozen=True, tag="tool.approval_requested"):
    reason: str | None = None
    metadata: JSONObject | None = None


class ToolApprovalGranted(PartEvent, frozen=True, tag="tool.approval_granted"):
    reason: str | None = None


class ToolApprovalDenied(PartEvent, frozen=True, tag="tool.approval_denied"):
    """The user refused the call: the tool ends in ``error`` with kind ``denied``."""

    reason: str = ""


class ToolStarted(PartEvent, frozen=True, tag="tool.started"):
    """pending -> running. ``time.start`` is the event time (BR-07).

    ``input`` replaces the pending input when given; ``deadline`` (ms) lets
    ``Session.expire`` fail the tool with kind ``timeout``.
    """

    input: JSONObject | None = None
    title: str | None = None
    metadata: JSONObject | None = None
    deadline: int | None = None


class ToolProgress(PartEvent, frozen=True, tag="tool.progress"):
    """running -> running: a new title and/or metadata (merged)."""

    title: str | None = None
    metadata: JSONObject | None = None


class ToolCompleted(PartEvent, frozen=True, tag="tool.completed"):
    """running -> completed (BR-08 time.end, BR-09 output not empty)."""

    output: str
    title: str = ""
    metadata: JSONObject | None = None
    attachments: list[Attachment] = msgspec.field(default_factory=list)


class ToolFailed(PartEvent, frozen=True, tag="tool.failed"):
    """-> error (BR-08 time.end, BR-10 a description). ``kind`` types the failure."""

    error: str
    kind: ToolFailureKind = "error"
    metadata: JSONObject | None = None


class ToolOutputCompacted(PartEvent, frozen=True, tag="tool.output_compacted"):
    """A completed tool's output is cleared from what the model sees (time.compacted)."""


# --------------------------------------------------------------------------- steps and the rest


class StepStarted(PartEvent, frozen=True, tag="step.started"):
    snapshot: str | None = None


class StepFinished(PartEvent, frozen=True, tag="step.finished"):
    reason: str
    cost: float = 0.0
    tokens: Tokens = msgspec.field(default_factory=Tokens)
    snapshot: str | None = None


class SnapshotAdded(PartEvent, frozen=True, tag="snapshot.added"):
    snapshot: str


class PatchAdded(PartEvent, frozen=True, tag="patch.added"):
    hash: str
    files: list[str] = msgspec.field(default_factory=list)


class AgentAdded(PartEvent, frozen=True, tag="agent.added"):
    name: str
    source: SourceText | None = None


class SubtaskAdded(PartEvent, frozen=True, tag="subtask.added"):
    prompt: str
    description: str
    agent: str
    model: ModelRef | None = None
    command: str | None = None


class RetryAdded(PartEvent, frozen=True, tag="retry.added"):
    attempt: int
    error: MessageError


class CompactionAdded(PartEvent, frozen=True, tag="compaction.added"):
    auto: bool = False
    overflow: bool | None = None


# --------------------------------------------------------------------------- the union

AnyEvent = (
    MessageStarted
    | MessageCompleted
    | TextAdded
    | TextDelta
    | ReasoningAdded
    | ReasoningDelta
    | PartEnded
    | FileAdded
    | ToolAdded
    | ToolInputDelta
    | ToolInputReady
    | ToolApprovalRequested
    | ToolApprovalGranted
    | ToolApprovalDenied
    | ToolStarted
    | ToolProgress
    | ToolCompleted
    | ToolFailed
    | ToolOutputCompacted
    | StepStarted
    | StepFinished
    | SnapshotAdded
    | PatchAdded
    | AgentAdded
    | SubtaskAdded
    | RetryAdded
    | CompactionAdded
)

EVENT_TYPES: Final[tuple[type[Event], ...]] = get_args(AnyEvent)


def tag_of(cls: type[Event]) -> str:
    """The ``type`` string of an event class."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


EVENT_BY_TAG: Final[dict[str, type[Event]]] = {tag_of(c): c for c in EVENT_TYPES}

# Which actor writes an event when the writer does not say (data, used by the log).
DEFAULT_ACTOR: Final[dict[type[Event], str]] = {
    cls: (
        "tool"
        if tag_of(cls).startswith("tool.")
        and cls not in (ToolAdded, ToolInputDelta, ToolInputReady)
        else "user"
        if cls in (ToolApprovalGranted, ToolApprovalDenied)
        else "assistant"
    )
    for cls in EVENT_TYPES
}
DEFAULT_ACTOR[ToolApprovalRequested] = "system"
