"""The conversation-side deciders: conversation, tangent, context file, checkpoint, import.

Conversation events (``conversation.created``, ``tangent.entered``,
``checkpoint.restored``, ...) address the session's one conversation, not a
message. Five entity declarations, each its table, its rules and its evolve, are
composed by :class:`ConversationLife`, which mutates only through the
:class:`~engine.decider.Journal` it is given, so a rejected batch rolls back
conversation state with everything else.

What it does not know on purpose: the history, the next message, the summary.
Those are read-side state (``projections.qcli``); legality never depends on them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import attrs

from engine import events as ev
from engine.decider import ABSENT, EntityGroup, Journal, KeyedEntity, Row, Table
from engine.errors import IllegalTransition, PartValidationError
from engine.events import Event, tag_of


@attrs.frozen
class ConversationEntity(KeyedEntity["ConversationLife"]):
    """A conversation-wide entity. ``needs_conversation``: its events need
    ``conversation.created`` first; ``repeatable`` is off for tangent moves."""

    needs_conversation: bool = attrs.field(kw_only=True, default=True)


def _blank(value: object) -> bool:
    """Not a string with something in it: also what a wrong type given through the
    Python API is (None for a path), refused by the rule instead of an AttributeError."""
    return not isinstance(value, str) or not value.strip()


def _no_model(info: object) -> bool:
    return not isinstance(info, ev.ModelInfo) or _blank(info.model_id)


def _fail(e: Event, rule: str, text: str) -> PartValidationError:
    return PartValidationError(rule, text, event_id=e.id, event_type=tag_of(type(e)))


# --------------------------------------------------------------------------- conversation


def _created(c: ConversationLife, e: ev.ConversationCreated) -> None:
    if _blank(e.conversation_id):
        raise _fail(e, "conversation_id", "the conversation id must not be blank")
    if e.model_info is not None and _no_model(e.model_info):
        raise _fail(e, "model_id", "model_info must be a ModelInfo whose model_id is not blank")


def _model_selected(c: ConversationLife, e: ev.ModelSelected) -> None:
    if _no_model(e.model_info):
        raise _fail(e, "model_id", "model_info must be a ModelInfo whose model_id is not blank")


def _tools_changed(c: ConversationLife, e: ev.ToolsChanged) -> None:
    names = [t.name for t in e.tools]
    if any(_blank(n) for n in names):
        raise _fail(e, "tools", "a tool needs a name")
    if len(set(names)) != len(names):
        raise _fail(e, "tools", f"tool names repeat within origin {e.origin}")
    if e.server is not None and e.origin != "mcp":
        raise _fail(e, "tools", "only origin mcp names a server")


def _history_compacted(c: ConversationLife, e: ev.HistoryCompacted) -> None:
    if _blank(e.summary):
        raise _fail(e, "summary", "a compaction needs a summary")
    if e.keep_last < 0:
        raise _fail(e, "keep_last", f"keep_last must be >= 0, not {e.keep_last}")


def _file_lines(c: ConversationLife, e: ev.FileLinesChanged) -> None:
    if not e.path:
        raise _fail(e, "path", "a file line change needs a path")
    counts = (e.before_lines, e.after_lines, e.lines_added_by_agent, e.lines_removed_by_agent)
    if min(counts) < 0:
        raise _fail(e, "lines", "line counts must be >= 0")


def _item_popped(c: ConversationLife, e: ev.ItemPopped) -> None:
    if _blank(e.event_id):
        raise _fail(e, "event_id", "a popped item names the event that recorded it")


def _guardrail_tripped(c: ConversationLife, e: ev.GuardrailTripped) -> None:
    if _blank(e.guardrail):
        raise _fail(e, "guardrail", "a tripped guardrail needs a name")


def _run_usage(c: ConversationLife, e: ev.RunUsageRecorded) -> None:
    if _blank(e.turn):
        raise _fail(e, "turn", "a run's usage names the event that recorded its turn")
    t = e.tokens
    if min(e.requests, e.total, t.input, t.output, t.reasoning, t.cache.read,
           t.cache.write) < 0:
        raise _fail(e, "tokens", "usage counts must be >= 0")


def _graph_checkpoint(c: ConversationLife, e: ev.GraphCheckpointSaved) -> None:
    if _blank(e.checkpoint_id):
        raise _fail(e, "checkpoint_id", "a graph checkpoint needs an id")


def _graph_writes(c: ConversationLife, e: ev.GraphWritesSaved) -> None:
    if _blank(e.checkpoint_id) or _blank(e.task_id):
        raise _fail(e, "task_id", "graph writes name their checkpoint and their task")


def _enter_conversation(j: Journal, c: ConversationLife, e: Event, row: Row) -> None:
    j.set(c, "state", row.target)
    j.set(c, "entered", e)


CONVERSATION: Final = ConversationEntity(
    Table(
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
            Row("active", ev.ItemPopped, "active", note="names the event that recorded it"),
            Row("active", ev.ItemsCleared, "active"),
            Row("active", ev.GuardrailTripped, "active", note="guardrail named"),
            Row("active", ev.RunUsageRecorded, "active",
                note="names the turn's event; counts >= 0"),
            Row("active", ev.GraphCheckpointSaved, "active", note="checkpoint id named"),
            Row("active", ev.GraphWritesSaved, "active", note="checkpoint and task named"),
        ],
    ),
    rules={ev.ConversationCreated: _created, ev.ModelSelected: _model_selected,
           ev.ToolsChanged: _tools_changed, ev.HistoryCompacted: _history_compacted,
           ev.FileLinesChanged: _file_lines, ev.ItemPopped: _item_popped,
           ev.GuardrailTripped: _guardrail_tripped, ev.RunUsageRecorded: _run_usage,
           ev.GraphCheckpointSaved: _graph_checkpoint, ev.GraphWritesSaved: _graph_writes},
    evolve={ev.ConversationCreated: _enter_conversation},
    locate=lambda c, e: c.conversation_state(),
    refusal=lambda e, state: ("the conversation already exists with another payload"
                              if isinstance(e, ev.ConversationCreated) else ""),
    needs_conversation=False,
)

_NEEDS_CONVERSATION = " Every event in this table needs `conversation.created` first."

# --------------------------------------------------------------------------- tangent


def _move_tangent(j: Journal, c: ConversationLife, e: Event, row: Row) -> None:
    j.set(c, "tangent", row.target)


TANGENT: Final = ConversationEntity(
    Table(
        "tangent",
        "Tangent mode. Entering while in a tangent, or exiting when not in one, is illegal "
        "(never an idempotent no-op)." + _NEEDS_CONVERSATION,
        [
            Row("main", ev.TangentEntered, "tangent",
                note="the main conversation is kept aside"),
            Row("tangent", ev.TangentExited, "main", note="tail: none, last_entry or thread"),
        ],
    ),
    evolve={ev.TangentEntered: _move_tangent, ev.TangentExited: _move_tangent},
    locate=lambda c, e: c.tangent_state(),
    refusal=lambda e, state: ("already in tangent mode; tangents do not nest"
                              if isinstance(e, ev.TangentEntered) else "not in tangent mode"),
    repeatable=False,  # a second enter is a mistake to report
)

# --------------------------------------------------------------------------- context file


def _path_given(c: ConversationLife, e: ev.ContextFileAdded | ev.ContextFileRemoved) -> None:
    if _blank(e.path):
        raise _fail(e, "path", "a context file needs a path")


def _context_file(c: ConversationLife, e: Any) -> tuple[str, Event | None]:
    added = c.context_files.get(e.path)
    return (ABSENT, None) if added is None else ("present", added)


def _add_file(j: Journal, c: ConversationLife, e: ev.ContextFileAdded, _: Row) -> None:
    j.put(c.context_files, e.path, e)


def _remove_file(j: Journal, c: ConversationLife, e: ev.ContextFileRemoved, _: Row) -> None:
    j.pop(c.context_files, e.path)


CONTEXT_FILE: Final = ConversationEntity(
    Table(
        "context file",
        "Sticky context files, one entity per path." + _NEEDS_CONVERSATION,
        [
            Row(ABSENT, ev.ContextFileAdded, "present"),
            Row("present", ev.ContextFileRemoved, ABSENT),
        ],
    ),
    rules={ev.ContextFileAdded: _path_given, ev.ContextFileRemoved: _path_given},
    evolve={ev.ContextFileAdded: _add_file, ev.ContextFileRemoved: _remove_file},
    locate=_context_file,
    refusal=lambda e, state: (f"{e.path!r} is not a context file" if state == ABSENT
                              else f"{e.path!r} is already a context file"),
)

# --------------------------------------------------------------------------- checkpoint


def _tag_given(c: ConversationLife, e: ev.CheckpointCreated) -> None:
    if _blank(e.tag):
        raise _fail(e, "tag", "a checkpoint needs a tag")


def _checkpoint(c: ConversationLife, e: Any) -> tuple[str, Event | None]:
    created = c.checkpoints.get(e.tag)
    return (ABSENT, None) if created is None else ("created", created)


def _add_checkpoint(j: Journal, c: ConversationLife, e: ev.CheckpointCreated, _: Row) -> None:
    j.put(c.checkpoints, e.tag, e)


CHECKPOINT: Final = ConversationEntity(
    Table(
        "checkpoint",
        "Checkpoints, one entity per tag. Restoring an unknown tag is illegal; a restore "
        "rewinds the conversation, not the checkpoint list." + _NEEDS_CONVERSATION,
        [
            Row(ABSENT, ev.CheckpointCreated, "created", note="tag not blank"),
            Row("created", ev.CheckpointRestored, "created"),
        ],
    ),
    rules={ev.CheckpointCreated: _tag_given},
    evolve={ev.CheckpointCreated: _add_checkpoint},
    locate=_checkpoint,
    refusal=lambda e, state: (f"no checkpoint tagged {e.tag!r}" if state == ABSENT
                              else f"checkpoint {e.tag!r} already exists with another payload"),
)

# --------------------------------------------------------------------------- import


def _import_named(c: ConversationLife, e: ev.SessionImported) -> None:
    if _blank(e.format):
        raise _fail(e, "format", "an imported session names the importer's format")
    if _blank(e.source):
        raise _fail(e, "source", "an imported session names its source file")


def _imported(c: ConversationLife, e: Any) -> tuple[str, Event | None]:
    if c.imported is not None:
        return "imported", c.imported
    # Legal only as the session's first event (seq 1; a fork inherits its parent's).
    return (ABSENT if e.seq <= 1 else "started"), None


def _record_import(j: Journal, c: ConversationLife, e: ev.SessionImported, _: Row) -> None:
    j.set(c, "imported", e)


IMPORT: Final = ConversationEntity(
    Table(
        "import",
        "Where an imported session came from: `session.imported` is legal once, as the "
        "session's first event (a fork shares its parent's). Any other event first makes "
        "the session `started`, from which there is no row: an import is not claimed later.",
        [Row(ABSENT, ev.SessionImported, "imported", note="format and source not blank")],
    ),
    rules={ev.SessionImported: _import_named},
    evolve={ev.SessionImported: _record_import},
    locate=_imported,
    refusal=lambda e, state: ("the session was already imported" if state == "imported"
                              else "session.imported must be the session's first event"),
    needs_conversation=False,
)

# --------------------------------------------------------------------------- title


def _title_given(c: ConversationLife, e: ev.SessionTitled) -> None:
    if not e.title.strip():
        raise _fail(e, "title", "a session title must not be blank")


def _titled(c: ConversationLife, e: Any) -> tuple[str, Event | None]:
    return (ABSENT, None) if c.titled is None else ("titled", c.titled)


def _record_title(j: Journal, c: ConversationLife, e: ev.SessionTitled, _: Row) -> None:
    j.set(c, "titled", e)


TITLE: Final = ConversationEntity(
    Table(
        "title",
        "The session's name (a tool's `/rename`, its generated title, a thread name): "
        "any number of times, the latest wins. Lists fall back to the first prompt.",
        [
            Row(ABSENT, ev.SessionTitled, "titled", note="title not blank"),
            Row("titled", ev.SessionTitled, "titled", note="a rename"),
        ],
    ),
    rules={ev.SessionTitled: _title_given},
    evolve={ev.SessionTitled: _record_title},
    locate=_titled,
    needs_conversation=False,
)

ENTITIES: Final[tuple[ConversationEntity, ...]] = (CONVERSATION, TANGENT, CONTEXT_FILE,
                                                   CHECKPOINT, IMPORT, TITLE)

# Which entity decides each conversation event (derived from the declarations).
ENTITY_OF: Final[dict[type[Event], ConversationEntity]] = {
    cls: entity for entity in ENTITIES for cls in entity.table.events
}


# --------------------------------------------------------------------------- composition


class ConversationLife(EntityGroup):
    """Conversation, tangent mode, context files and checkpoint tags of one session."""

    __slots__ = ("checkpoints", "context_files", "entered", "imported", "state", "tangent",
                 "titled")
    ENTITY_OF: ClassVar[dict[type[Event], ConversationEntity]] = ENTITY_OF

    def __init__(self, session_id: str, journal: Journal) -> None:
        super().__init__(session_id, journal)
        self.state = ABSENT  # of the conversation entity: absent | active
        self.entered: Event | None = None  # the conversation.created event
        self.tangent = "main"  # main | tangent
        self.context_files: dict[str, Event] = {}  # path -> the event that added it
        self.checkpoints: dict[str, Event] = {}  # tag -> its checkpoint.created event
        self.imported: Event | None = None  # the session.imported event, if any
        self.titled: Event | None = None  # the latest session.titled event, if any

    def conversation_state(self) -> tuple[str, Event | None]:
        return self.state, self.entered

    def tangent_state(self) -> tuple[str, Event | None]:
        return self.tangent, None

    def check(self, e: Event) -> Row | None:
        """The row that allows ``e``, or None for an identical repeat (a no-op)."""
        cls = type(e)
        entity = ENTITY_OF[cls]
        if entity.needs_conversation and self.state == ABSENT:
            raise IllegalTransition(
                entity="conversation", session_id=self.session_id, message_id=None,
                part_id=None, current=ABSENT, attempted=" | ".join(entity.table.targets_of[cls]),
                event_type=tag_of(cls), valid=["active"], valid_events=["conversation.created"],
                reason=f"{tag_of(cls)} needs the conversation: append conversation.created "
                "first", event_id=e.id,
            )
        return self.judge(entity, e)
