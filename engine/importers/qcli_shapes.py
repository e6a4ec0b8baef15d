"""The shapes of a saved Q CLI ``ConversationState``, declared as msgspec Structs.

:func:`check` reads the whole save once, as saved: a history entry of either
generation (a ``[user, assistant]`` pair or a ``{user, assistant, request_metadata}``
object), a message content or assistant message of exactly one known variant, a field
of the wrong type, are refused naming the JSON path (msgspec's ``ValidationError``:
``at `$.history[2].user.timestamp```). The importer then reads the fields it
interprets from the Structs; the parts it keeps verbatim (a user message or history
compared whole, a result's blocks, request metadata, the environment) it keeps as the
raw values they were saved as. Unknown fields are ignored and optional fields may be
missing or null, as Q CLI's own serde reads them. ``gc=False``: what JSON decodes holds
no cycles.

Two readings of an entry: the histories, next messages and tangent the import walks
are read strictly (:class:`Turn`, :class:`Message`, :class:`Reply`, :class:`Content`:
one known variant, else refused, as the walk always refused it); a checkpoint's
snapshot is only compared whole with the history, never walked, so of its entries only
the generation is checked (:data:`Snapshot`), as before.
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


class RequestMetadata(msgspec.Struct, gc=False):
    request_start_timestamp_ms: int | None = None
    stream_end_timestamp_ms: int | None = None


class SnapshotEntry(msgspec.Struct, gc=False):
    """An object entry of a checkpoint's snapshot: compared whole with the history, never
    walked, so only its generation is checked (a user object and an assistant of any
    value), as the importer always did."""

    user: dict[str, Any]
    assistant: Any


# Q CLI's serde writes an enum as ``{"Variant": {...}}`` (externally tagged). msgspec's
# tagged unions want the tag inside the object, so a walked enum is a Struct with one
# optional field per variant: an unknown key is refused by ``forbid_unknown_fields``, a
# variant that is not an object by its type, and "exactly one" by ``__post_init__``
# (msgspec names the path of a ValueError raised there). UNSET, not None: a null
# variant (``{"Prompt": null}``) is refused, as it always was.

def _one_variant(what: str, *variants: object) -> None:
    if sum(v is not msgspec.UNSET for v in variants) != 1:
        raise ValueError(f"{what} is an object with exactly one variant key")


class Content(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """UserMessageContent of a message the import walks: exactly one known variant."""

    Prompt: PromptBody | msgspec.UnsetType = msgspec.UNSET
    ToolUseResults: Results | msgspec.UnsetType = msgspec.UNSET
    CancelledToolUses: Results | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        _one_variant("a user message's content (Prompt, ToolUseResults or CancelledToolUses)",
                     self.Prompt, self.ToolUseResults, self.CancelledToolUses)

    @property
    def kind(self) -> str:
        return ("Prompt" if self.Prompt is not msgspec.UNSET else
                "ToolUseResults" if self.ToolUseResults is not msgspec.UNSET else
                "CancelledToolUses")

    @property
    def results(self) -> Results:
        """The results this content carries (none for a prompt)."""
        for body in (self.ToolUseResults, self.CancelledToolUses):
            if not isinstance(body, msgspec.UnsetType):
                return body
        return Results()


class Message(msgspec.Struct, kw_only=True, gc=False):
    """A user message the import walks (a history's, a next message)."""

    content: Content
    # Read only on a prompt (a tool-result message's are noted, not read): their type is
    # checked where a prompt is imported, not here.
    timestamp: Any = None
    images: Any = None  # kept verbatim
    # UNSET: a missing key differs from a null one where a bare turn is recognized.
    additional_context: Any = msgspec.UNSET
    # Kept verbatim (the conversation's environment is the first user's).
    env_context: Any = msgspec.UNSET

    @property
    def env(self) -> Any:
        """The environment as read everywhere else: missing is null."""
        return None if self.env_context is msgspec.UNSET else self.env_context


class Reply(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """AssistantMessage of an entry the import walks: exactly one known variant."""

    Response: AssistantBody | msgspec.UnsetType = msgspec.UNSET
    ToolUse: AssistantBody | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        _one_variant("an assistant message (Response or ToolUse)", self.Response, self.ToolUse)

    @property
    def kind(self) -> str:
        return "ToolUse" if self.ToolUse is not msgspec.UNSET else "Response"

    @property
    def body(self) -> AssistantBody:
        body = self.ToolUse if self.ToolUse is not msgspec.UNSET else self.Response
        assert not isinstance(body, msgspec.UnsetType)  # __post_init__: one is set
        return body


class Turn(msgspec.Struct, gc=False):
    """A history entry the import walks."""

    user: Message
    assistant: Reply
    request_metadata: RequestMetadata | None = None


# Either generation of an entry: a ``[user, assistant]`` pair (around v1.10) is an
# array, an object entry (v1.14 on) an object, so msgspec tells them apart untagged.
Walked = tuple[Message, Reply] | Turn
Snapshot = tuple[dict[str, Any], Any] | SnapshotEntry


def newest(said: Walked) -> Turn:
    """``said`` in the newest shape (a pair reads as an object without request metadata)."""
    if isinstance(said, tuple):
        user, assistant = said
        return Turn(user=user, assistant=assistant)
    return said


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
    # Compared whole with the history where the checkpoint is placed, never walked.
    history_snapshot: list[Snapshot] | None = None


class CheckpointManager(msgspec.Struct, gc=False):
    # The importer always read a false ``checkpoints`` (0, "", false, {}) as none, so
    # those still import; any other value that is not a list is refused, by its path.
    checkpoints: list[Checkpoint] | bool | int | float | str | dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoints, list):
            if self.checkpoints:
                raise ValueError("checkpoints is a list of checkpoints")
            self.checkpoints = None

    @property
    def placed(self) -> list[Checkpoint]:
        return self.checkpoints if isinstance(self.checkpoints, list) else []


class Tangent(msgspec.Struct, gc=False):
    main_history: list[Walked] | None = None
    main_next_message: Message | None = None
    main_transcript: list[str] | None = None
    main_latest_summary: Any = None
    # Missing means "not saved" (the tangent takes the time before it); a null is refused
    # where it is read, as a time of the wrong type.
    tangent_start_time: Any = msgspec.UNSET


class Conversation(msgspec.Struct, gc=False):
    conversation_id: str
    history: list[Walked] | None = None
    next_message: Message | None = None
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


def check(data: Any) -> Conversation:
    """``data`` (a parsed save, as saved) read as a :class:`Conversation`; a value of the
    wrong shape raises ``msgspec.ValidationError`` naming its path."""
    return msgspec.convert(data, Conversation)
