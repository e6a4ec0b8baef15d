"""The shapes of a saved Q CLI ``ConversationState``, declared as msgspec Structs.

``normalize`` brings every history to the newest shape, then checks the whole save
against :class:`Conversation` once: a field of the wrong type is refused naming its
JSON path (msgspec's ``ValidationError``: ``at `$.history[2].user.timestamp```).
The importer then reads the fields it interprets from the Structs; the parts it keeps
verbatim (a user message compared whole, a result's blocks, request metadata, the
environment) it keeps as the raw values they were saved as. Unknown fields are
ignored and optional fields may be missing or null, as Q CLI's own serde reads them.
``gc=False``: what JSON decodes holds no cycles.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ToolResult(msgspec.Struct, gc=False):
    # Missing is refused where the result is read (a null one is kept, and answers nothing).
    tool_use_id: str | msgspec.UnsetType | None = msgspec.UNSET
    # Each block is one variant (``{"Text": ...}``, ``{"Json": ...}``): kept verbatim.
    content: list[dict[str, Any]] | None = None
    status: Any = None


class Results(msgspec.Struct, gc=False):
    tool_use_results: list[ToolResult] | None = None
    prompt: str | None = None


class PromptBody(msgspec.Struct, gc=False):
    prompt: str | None = None


class UserContent(msgspec.Struct, gc=False):
    """UserMessageContent: one of the variants (checked by the importer)."""

    Prompt: PromptBody | None = None
    ToolUseResults: Results | None = None
    CancelledToolUses: Results | None = None


class User(msgspec.Struct, gc=False):
    content: UserContent | None = None
    # Read only on a prompt (a tool-result message's are noted, not read): their type is
    # checked where a prompt is imported, not here.
    timestamp: Any = None
    additional_context: Any = None
    # Kept verbatim (the conversation's environment is the first user's).
    env_context: Any = None
    images: Any = None


class ToolCall(msgspec.Struct, gc=False):
    # Read only on a ToolUse message's uses (a missing one is refused there); their types
    # are checked by the event they become.
    id: Any = msgspec.UNSET
    name: Any = msgspec.UNSET
    # Kept verbatim in the tool part's metadata.
    args: Any = None
    orig_name: Any = None
    # Missing reads as ``args``; a null differs from it.
    orig_args: Any = msgspec.UNSET


class AssistantBody(msgspec.Struct, gc=False):
    message_id: Any = None  # kept verbatim in the text part's metadata
    content: Any = None  # an empty value of any type reads as no text
    tool_uses: list[ToolCall] | None = None
    thinking: Any = None


class Thinking(msgspec.Struct, gc=False):
    """ReasoningContentForHistory: kept whole in the reasoning part's metadata; these two
    are read (a signature only when it is a string)."""

    text: Any = None
    signature: Any = None


class Assistant(msgspec.Struct, gc=False):
    """AssistantMessage: one of the variants (checked by the importer)."""

    Response: AssistantBody | None = None
    ToolUse: AssistantBody | None = None


class RequestMetadata(msgspec.Struct, gc=False):
    request_start_timestamp_ms: int | None = None
    stream_end_timestamp_ms: int | None = None


class Entry(msgspec.Struct, gc=False):
    user: User
    assistant: Assistant
    request_metadata: RequestMetadata | None = None


class ToolSpec(msgspec.Struct, gc=False):
    name: str
    description: str | None = None
    input_schema: Any = None  # its "json" object is the tool's schema, copied


class ContextManager(msgspec.Struct, gc=False):
    paths: list[str] | None = None


class LineTracker(msgspec.Struct, gc=False):
    before_fswrite_lines: int = 0
    after_fswrite_lines: int = 0
    # Missing reads as "the same as after"; a null differs from it (as before).
    prev_fswrite_lines: int | msgspec.UnsetType | None = msgspec.UNSET
    lines_added_by_agent: int = 0
    lines_removed_by_agent: int = 0
    is_first_write: Any = None


class Checkpoint(msgspec.Struct, gc=False):
    # Read only when the checkpoint is placed (an unplaced one is noted by its tag):
    # their types are checked by the event it becomes.
    tag: Any = None
    timestamp: Any = None
    description: Any = None
    is_turn: Any = True
    tool_name: Any = None
    # Compared whole with the history where the checkpoint is placed, never read.
    history_snapshot: list[Any] = []


class CheckpointManager(msgspec.Struct, gc=False):
    checkpoints: list[Checkpoint] | None = None


class Tangent(msgspec.Struct, gc=False):
    main_history: list[Entry] = []
    main_next_message: User | None = None
    main_transcript: list[str] | None = None
    main_latest_summary: Any = None
    # Missing means "not saved" (the tangent takes the time before it); a null is refused
    # where it is read, as a time of the wrong type.
    tangent_start_time: Any = msgspec.UNSET


class Conversation(msgspec.Struct, gc=False):
    conversation_id: str
    history: list[Entry] = []
    next_message: User | None = None
    transcript: list[str] | None = None
    # Each group's specs are ``{"ToolSpecification": {...}}`` variants.
    tools: dict[str, list[dict[str, ToolSpec]]] | None = None
    context_manager: ContextManager | None = None
    file_line_tracker: dict[str, LineTracker] | None = None
    checkpoint_manager: CheckpointManager | None = None
    tangent_state: Tangent | None = None
    model_info: dict[str, Any] | None = None
    model: str | None = None
    latest_summary: Any = None
    mcp_enabled: Any = True
    context_message_length: Any = None  # recomputed, only noted


def check(data: dict[str, Any]) -> Conversation:
    """``data`` (histories already in the newest shape) read as a :class:`Conversation`;
    a field of the wrong type raises ``msgspec.ValidationError`` naming its path."""
    return msgspec.convert(data, Conversation)
