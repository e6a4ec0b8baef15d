"""Q CLI's message structures as frozen attrs classes, with the seed's field names.

``UserMessage`` / ``AssistantMessage`` / ``HistoryEntry`` mirror
``qcli-message-structure.ja.md``; the conversation-wide records
(``ConversationState`` and its parts) mirror ``qcli-conversation-state.ja.md``.
Rust enums become one class per variant and a union alias (``Prompt |
CancelledToolUses | ToolUseResults``); their JSON form is in
:mod:`projections.qcli.serialize`. Sequences are tuples so a view can be shared
between states without being copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import attrs

from engine import events as ev

JSON = dict[str, Any]

CANCELLED_TOOL_TEXT = "Tool use was cancelled by the user"
EMPTY_PROMPT = "Empty prompt"
REDACTED_TOOL_RESULT = "<tool result redacted>"
TIMED_OUT_RESPONSE = "Response timed out - message took too long to generate"
# What a tool result shows once its output was compacted (OpenCode's wording).
COMPACTED_TOOL_RESULT = "[Old tool result content cleared]"
DUMMY_TOOL_NAME = "dummy"

# --------------------------------------------------------------------------- user side


@attrs.frozen
class EnvState:
    operating_system: str | None = None
    current_working_directory: str | None = None


@attrs.frozen
class UserEnvContext:
    env_state: EnvState | None = None


@attrs.frozen
class TextBlock:
    """``ToolUseResultBlock::Text``."""

    text: str


@attrs.frozen
class JsonBlock:
    """``ToolUseResultBlock::Json``: any JSON value."""

    value: Any


ToolUseResultBlock = TextBlock | JsonBlock
ToolResultStatus = Literal["Success", "Error"]


@attrs.frozen
class ToolUseResult:
    tool_use_id: str
    content: tuple[ToolUseResultBlock, ...]
    status: ToolResultStatus


def cancelled_result(tool_use_id: str) -> ToolUseResult:
    """The result Q CLI gives a tool use the user cancelled (status error)."""
    return ToolUseResult(tool_use_id, (TextBlock(CANCELLED_TOOL_TEXT),), "Error")


@attrs.frozen
class Prompt:
    prompt: str


@attrs.frozen
class CancelledToolUses:
    prompt: str | None
    tool_use_results: tuple[ToolUseResult, ...]


@attrs.frozen
class ToolUseResults:
    tool_use_results: tuple[ToolUseResult, ...]


UserMessageContent = Prompt | CancelledToolUses | ToolUseResults


def with_results(content: UserMessageContent, results: tuple[ToolUseResult, ...]
                 ) -> UserMessageContent:
    """The same content variant carrying ``results`` (a prompt becomes cancelled uses)."""
    if isinstance(content, ToolUseResults):
        return ToolUseResults(results)
    return CancelledToolUses(content.prompt, results)


@attrs.frozen
class UserMessage:
    additional_context: str
    env_context: UserEnvContext
    content: UserMessageContent
    timestamp: str | None = None  # RFC 3339 with milliseconds and offset
    images: tuple[JSON, ...] | None = None

    def prompt(self) -> str | None:
        c = self.content
        return None if isinstance(c, ToolUseResults) else c.prompt

    def tool_use_results(self) -> tuple[ToolUseResult, ...] | None:
        c = self.content
        return None if isinstance(c, Prompt) else c.tool_use_results

    def has_tool_use_results(self) -> bool:
        return not isinstance(self.content, Prompt)


# --------------------------------------------------------------------------- assistant side


@attrs.frozen
class AssistantToolUse:
    id: str
    name: str  # as exposed to the model
    orig_name: str
    args: Any
    orig_args: Any


@attrs.frozen
class Response:
    message_id: str | None
    content: str
    # Newer saves' ReasoningContentForHistory (text, signature, redacted_content,
    # model_id), kept whole as read; absent (None) in older saves.
    thinking: JSON | None = None


@attrs.frozen
class ToolUse:
    message_id: str | None
    content: str
    tool_uses: tuple[AssistantToolUse, ...]
    thinking: JSON | None = None  # as on Response


AssistantMessage = Response | ToolUse


def tool_uses_of(message: AssistantMessage) -> tuple[AssistantToolUse, ...]:
    return message.tool_uses if isinstance(message, ToolUse) else ()


@attrs.frozen
class HistoryEntry:
    user: UserMessage
    assistant: AssistantMessage
    request_metadata: JSON | None = None


# --------------------------------------------------------------------------- conversation


# The model and the tool specifications are the events' own values (one declaration each).
ModelInfo = ev.ModelInfo
ToolSpec = ev.ToolSpec


@attrs.frozen
class ContextManager:
    """The sticky context files (paths or globs); their contents are read at send time."""

    paths: tuple[str, ...] = ()


@attrs.frozen
class FileLineTracker:
    """Q CLI's per-file record, as it stands after an agent write.

    The user's lines between two agent writes are this write's
    ``before_fswrite_lines`` minus the previous write's ``after_fswrite_lines``.
    """

    prev_fswrite_lines: int
    before_fswrite_lines: int
    after_fswrite_lines: int
    lines_added_by_agent: int
    lines_removed_by_agent: int
    is_first_write: bool

    def lines_by_agent(self) -> int:
        return self.after_fswrite_lines - self.before_fswrite_lines


class HistorySnapshot:
    """A checkpoint's history: a window over a list that is only ever appended to.

    Holding one costs O(1) (a list reference and two ints); ``entries()``
    materializes it. Equality compares the entries, so two folds of the same log
    compare equal although they share no lists.
    """

    __slots__ = ("_base", "_end", "_start")

    def __init__(self, base: list[HistoryEntry], start: int, end: int) -> None:
        self._base = base
        self._start = start
        self._end = end

    @classmethod
    def of(cls, entries: tuple[HistoryEntry, ...] | list[HistoryEntry]) -> HistorySnapshot:
        return cls(list(entries), 0, len(entries))

    def entries(self) -> tuple[HistoryEntry, ...]:
        return tuple(self._base[self._start:self._end])

    def __len__(self) -> int:
        return self._end - self._start

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self._base[self._start:self._end])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HistorySnapshot):
            return NotImplemented
        return len(self) == len(other) and self.entries() == other.entries()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistorySnapshot({len(self)} entries)"


@attrs.frozen
class Checkpoint:
    """A checkpoint: its tag and what it was taken for, and the history it restores."""

    tag: str
    timestamp: int  # ms since the epoch, from the event
    description: str
    is_turn: bool
    tool_name: str | None
    history_snapshot: HistorySnapshot


@attrs.frozen
class CheckpointManager:
    checkpoints: tuple[Checkpoint, ...] = ()

    def tag_index(self) -> dict[str, int]:
        return {c.tag: i for i, c in enumerate(self.checkpoints)}

    def current_turn(self) -> int:
        return sum(1 for c in self.checkpoints if c.is_turn)


@attrs.frozen
class ConversationCheckpoint:
    """``tangent_state``: the main conversation kept aside while in a tangent."""

    main_history: tuple[HistoryEntry, ...]
    main_next_message: UserMessage | None
    main_transcript: tuple[str, ...]
    main_latest_summary: tuple[str, JSON] | None
    tangent_start_time: int  # ms since the epoch, from the event


@attrs.frozen
class ConversationState:
    """Q CLI's ConversationState, serialized fields only (tool_manager and agents are
    runtime objects, rebuilt by whoever sends)."""

    conversation_id: str
    next_message: UserMessage | None = None
    history: tuple[HistoryEntry, ...] = ()
    valid_history_range: tuple[int, int] = (0, 0)
    transcript: tuple[str, ...] = ()
    tools: dict[str, tuple[ToolSpec, ...]] = attrs.field(factory=dict)
    context_manager: ContextManager | None = None
    context_message_length: int | None = None
    latest_summary: tuple[str, JSON] | None = None
    model: str | None = None  # deprecated: only read from old files
    model_info: ModelInfo | None = None
    file_line_tracker: dict[str, FileLineTracker] = attrs.field(factory=dict)
    checkpoint_manager: CheckpointManager | None = None
    mcp_enabled: bool = True
    tangent_state: ConversationCheckpoint | None = None

    def is_in_tangent_mode(self) -> bool:
        return self.tangent_state is not None

    def sendable_history(self) -> tuple[HistoryEntry, ...]:
        start, end = self.valid_history_range
        return self.history[start:end]
