"""The event catalog: every change to a session is one of these immutable structs.

This module is the single definition of each event type. The JSON / msgpack wire
format, ``docs/events.md`` and the transition tables all derive from it.

Every event carries the envelope fields of :class:`Event`. ``id``, ``session_id``,
``seq`` and ``time`` may be left empty by a writer of raw events: the log fills
them in when it appends (``seq`` is always assigned by the log).

No ``from __future__ import annotations`` here, on purpose: msgspec reads each
struct's annotations whenever it builds a decoder or a type description, and a
string annotation is evaluated again each time, once per class of the MRO (the
envelope's fields once for every event type). The door's tables, the typed
decoders and the snapshot codec's fingerprint spent most of their build in that;
with the annotations already objects it is a dictionary read
(docs/performance.md, "Start-up, second pass"; tests/engine/test_events_annotations.py).
"""

from typing import Any, ClassVar, Final, Literal, get_args

import msgspec

Role = Literal["user", "assistant"]
# ``truncated``: the model's output limit cut the call's arguments off, so it never ran.
ToolFailureKind = Literal["error", "aborted", "timeout", "cancelled", "denied", "truncated"]
MessageErrorKind = Literal[
    "aborted", "output_length", "context_overflow", "api", "auth", "timeout", "unknown"
]
JSONObject = dict[str, Any]
GuardrailStage = Literal["input", "output", "tool_input", "tool_output"]

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
    """BR-11: only produced when the context is compacted; a user message's only (an
    assistant message with one is refused). convlog records a summary where the source
    recorded one; it never generates one."""

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
            omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Envelope shared by every event.

    Events are never tracked by the garbage collector (``gc=False``, inherited by
    every type): a log holds millions, and a collection would walk each one that
    holds a dict. That is sound because no cycle can pass through an event: it is
    frozen, so only a mutable value inside it could refer back to it, and its
    values are JSON data. Decoded events are trees, and the store's door refuses an
    event whose data holds anything else or loops back on itself (a reference
    cycle fails the canonical encode), so no stored event holds a cycle. Only
    code that builds an event, then puts that event inside its own dict, and
    drops it unstored, would leak the two (``tests/engine/test_gc_free.py``).

    ``v`` is the schema version of the event's type. Its default stays 1 forever
    (bytes that omit it were written as version 1); a type whose schema changes
    writes its new version explicitly.

    The facts about a type live on the type (msgspec keeps behaviour in class
    keywords; its metaclass takes no others, so the rest are class variables):
    ``tag`` (the ``type`` string, a msgspec keyword), ``schema_version`` (the
    version written today), ``entity`` (the entity of :mod:`engine.deciders` whose
    table has its rows), ``default_actor`` (who writes it when the writer does
    not say) and the docstring. Every catalog below is derived from them.
    """

    schema_version: ClassVar[int] = 1
    entity: ClassVar[str] = ""
    default_actor: ClassVar[str] = "assistant"

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

    entity = "message"

    role: Role
    agent: str = ""
    model: ModelRef | None = None
    system: str | None = None
    tools: dict[str, bool] | None = None
    variant: str | None = None
    summary: UserSummary | None = None
    path: PathInfo | None = None
    parent_id: str | None = None
    metadata: JSONObject | None = None  # provider data (the response envelope as sent)


class MessageCompleted(MessageEvent, frozen=True, tag="message.completed"):
    """The message closes; no part may be added after it (BR-14 sets time.completed).
    Cost and tokens are an assistant's (BR-12, BR-13): a user message completes without."""

    entity = "message"

    cost: float = 0.0
    tokens: Tokens | None = None
    finish: str | None = None
    error: MessageError | None = None
    metadata: JSONObject | None = None  # merged per provider key into the start's metadata


class MessageStreamEnded(MessageEvent, frozen=True, tag="message.stream_ended"):
    """The provider's stream of an assistant message ended: what it said about the
    message as a whole (the stop reason, the final usage, the provider's envelope such
    as the Responses status and each output item's status), durable when the stream
    ends whether or not the message completes later (it may wait for its tools).
    Folded into the message's info as a completion's fields are; a completion that
    follows may repeat them, and one that leaves them out keeps these."""

    entity = "message"

    finish: str | None = None
    tokens: Tokens | None = None
    metadata: JSONObject | None = None  # merged per provider key into the start's metadata


# --------------------------------------------------------------------------- text and reasoning


class TextAdded(PartEvent, frozen=True, tag="text.added"):
    """A text part opens in state ``streaming``; ``part.ended`` makes it ``done``."""

    entity = "stream part"

    text: str = ""
    synthetic: bool = False
    ignored: bool = False
    metadata: JSONObject | None = None


class TextDelta(PartEvent, frozen=True, tag="text.delta"):
    """Appends text to a streaming text part: one small event, the part's text is never
    copied.
    """

    entity = "stream part"

    delta: str


class ReasoningAdded(PartEvent, frozen=True, tag="reasoning.added"):
    """A reasoning (thinking) part opens in state ``streaming``."""

    entity = "stream part"

    text: str = ""
    metadata: JSONObject | None = None


class ReasoningDelta(PartEvent, frozen=True, tag="reasoning.delta"):
    """Appends text to a streaming reasoning part."""

    entity = "stream part"

    delta: str


class PartEnded(PartEvent, frozen=True, tag="part.ended"):
    """A streaming text or reasoning part is done; ``metadata`` is merged (e.g. a signature)."""

    entity = "stream part"

    metadata: JSONObject | None = None


# --------------------------------------------------------------------------- files


class FileAdded(PartEvent, frozen=True, tag="file.added"):
    """A file part (an attachment, an image, a referenced file); complete when added."""

    entity = "part"

    mime: str
    url: str
    filename: str | None = None
    source: FilePartSource | None = None


# --------------------------------------------------------------------------- tools


class ToolAdded(PartEvent, frozen=True, tag="tool.added"):
    """A tool call appears in state ``pending`` (BR-06: ``raw`` keeps the raw arguments)."""

    entity = "tool"

    call_id: str
    tool: str
    input: JSONObject = msgspec.field(default_factory=dict)
    raw: str = ""
    metadata: JSONObject | None = None


class ToolInputDelta(PartEvent, frozen=True, tag="tool.input_delta"):
    """A raw JSON fragment of the tool's arguments, appended to ``raw`` while pending."""

    entity = "tool"

    fragment: str


class ToolInputReady(PartEvent, frozen=True, tag="tool.input_ready"):
    """The arguments are complete and parsed (pending stays pending)."""

    entity = "tool"

    input: JSONObject


class ToolApprovalRequested(PartEvent, frozen=True, tag="tool.approval_requested"):
    """The call needs the user's approval before it may run."""

    entity = "tool"
    default_actor = "system"

    reason: str | None = None
    metadata: JSONObject | None = None


class ToolApprovalGranted(PartEvent, frozen=True, tag="tool.approval_granted"):
    """The user approved the call; it may start now."""

    entity = "tool"
    default_actor = "user"

    reason: str | None = None


class ToolApprovalDenied(PartEvent, frozen=True, tag="tool.approval_denied"):
    """The user refused the call: the tool ends in ``error`` with kind ``denied``."""

    entity = "tool"
    default_actor = "user"

    reason: str = ""


class ToolStarted(PartEvent, frozen=True, tag="tool.started"):
    """pending -> running. ``time.start`` is the event time (BR-07).

    ``input`` replaces the pending input when given; ``deadline`` (ms) lets
    ``Session.expire`` fail the tool with kind ``timeout``.
    """

    entity = "tool"
    default_actor = "tool"

    input: JSONObject | None = None
    title: str | None = None
    metadata: JSONObject | None = None
    deadline: int | None = None


class ToolProgress(PartEvent, frozen=True, tag="tool.progress"):
    """running -> running: a new title and/or metadata (merged)."""

    entity = "tool"
    default_actor = "tool"

    title: str | None = None
    metadata: JSONObject | None = None


class ToolCompleted(PartEvent, frozen=True, tag="tool.completed"):
    """running -> completed (BR-08 time.end, BR-09 output not empty)."""

    entity = "tool"
    default_actor = "tool"

    output: str
    title: str = ""
    metadata: JSONObject | None = None
    attachments: list[Attachment] = msgspec.field(default_factory=list)


class ToolFailed(PartEvent, frozen=True, tag="tool.failed"):
    """-> error (BR-08 time.end, BR-10 a description). ``kind`` types the failure."""

    entity = "tool"
    default_actor = "tool"

    error: str
    kind: ToolFailureKind = "error"
    metadata: JSONObject | None = None


class ToolOutputCompacted(PartEvent, frozen=True, tag="tool.output_compacted"):
    """A completed tool's output is cleared from what the model sees (time.compacted)."""

    entity = "tool"
    default_actor = "tool"


# --------------------------------------------------------------------------- steps and the rest


class StepStarted(PartEvent, frozen=True, tag="step.started"):
    """A step (one model call) begins; a ``step.finished`` part must follow before the
    next step.
    """

    entity = "step"

    snapshot: str | None = None


class StepFinished(PartEvent, frozen=True, tag="step.finished"):
    """A step ends: why (``reason``, e.g. ``tool-calls`` or ``stop``), its cost and its
    token usage.
    """

    entity = "step"

    reason: str
    cost: float = 0.0
    tokens: Tokens = msgspec.field(default_factory=Tokens)
    snapshot: str | None = None


class SnapshotAdded(PartEvent, frozen=True, tag="snapshot.added"):
    """A snapshot part: the id of a workspace snapshot."""

    entity = "part"

    snapshot: str


class PatchAdded(PartEvent, frozen=True, tag="patch.added"):
    """A patch part: the files a step changed and the snapshot hash."""

    entity = "part"

    hash: str
    files: list[str] = msgspec.field(default_factory=list)


class AgentAdded(PartEvent, frozen=True, tag="agent.added"):
    """An agent part: the user mentioned an agent."""

    entity = "part"

    name: str
    source: SourceText | None = None


class SubtaskAdded(PartEvent, frozen=True, tag="subtask.added"):
    """A subtask part: work handed to another agent."""

    entity = "part"

    prompt: str
    description: str
    agent: str
    model: ModelRef | None = None
    command: str | None = None


class RetryAdded(PartEvent, frozen=True, tag="retry.added"):
    """A retry part: a failed model call that is tried again."""

    entity = "part"

    attempt: int
    error: MessageError


class CompactionAdded(PartEvent, frozen=True, tag="compaction.added"):
    """A compaction part: marks where the context was compacted."""

    entity = "part"

    auto: bool = False
    overflow: bool | None = None


# --------------------------------------------------------------------------- conversation
# Conversation-level events (Q CLI's ConversationState). They address the
# session's single conversation, not a message, so they carry no message_id.

ToolOrigin = Literal["builtin", "custom", "mcp"]
TangentTail = Literal["none", "last_entry", "thread"]


class ModelInfo(_Value, frozen=True):
    """The model a conversation uses (Q CLI's ``model_info``)."""

    model_id: str
    model_name: str | None = None
    description: str | None = None
    context_window_tokens: int | None = None
    rate_multiplier: float | None = None
    rate_unit: str | None = None


class ToolSpec(_Value, frozen=True):
    """A tool offered to the model: its name, description and JSON input schema."""

    name: str
    description: str = ""
    input_schema: JSONObject = msgspec.field(default_factory=dict)


class ConversationEvent(Event, frozen=True, kw_only=True):
    """Base of the events that change the conversation as a whole (no message id)."""


class ConversationCreated(ConversationEvent, frozen=True, tag="conversation.created"):
    """The session's conversation opens; every other conversation event needs it first.

    ``os`` and ``cwd`` become the environment context of user messages;
    ``utc_offset_minutes`` is the offset their timestamps are rendered in.
    """

    entity = "conversation"
    default_actor = "system"

    conversation_id: str
    model_info: ModelInfo | None = None
    mcp_enabled: bool = True
    os: str = ""
    cwd: str = ""
    utc_offset_minutes: int = 0


class ModelSelected(ConversationEvent, frozen=True, tag="model.selected"):
    """The user selects another model (``/model``)."""

    entity = "conversation"
    default_actor = "user"

    model_info: ModelInfo


class ToolsChanged(ConversationEvent, frozen=True, tag="tools.changed"):
    """The tools of one origin are replaced (an empty list removes them).

    ``server`` names the MCP server for origin ``mcp``.
    """

    entity = "conversation"
    default_actor = "system"

    origin: ToolOrigin
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    server: str | None = None


class ContextFileAdded(ConversationEvent, frozen=True, tag="context_file.added"):
    """A sticky context file (a path or glob) is added to the context manager."""

    entity = "context file"
    default_actor = "user"

    path: str


class ContextFileRemoved(ConversationEvent, frozen=True, tag="context_file.removed"):
    """A sticky context file is removed from the context manager."""

    entity = "context file"
    default_actor = "user"

    path: str


class NextMessageSet(ConversationEvent, frozen=True, tag="next_message.set"):
    """The next user message to send is set explicitly (its prompt and extra context)."""

    entity = "conversation"
    default_actor = "user"

    prompt: str
    additional_context: str = ""


class NextMessageCleared(ConversationEvent, frozen=True, tag="next_message.cleared"):
    """The pending next user message is dropped."""

    entity = "conversation"
    default_actor = "user"


class HistoryCompacted(ConversationEvent, frozen=True, tag="history.compacted"):
    """``/compact``: a summary replaces all but the last ``keep_last`` history entries.

    The log keeps every message; only the conversation view drops the entries.
    """

    entity = "conversation"
    default_actor = "user"

    summary: str
    request_metadata: JSONObject | None = None
    keep_last: int = 0
    custom_instruction: str | None = None


class HistoryCleared(ConversationEvent, frozen=True, tag="history.cleared"):
    """``/clear``: the history, the next message and the summary are reset."""

    entity = "conversation"
    default_actor = "user"


class TangentEntered(ConversationEvent, frozen=True, tag="tangent.entered"):
    """Tangent mode starts: the main conversation is kept aside (not cleared)."""

    entity = "tangent"
    default_actor = "user"


class TangentExited(ConversationEvent, frozen=True, tag="tangent.exited"):
    """Tangent mode ends and the main conversation comes back.

    ``tail`` keeps part of the tangent: nothing, its last exchange, or its whole thread.
    """

    entity = "tangent"
    default_actor = "user"

    tail: TangentTail = "none"


class CheckpointCreated(ConversationEvent, frozen=True, tag="checkpoint.created"):
    """A named point the conversation can be restored to (O(1): no copy of history)."""

    entity = "checkpoint"
    default_actor = "system"

    tag: str
    description: str = ""
    is_turn: bool = True
    tool_name: str | None = None


class CheckpointRestored(ConversationEvent, frozen=True, tag="checkpoint.restored"):
    """The conversation is rewound to a checkpoint; the log keeps what came after."""

    entity = "checkpoint"
    default_actor = "user"

    tag: str


class FileLinesChanged(ConversationEvent, frozen=True, tag="file_lines.changed"):
    """An agent write to a file, for the file line tracker (agent vs user lines).

    ``before_lines`` is the file's line count just before the write: lines the user
    changed since the agent's previous write show up as its difference to that
    write's ``after_lines``.
    """

    entity = "conversation"
    default_actor = "tool"

    path: str
    before_lines: int
    after_lines: int
    lines_added_by_agent: int = 0
    lines_removed_by_agent: int = 0


class TranscriptNoted(ConversationEvent, frozen=True, tag="transcript.noted"):
    """A line for the human-readable transcript only (an error shown in the chat)."""

    entity = "conversation"
    default_actor = "system"

    text: str


class TranscriptReplaced(ConversationEvent, frozen=True, tag="transcript.replaced"):
    """The transcript is replaced whole (an importer restoring a saved transcript)."""

    entity = "conversation"
    default_actor = "system"

    lines: list[str] = msgspec.field(default_factory=list)


class SessionImported(ConversationEvent, frozen=True, tag="session.imported"):
    """The session came from another tool's record (``convlog import``); its first event.

    ``format`` is the importer (``claude-code``, ``codex``, ...), ``source`` the
    source file's name (not its path: a path names the user's home, and the same
    file imported from another place must give the same event), ``original_id``
    the tool's own session id ("" when it has none).
    """

    entity = "import"
    default_actor = "system"

    format: str
    source: str
    original_id: str
    tool_version: str = ""
    metadata: JSONObject | None = None


class SessionTitled(ConversationEvent, frozen=True, tag="session.titled"):
    """The session's name, as the tool that recorded it named it (a rename: the latest wins).

    ``title`` is the name; ``source`` says where it came from (``claude-code
    custom-title`` for a ``/rename``, ``codex thread_name``, ``opencode title``, ...).
    A session without one is listed by its first prompt.
    """

    entity = "title"
    default_actor = "system"

    title: str
    source: str = ""


class ItemPopped(ConversationEvent, frozen=True, tag="session.item_popped"):
    """A framework's session memory drops its last item (the Agents SDK's ``pop_item``).

    ``event_id`` names the event that recorded the item. The log keeps that event;
    the memory's item view forgets the item.
    """

    entity = "conversation"
    default_actor = "system"

    event_id: str
    memory: str = ""  # whose memory: "openai_agents"


class ItemsCleared(ConversationEvent, frozen=True, tag="session.items_cleared"):
    """A framework's session memory is emptied (the Agents SDK's ``clear_session``).

    The log keeps every item; the memory's item view starts again from nothing.
    """

    entity = "conversation"
    default_actor = "system"

    memory: str = ""


class RunUsageRecorded(ConversationEvent, frozen=True, tag="run.usage_recorded"):
    """A framework reports what one run of its agent used (the Agents SDK's
    ``RunResult.context_wrapper.usage``, kept by ``store_run_usage``).

    ``turn`` names the event that recorded the user message of the turn the run
    answered: the usage belongs to that turn while the memory holds it, and a later
    report for the same turn replaces it. ``details`` keeps the framework's own
    token details as it gave them (``input_tokens_details``, ...).
    """

    entity = "conversation"
    default_actor = "system"

    turn: str
    requests: int = 0
    tokens: Tokens = msgspec.field(default_factory=Tokens)
    total: int = 0
    details: JSONObject | None = None
    memory: str = ""  # whose memory: "openai_agents"


class GraphCheckpointSaved(ConversationEvent, frozen=True, tag="graph.checkpoint_saved"):
    """A graph framework saved a checkpoint of its state (LangGraph's checkpointer ``put``).

    ``checkpoint`` is the checkpoint without its channel values (its id, time,
    channel versions, versions seen); ``values`` holds each channel value whose
    version is new here, serialized by the framework (``{"version", "type",
    "data"}``, data in base64), so a value written once is not written again by
    the checkpoints that keep it. ``ns`` is the subgraph's namespace ("" for the
    root graph); ``parent_id`` the checkpoint this one follows ("" for none).
    """

    entity = "conversation"
    default_actor = "system"

    checkpoint_id: str
    thread: str = ""  # the framework's thread id (its convlog session is derived from it)
    ns: str = ""
    parent_id: str = ""
    checkpoint: JSONObject = msgspec.field(default_factory=dict)
    metadata: JSONObject | None = None
    values: JSONObject | None = None


class GraphWritesSaved(ConversationEvent, frozen=True, tag="graph.writes_saved"):
    """A graph task's pending writes, saved against a checkpoint (LangGraph's
    ``put_writes``): each ``{"idx", "channel", "type", "data"}``, serialized by the
    framework. A write at an index already saved for the task is kept, except the
    framework's special writes (negative indexes: errors, interrupts), which replace.
    """

    entity = "conversation"
    default_actor = "system"

    checkpoint_id: str
    task_id: str
    thread: str = ""
    ns: str = ""
    task_path: str = ""
    writes: list[JSONObject] = msgspec.field(default_factory=list)


class GuardrailTripped(ConversationEvent, frozen=True, tag="guardrail.tripped"):
    """An agent framework's guardrail tripped and stopped the run (an input or output check).

    ``stopped_message`` is the assistant message the run was writing when it
    stopped (empty when none); that message and its tools are settled by the
    recorder. (Not ``message_id``: a conversation event names no message of its own.)
    """

    entity = "conversation"
    default_actor = "system"

    guardrail: str
    stage: GuardrailStage
    agent: str = ""
    stopped_message: str = ""
    info: JSONObject | None = None  # what the guardrail reported, as JSON


# --------------------------------------------------------------------------- mailbox
# Agent-to-agent messages (engine.mailbox decides them): projects, agents, session
# tokens and messages of every project live in one mailbox log per store.


class MailboxEvent(Event, frozen=True, kw_only=True):
    """Base of the mailbox events (projects, agents, tokens, messages between agents)."""


class ProjectCreated(MailboxEvent, frozen=True, tag="project.created"):
    """A project agents work in; messages never leave it. An empty
    ``working_directory`` means not set yet (sending then fails with
    ``working_directory_not_set``, as in the seed)."""

    entity = "project"
    default_actor = "system"

    project_id: str
    name: str = ""
    working_directory: str = ""


class ProjectDirectorySet(MailboxEvent, frozen=True, tag="project.directory_set"):
    """A project's working directory is set or changed."""

    entity = "project"
    default_actor = "system"

    project_id: str
    working_directory: str


class ProjectTeamConfigSet(MailboxEvent, frozen=True, tag="project.team_config_set"):
    """The Claude Code Agent Teams ``config.json`` a project was imported from,
    verbatim (team name, creation time, lead, members with their panes, models and
    prompts), so an export writes it back unchanged. Logged again only when the
    file changed since the last import."""

    entity = "project"
    default_actor = "system"

    project_id: str
    config: JSONObject


class AgentRegistered(MailboxEvent, frozen=True, tag="agent.registered"):
    """An agent exists (in no project yet). ``passkey_hash``: a salted scrypt verifier
    of the credential ``authenticate`` asks for (``engine.mailbox_credentials``;
    never the credential, and never printed). Without one the agent cannot
    authenticate over MCP until a credential is set."""

    entity = "agent"
    default_actor = "system"

    agent_id: str
    name: str = ""
    passkey_hash: str | None = None


class AgentCredentialSet(MailboxEvent, frozen=True, tag="agent.credential_set"):
    """An agent's credential is set or replaced (``convlog mailbox credential``):
    ``passkey_hash`` is its salted scrypt verifier, never the credential. Tokens
    issued before stay valid until they expire or are revoked."""

    entity = "agent"
    default_actor = "system"

    agent_id: str
    passkey_hash: str


class AgentAssigned(MailboxEvent, frozen=True, tag="agent.assigned"):
    """An agent joins a project: it may send to and receive from its other agents."""

    entity = "assignment"
    default_actor = "system"

    project_id: str
    agent_id: str


class AgentUnassigned(MailboxEvent, frozen=True, tag="agent.unassigned"):
    """An agent leaves a project; its tokens for that project stop working."""

    entity = "assignment"
    default_actor = "system"

    project_id: str
    agent_id: str


class TokenIssued(MailboxEvent, frozen=True, tag="token.issued"):
    """``authenticate`` gave an agent a session token for one project.

    Only the token's SHA-256 is logged; ``expires_at`` is in ms since the epoch.
    """

    entity = "token"
    default_actor = "system"

    token_hash: str
    project_id: str
    agent_id: str
    expires_at: int


class TokenRevoked(MailboxEvent, frozen=True, tag="token.revoked"):
    """A session token stops working before it expires."""

    entity = "token"
    default_actor = "system"

    token_hash: str


class MailSent(MailboxEvent, frozen=True, tag="mail.sent"):
    """One message from an agent to one or more agents of its project: one event,
    one delivery state per receiver. The envelope ``time`` is its creation time.

    ``reply_to`` names the message it answers (``respond_chat``);
    ``client_message_id`` makes a retried send idempotent. ``summary`` and ``color``
    are what Claude Code Agent Teams inboxes carry (a preview line, the sender's
    colour), kept so an imported team's inboxes export back as they were.
    """

    entity = "delivery"

    message_id: str
    project_id: str
    sender_id: str
    receivers: list[str]
    content: str
    related_task_id: str | None = None
    reply_to: str | None = None
    client_message_id: str | None = None
    broadcast: bool = False
    summary: str | None = None
    color: str | None = None


class MailDelivered(MailboxEvent, frozen=True, tag="mail.delivered"):
    """The receiver fetched the message (``get_pending_messages``)."""

    entity = "delivery"

    message_id: str
    agent_id: str


class MailRead(MailboxEvent, frozen=True, tag="mail.read"):
    """The receiver marked the message read, or answered it (a read receipt)."""

    entity = "delivery"

    message_id: str
    agent_id: str


# --------------------------------------------------------------------------- the union

AnyEvent = (
    MessageStarted
    | MessageCompleted
    | MessageStreamEnded
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
    | ConversationCreated
    | ModelSelected
    | ToolsChanged
    | ContextFileAdded
    | ContextFileRemoved
    | NextMessageSet
    | NextMessageCleared
    | HistoryCompacted
    | HistoryCleared
    | TangentEntered
    | TangentExited
    | CheckpointCreated
    | CheckpointRestored
    | FileLinesChanged
    | TranscriptNoted
    | TranscriptReplaced
    | SessionImported
    | SessionTitled
    | ItemPopped
    | ItemsCleared
    | GuardrailTripped
    | RunUsageRecorded
    | GraphCheckpointSaved
    | GraphWritesSaved
    | ProjectCreated
    | ProjectDirectorySet
    | ProjectTeamConfigSet
    | AgentRegistered
    | AgentCredentialSet
    | AgentAssigned
    | AgentUnassigned
    | TokenIssued
    | TokenRevoked
    | MailSent
    | MailDelivered
    | MailRead
)

# Everything below is derived from the declarations above: add an event type by
# declaring its class (with its facts) and adding it to ``AnyEvent``.
EVENT_TYPES: Final[tuple[type[Event], ...]] = get_args(AnyEvent)


def tag_of(cls: type[Event]) -> str:
    """The ``type`` string of an event class."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


EVENT_BY_TAG: Final[dict[str, type[Event]]] = {tag_of(c): c for c in EVENT_TYPES}

# Which actor writes an event when the writer does not say (data, used by the log).
DEFAULT_ACTOR: Final[dict[type[Event], str]] = {c: c.default_actor for c in EVENT_TYPES}

# The conversation events (no message behind them).
CONVERSATION_EVENT_TYPES: Final[frozenset[type[Event]]] = frozenset(
    c for c in EVENT_TYPES if issubclass(c, ConversationEvent)
)

# The mailbox events (engine.mailbox decides them).
MAILBOX_EVENT_TYPES: Final[frozenset[type[Event]]] = frozenset(
    c for c in EVENT_TYPES if issubclass(c, MailboxEvent)
)

# The schema version each type is written at today. A raw event at any other
# version is refused until an upcaster for it exists.
SCHEMA_VERSION: Final[dict[type[Event], int]] = {c: c.schema_version for c in EVENT_TYPES}


def _check_catalog() -> None:
    """Fail at import, naming the class, when a declaration is incomplete."""
    for cls in EVENT_TYPES:
        if not cls.entity or "__doc__" not in cls.__dict__ or not cls.__doc__:
            raise TypeError(f"{cls.__name__} must declare its entity and a docstring")
        if cls.default_actor not in BUILTIN_ACTORS:
            raise TypeError(f"{cls.__name__}.default_actor {cls.default_actor!r} is not one "
                            f"of {BUILTIN_ACTORS}")
    if len(EVENT_BY_TAG) != len(EVENT_TYPES):
        raise TypeError("two event types share a tag")


_check_catalog()
