"""WithParts views: frozen attrs classes shaped exactly like the seed's TypeScript types.

Attributes are snake_case; JSON (``projections.convert``) uses the seed's names.
Optional TypeScript fields are ``None`` here and absent in JSON.

The values a view shares with an event (tokens, a model reference, an error,
a file source, ...) are the event's own msgspec types, re-exported here: one
declaration per value, no copy to keep in step. Only the shapes OpenCode adds
(message info, parts, tool states, times) are declared below.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from engine.events import (
    CacheTokens,
    FilePartSource,
    FileSource,
    MessageError,
    ModelRef,
    PathInfo,
    ResourceSource,
    SourceText,
    SymbolSource,
    Tokens,
    UserSummary,
)

JSON = dict[str, Any]


@attrs.frozen
class MessageTime:
    created: int
    completed: int | None = None


@attrs.frozen
class UserInfo:
    TAG: ClassVar[str] = "user"
    TAG_FIELD: ClassVar[str] = "role"
    id: str
    session_id: str
    time: MessageTime
    agent: str = ""
    model: ModelRef | None = None
    system: str | None = None
    tools: dict[str, bool] | None = None
    variant: str | None = None
    summary: UserSummary | None = None
    metadata: JSON | None = None

    @property
    def role(self) -> Literal["user"]:
        return "user"


@attrs.frozen
class AssistantInfo:
    TAG: ClassVar[str] = "assistant"
    TAG_FIELD: ClassVar[str] = "role"
    id: str
    session_id: str
    time: MessageTime
    agent: str = ""
    provider_id: str | None = None
    model_id: str | None = None
    system: str | None = None
    variant: str | None = None
    path: PathInfo | None = None
    parent_id: str | None = None
    cost: float = 0.0
    tokens: Tokens = attrs.field(factory=Tokens)
    finish: str | None = None
    error: MessageError | None = None
    metadata: JSON | None = None  # provider data: the response envelope (ids, usage as sent)

    @property
    def role(self) -> Literal["assistant"]:
        return "assistant"


MessageInfo = UserInfo | AssistantInfo


# --------------------------------------------------------------------------- parts


@attrs.frozen
class PartBase:
    """What every part carries first (OpenCode's ``partBase``, spread into each part):
    its id and the session and message it belongs to.

    A field every part has is declared here, once. attrs puts a base's fields
    first, so each part's fields, its constructor's positional order and its JSON
    keep the order they had when each part declared the three itself.
    """

    id: str
    session_id: str
    message_id: str


@attrs.frozen
class PartTime:
    start: int | None = None
    end: int | None = None


@attrs.frozen
class TextPart(PartBase):
    TAG: ClassVar[str] = "text"
    text: str
    synthetic: bool | None = None
    ignored: bool | None = None
    time: PartTime | None = None
    metadata: JSON | None = None


@attrs.frozen
class ReasoningTime:
    start: int
    end: int | None = None


@attrs.frozen
class ReasoningPart(PartBase):
    TAG: ClassVar[str] = "reasoning"
    text: str
    time: ReasoningTime
    metadata: JSON | None = None


@attrs.frozen
class FilePart(PartBase):
    TAG: ClassVar[str] = "file"
    mime: str
    url: str
    filename: str | None = None
    source: FilePartSource | None = None


@attrs.frozen
class RunningTime:
    start: int


@attrs.frozen
class CompletedTime:
    start: int
    end: int
    compacted: int | None = None


@attrs.frozen
class ErrorTime:
    start: int
    end: int


@attrs.frozen
class ToolStatePending:
    TAG: ClassVar[str] = "pending"
    TAG_FIELD: ClassVar[str] = "status"
    input: JSON
    raw: str


@attrs.frozen
class ToolStateRunning:
    TAG: ClassVar[str] = "running"
    TAG_FIELD: ClassVar[str] = "status"
    input: JSON
    time: RunningTime
    title: str | None = None
    metadata: JSON | None = None


@attrs.frozen
class ToolStateCompleted:
    TAG: ClassVar[str] = "completed"
    TAG_FIELD: ClassVar[str] = "status"
    input: JSON
    output: str
    title: str
    metadata: JSON
    time: CompletedTime
    attachments: list[FilePart] | None = None


@attrs.frozen
class ToolStateError:
    """``metadata.kind`` types the failure: error, aborted, timeout, cancelled or denied."""

    TAG: ClassVar[str] = "error"
    TAG_FIELD: ClassVar[str] = "status"
    input: JSON
    error: str
    time: ErrorTime
    metadata: JSON | None = None


ToolState = ToolStatePending | ToolStateRunning | ToolStateCompleted | ToolStateError


@attrs.frozen
class ToolApproval:
    """The approval step (Vercel AI SDK states), absent when none was asked."""

    state: Literal["requested", "approved", "denied"]
    reason: str | None = None


@attrs.frozen
class ToolPart(PartBase):
    TAG: ClassVar[str] = "tool"
    call_id: str
    tool: str
    state: ToolState
    metadata: JSON | None = None
    approval: ToolApproval | None = None
    # The arguments exactly as the model wrote them (the log's tool.input_delta
    # fragments, or tool.added's raw), kept once the call ran: the renders send them
    # byte for byte. None when no text came (the input was given whole).
    raw: str | None = None


@attrs.frozen
class StepStartPart(PartBase):
    TAG: ClassVar[str] = "step-start"
    snapshot: str | None = None


@attrs.frozen
class StepFinishPart(PartBase):
    TAG: ClassVar[str] = "step-finish"
    reason: str
    cost: float
    tokens: Tokens
    snapshot: str | None = None


@attrs.frozen
class SnapshotPart(PartBase):
    TAG: ClassVar[str] = "snapshot"
    snapshot: str


@attrs.frozen
class PatchPart(PartBase):
    TAG: ClassVar[str] = "patch"
    hash: str
    files: list[str]


@attrs.frozen
class AgentPart(PartBase):
    TAG: ClassVar[str] = "agent"
    name: str
    source: SourceText | None = None


@attrs.frozen
class SubtaskPart(PartBase):
    TAG: ClassVar[str] = "subtask"
    prompt: str
    description: str
    agent: str
    model: ModelRef | None = None
    command: str | None = None


@attrs.frozen
class RetryTime:
    created: int


@attrs.frozen
class RetryPart(PartBase):
    TAG: ClassVar[str] = "retry"
    attempt: int
    error: MessageError
    time: RetryTime


@attrs.frozen
class CompactionPart(PartBase):
    TAG: ClassVar[str] = "compaction"
    auto: bool
    overflow: bool | None = None


Part = (
    TextPart
    | ReasoningPart
    | FilePart
    | ToolPart
    | StepStartPart
    | StepFinishPart
    | SnapshotPart
    | PatchPart
    | AgentPart
    | SubtaskPart
    | RetryPart
    | CompactionPart
)


@attrs.frozen
class WithParts:
    info: MessageInfo
    parts: list[Part]


__all__ = [
    "JSON",
    "AgentPart",
    "AssistantInfo",
    "CacheTokens",
    "CompactionPart",
    "CompletedTime",
    "ErrorTime",
    "FilePart",
    "FilePartSource",
    "FileSource",
    "MessageError",
    "MessageInfo",
    "MessageTime",
    "ModelRef",
    "Part",
    "PartBase",
    "PartTime",
    "PatchPart",
    "PathInfo",
    "ReasoningPart",
    "ReasoningTime",
    "ResourceSource",
    "RetryPart",
    "RetryTime",
    "RunningTime",
    "SnapshotPart",
    "SourceText",
    "StepFinishPart",
    "StepStartPart",
    "SubtaskPart",
    "SymbolSource",
    "TextPart",
    "Tokens",
    "ToolApproval",
    "ToolPart",
    "ToolState",
    "ToolStateCompleted",
    "ToolStateError",
    "ToolStatePending",
    "ToolStateRunning",
    "UserInfo",
    "UserSummary",
    "WithParts",
]
