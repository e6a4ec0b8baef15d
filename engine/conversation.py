"""The write side's view of the conversation: just enough state to judge its events.

Conversation events (``conversation.created``, ``tangent.entered``,
``checkpoint.restored``, ...) address the session's one conversation, not a
message. :class:`ConversationLife` decides them from the tables in
:mod:`engine.tables` (conversation, tangent, context file, checkpoint) and folds
the accepted ones. It mutates only through the owning :class:`Lifecycle`'s
journal, so a rejected batch rolls back conversation state with everything else.

What it does not know on purpose: the history, the next message, the summary.
Those are read-side state (``projections.qcli``); legality never depends on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine import events as ev
from engine import tables as tb
from engine.errors import IllegalTransition, PartValidationError
from engine.events import Event, tag_of

if TYPE_CHECKING:
    from engine.lifecycle import Lifecycle


def _same_payload(a: Event, b: Event) -> bool:
    from engine.lifecycle import same_payload  # noqa: PLC0415 - lifecycle imports us

    return same_payload(a, b)


class ConversationLife:
    """Conversation, tangent mode, context files and checkpoint tags of one session."""

    __slots__ = ("_lc", "checkpoints", "context_files", "entered", "state", "tangent")

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lc = lifecycle
        self.state = tb.ABSENT  # of the conversation entity: absent | active
        self.entered: Event | None = None  # the conversation.created event
        self.tangent = "main"  # main | tangent
        self.context_files: dict[str, Event] = {}  # path -> the event that added it
        self.checkpoints: dict[str, Event] = {}  # tag -> its checkpoint.created event

    # ------------------------------------------------------------------ state of an entity

    def _current(self, table: tb.Table, e: Event) -> tuple[str, Event | None]:
        """The state of the entity ``e`` moves, and the event that entered that state."""
        if table is tb.CONVERSATION:
            return self.state, self.entered
        if table is tb.TANGENT:
            return self.tangent, None
        if table is tb.CONTEXT_FILE:
            added = self.context_files.get(e.path)  # type: ignore[attr-defined]
            return (tb.ABSENT, None) if added is None else ("present", added)
        created = self.checkpoints.get(e.tag)  # type: ignore[attr-defined]
        return (tb.ABSENT, None) if created is None else ("created", created)

    # ------------------------------------------------------------------ check

    def check(self, e: Event) -> tb.Row | None:
        """The row that allows ``e``, or None for an identical repeat (a no-op)."""
        cls = type(e)
        table = tb.CONVERSATION_TABLE[cls]
        if table is not tb.CONVERSATION and self.state == tb.ABSENT:
            raise IllegalTransition(
                entity="conversation", session_id=self._lc.session_id, message_id=None,
                part_id=None, current=tb.ABSENT, attempted=" | ".join(table.targets_of[cls]),
                event_type=tag_of(cls), valid=["active"], valid_events=["conversation.created"],
                reason=f"{tag_of(cls)} needs the conversation: append conversation.created "
                "first", event_id=e.id,
            )
        state, entered = self._current(table, e)
        row = table.index.get((state, cls))
        if row is None:
            # Tangent moves are never idempotent: a second enter is a mistake to report.
            if entered is not None and table is not tb.TANGENT and _same_payload(entered, e):
                return None
            raise self._illegal(table, e, state)
        self._check_rules(e)
        return row

    def _illegal(self, table: tb.Table, e: Event, state: str) -> IllegalTransition:
        reason = ""
        if isinstance(e, ev.CheckpointRestored | ev.CheckpointCreated):
            reason = (f"no checkpoint tagged {e.tag!r}" if state == tb.ABSENT
                      else f"checkpoint {e.tag!r} already exists with another payload")
        elif isinstance(e, ev.ContextFileAdded | ev.ContextFileRemoved):
            reason = (f"{e.path!r} is not a context file" if state == tb.ABSENT
                      else f"{e.path!r} is already a context file")
        elif isinstance(e, ev.TangentEntered):
            reason = "already in tangent mode; tangents do not nest"
        elif isinstance(e, ev.TangentExited):
            reason = "not in tangent mode"
        elif isinstance(e, ev.ConversationCreated):
            reason = "the conversation already exists with another payload"
        return self._lc._illegal(table, e, state, reason)

    def _check_rules(self, e: Event) -> None:
        def fail(rule: str, text: str) -> PartValidationError:
            return PartValidationError(rule, text, event_id=e.id, event_type=tag_of(type(e)))

        if isinstance(e, ev.ConversationCreated):
            if not e.conversation_id.strip():
                raise fail("conversation_id", "the conversation id must not be blank")
            if e.model_info is not None and not e.model_info.model_id.strip():
                raise fail("model_id", "model_info.model_id must not be blank")
        elif isinstance(e, ev.ModelSelected):
            if not e.model_info.model_id.strip():
                raise fail("model_id", "model_info.model_id must not be blank")
        elif isinstance(e, ev.ToolsChanged):
            names = [t.name for t in e.tools]
            if any(not n.strip() for n in names):
                raise fail("tools", "a tool needs a name")
            if len(set(names)) != len(names):
                raise fail("tools", f"tool names repeat within origin {e.origin}")
            if e.server is not None and e.origin != "mcp":
                raise fail("tools", "only origin mcp names a server")
        elif isinstance(e, ev.HistoryCompacted):
            if not e.summary.strip():
                raise fail("summary", "a compaction needs a summary")
            if e.keep_last < 0:
                raise fail("keep_last", f"keep_last must be >= 0, not {e.keep_last}")
        elif isinstance(e, ev.FileLinesChanged):
            if not e.path:
                raise fail("path", "a file line change needs a path")
            counts = (e.before_lines, e.after_lines, e.lines_added_by_agent,
                      e.lines_removed_by_agent)
            if min(counts) < 0:
                raise fail("lines", "line counts must be >= 0")
        elif isinstance(e, ev.ContextFileAdded | ev.ContextFileRemoved):
            if not e.path.strip():
                raise fail("path", "a context file needs a path")
        elif isinstance(e, ev.CheckpointCreated) and not e.tag.strip():
            raise fail("tag", "a checkpoint needs a tag")

    # ------------------------------------------------------------------ evolve

    def evolve(self, e: Event, row: tb.Row) -> None:
        """Fold an accepted conversation event (journaled through the lifecycle)."""
        lc = self._lc
        if isinstance(e, ev.ConversationCreated):
            lc._set(self, "state", row.target)
            lc._set(self, "entered", e)
        elif isinstance(e, ev.TangentEntered | ev.TangentExited):
            lc._set(self, "tangent", row.target)
        elif isinstance(e, ev.ContextFileAdded):
            lc._put(self.context_files, e.path, e)
        elif isinstance(e, ev.ContextFileRemoved):
            lc._pop(self.context_files, e.path)
        elif isinstance(e, ev.CheckpointCreated):
            lc._put(self.checkpoints, e.tag, e)

    def row_for(self, e: Event) -> tb.Row:
        """The row of a stored (already accepted) event, for replay without judging."""
        table = tb.CONVERSATION_TABLE[type(e)]
        state, _ = self._current(table, e)
        return table.index[(state, type(e))]

    def entered_seq(self, e: Event) -> int:
        """The seq of the event an idempotent repeat ``e`` repeats."""
        _, entered = self._current(tb.CONVERSATION_TABLE[type(e)], e)
        assert entered is not None
        return entered.seq
