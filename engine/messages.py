"""The message-side deciders: a message, its parts, its tools and its steps.

Five entity declarations, each its table, its extra rules and its evolve:

- ``MESSAGE``: open until completed (completion needs every part settled);
- ``STREAM``: text and reasoning parts, deltas only while streaming;
- ``TOOL``: ToolState, pending -> running -> completed | error, with approval;
- ``STEP``: the message's step-start / step-finish alternation;
- ``PART``: the parts that are complete when added.

and the *facets* (``FACETS``): properties a part of any kind may carry whatever
its state (a pin, a label, a redaction), each a :class:`FacetEntity` with a table
of its own.

:class:`Messages` is their composition over one session's messages: it finds the
entity an event moves, asks its table, runs its rules and folds its evolve. It
mutates only through the :class:`~engine.decider.Journal` it is given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.decider import ABSENT, Entity, Journal, Row, Rule, Table, illegal, same_payload
from engine.errors import PartValidationError
from engine.events import Event, tag_of
from engine.ids import is_uuid

# Kinds a tool may fail with before it ran. The abort-like ones mean someone
# stopped it (the Q CLI view shows them as cancelled); ``truncated`` means the
# model's output limit cut its arguments off: it never ran, nobody cancelled it.
ABORT_LIKE: Final = frozenset({"aborted", "cancelled", "denied"})
NEVER_RAN: Final = ABORT_LIKE | {"truncated"}


class PartLife(msgspec.Struct, gc=False):
    """A part's kind and state, as the tables judge it.

    Never tracked by the garbage collector (``gc=False``): a session holds one
    per part, and a stream of short blocks makes many. No cycle can pass through
    it: its fields are strings, an int and an accepted event, and an event's
    values are JSON data (the door refuses anything else), which cannot refer
    back to a PartLife (``tests/engine/test_gc_free.py``).
    """

    kind: str
    state: str
    entered: Event  # the event that moved the part into ``state``
    deadline: int | None = None


class MessageLife:
    __slots__ = ("entered", "parts", "role", "state", "step", "unsettled")

    def __init__(self, role: str, entered: Event) -> None:
        self.role = role
        self.entered = entered
        self.state = "open"
        self.step = "idle"
        self.parts: dict[str, PartLife] = {}
        # Ordered set of part ids, each with the seq that added the part: the rank a
        # rollback restores their order by (Journal.pop_ranked).
        self.unsettled: dict[str, int] = {}


@attrs.frozen
class PartEntity(Entity["Messages"]):
    """A part entity: one per part, located by (message id, part id).

    ``creates`` names the part kind each creating event makes; ``targets`` the
    kinds each other event may move (default: every kind this entity creates);
    ``unsettled`` the states a message cannot complete in; ``late`` the events
    still legal after the message completed.
    """

    creates: Mapping[type[Event], str] = attrs.field(factory=dict)
    targets: Mapping[type[Event], frozenset[str]] = attrs.field(factory=dict)
    unsettled: frozenset[str] = frozenset()
    late: frozenset[type[Event]] = frozenset()

    def target_kinds(self) -> dict[type[Event], frozenset[str]]:
        own = frozenset(self.creates.values())
        return {cls: self.targets.get(cls, own)
                for cls in self.table.events if cls not in self.creates}


@attrs.frozen
class FacetEntity(Entity["Messages"]):
    """A facet: a property any part may carry, whatever its kind and its state (pin,
    label, redact...). One instance per (message, part, facet), located by the event's
    message and part ids; its table has states of its own, ``absent`` until first set.

    A facet never moves the part: its events are judged by this table alone (a
    refusal names the facet's states, not the part's), once the part exists, on an
    open or a completed message alike (a facet annotates; it changes no content).
    """


# --------------------------------------------------------------------------- rules


def _fail(e: Event, rule: str, text: str) -> PartValidationError:
    return PartValidationError(rule, text, event_id=e.id, event_type=tag_of(type(e)))


def _part_id_given(_: Messages, e: ev.PartEvent) -> None:
    if not e.part_id:  # BR-01: every part must have an id
        raise _fail(e, "BR-01", "the part id is empty; give the part a non-empty id")


def _message_started(m: Messages, e: ev.MessageStarted) -> None:
    if not is_uuid(e.message_id):  # BR-04: messageID must be a valid UUID
        raise _fail(e, "BR-04", f"message id {e.message_id!r} is not a UUID")
    # The role extensions (section 3.8): a summary on an assistant message would be
    # logged and then shown nowhere, so it is refused rather than dropped. (A user
    # message's path is allowed: importers record the cwd a user typed in.)
    if e.role == "assistant" and e.summary is not None:
        raise _fail(e, "BR-11", "an assistant message has no summary; the summary of a "
                    "context compaction belongs to a user message")
    if e.parent_id is not None and e.parent_id not in m.messages:
        raise _fail(e, "parentID", f"parent message {e.parent_id} does not exist in this "
                    "session; start the parent first or leave parent_id empty")


def _message_completed(m: Messages, e: ev.MessageCompleted) -> None:
    msg = m.messages[e.message_id]
    if msg.unsettled:
        open_ids = ", ".join(msg.unsettled)
        raise illegal(
            m.session_id, MESSAGE.table, e, msg.state,
            f"unsettled parts: {open_ids} (tools must end with a result and streaming "
            "parts must end; an abort settles them)",
        )
    if msg.step != "idle" and e.error is None:
        raise illegal(m.session_id, MESSAGE.table, e, msg.state,
                      "a step is open: finish it, or complete with an error")
    if msg.role == "user" and (e.cost or e.tokens is not None):  # BR-12, BR-13
        # Logged, they would be shown nowhere: the user info has no cost or tokens.
        raise _fail(e, "BR-12" if e.cost else "BR-13", "a user message has no cost or "
                    "tokens; they come from the provider's response to an assistant message")


def _tool_added(m: Messages, e: ev.ToolAdded) -> None:
    _part_id_given(m, e)
    if not e.call_id or not e.tool:  # BR-01 as the seed's ToolPart reads it
        raise _fail(e, "BR-01", "a tool part needs a callID and a tool name")
    # A call id names one call of a message: models restart their numbering (c1)
    # and a cleared memory starts over, so an id may come back in a later message.
    owner = m.call_ids.get((e.message_id, e.call_id))
    if owner is not None:
        raise _fail(e, "callID", f"callID {e.call_id} is already used by part {owner}; "
                    "a provider's call id names one call per message")


def _tool_completed(m: Messages, e: ev.ToolCompleted) -> None:
    if not e.output:  # BR-09: a completed tool's output is not an empty string
        raise _fail(e, "BR-09", "a completed tool's output must not be empty; "
                    "fail the tool instead if it produced nothing")
    parts = m.messages[e.message_id].parts
    used = {e.part_id}  # attachments become file parts: ids present and unique
    for att in e.attachments:
        if not att.part_id:  # BR-01
            raise _fail(e, "BR-01", "an attachment's part id is empty")
        if att.part_id in parts or att.part_id in used:  # BR-02
            raise _fail(e, "BR-02", f"attachment part id {att.part_id} is already used "
                        "in this message")
        used.add(att.part_id)


def _tool_failed(_: Messages, e: ev.ToolFailed) -> None:
    if not e.error.strip():  # BR-10: the error state describes the error
        raise _fail(e, "BR-10", "a failed tool needs an error description (not blank)")


def _steps_pair(m: Messages, e: ev.StepStarted | ev.StepFinished) -> None:
    step = m.messages[e.message_id].step
    if (step, type(e)) not in STEP.table.index:
        raise illegal(m.session_id, STEP.table, e, step, "step-start and step-finish must pair")


# --------------------------------------------------------------------------- evolve


def _register_call(j: Journal, m: Messages, e: ev.ToolAdded, _: Row) -> None:
    j.put(m.call_ids, (e.message_id, e.call_id), e.part_id)


def _set_deadline(j: Journal, m: Messages, e: ev.ToolStarted, _: Row) -> None:
    j.set(m.messages[e.message_id].parts[e.part_id], "deadline", e.deadline)


def _add_attachments(j: Journal, m: Messages, e: ev.ToolCompleted, _: Row) -> None:
    parts = m.messages[e.message_id].parts
    for att in e.attachments:
        j.put(parts, att.part_id, PartLife("attachment", "added", e))


def _move_step(j: Journal, m: Messages, e: ev.StepStarted | ev.StepFinished, _: Row) -> None:
    msg = m.messages[e.message_id]
    j.set(msg, "step", STEP.table.index[(msg.step, type(e))].target)


# --------------------------------------------------------------------------- the entities

MESSAGE: Final = Entity["Messages"](
    Table(
        "message",
        "A message is open until completed; parts may only be added or streamed while it is "
        "open. Completion needs every tool settled and every streaming part ended (an abort "
        "command settles them first) and, unless the completion carries an error, no open "
        "step.",
        [
            Row(ABSENT, ev.MessageStarted, "open"),
            Row("open", ev.MessageStreamEnded, "open",
                note="the stream's stop reason, usage and envelope kept"),
            Row("open", ev.MessageCompleted, "completed"),
        ],
    ),
    rules={ev.MessageStarted: _message_started, ev.MessageCompleted: _message_completed},
)

STREAM: Final = PartEntity(
    Table(
        "stream part",
        "Text and reasoning parts: deltas only while streaming.",
        [
            Row(ABSENT, ev.TextAdded, "streaming"),
            Row(ABSENT, ev.ReasoningAdded, "streaming"),
            Row("streaming", ev.TextDelta, "streaming"),
            Row("streaming", ev.ReasoningDelta, "streaming"),
            Row("streaming", ev.PartEnded, "done"),
        ],
    ),
    rules={ev.TextAdded: _part_id_given, ev.ReasoningAdded: _part_id_given},
    creates={ev.TextAdded: "text", ev.ReasoningAdded: "reasoning"},
    targets={ev.TextDelta: frozenset({"text"}), ev.ReasoningDelta: frozenset({"reasoning"})},
    unsettled=frozenset({"streaming"}),
)

TOOL: Final = PartEntity(
    Table(
        "tool",
        "ToolState: pending -> running -> completed | error, with the approval states of the "
        "Vercel AI SDK between pending and running. pending, awaiting-approval and approved "
        "are all status `pending` in WithParts; compacted is status `completed` with "
        "time.compacted. A tool that never ran may only fail with a kind that says why "
        "(aborted, cancelled, denied: stopped; truncated: its arguments were cut off by the "
        "model's output limit).",
        [
            Row(ABSENT, ev.ToolAdded, "pending"),
            Row("pending", ev.ToolInputDelta, "pending",
                note="raw JSON fragment appended to raw"),
            Row("pending", ev.ToolInputReady, "pending", note="parsed input set"),
            Row("pending", ev.ToolApprovalRequested, "awaiting-approval"),
            Row("awaiting-approval", ev.ToolApprovalGranted, "approved"),
            Row("awaiting-approval", ev.ToolApprovalDenied, "error", note="error kind denied"),
            Row("pending", ev.ToolStarted, "running", note="time.start recorded (BR-07)"),
            Row("approved", ev.ToolStarted, "running", note="time.start recorded (BR-07)"),
            Row("pending", ev.ToolFailed, "error", kinds=NEVER_RAN),
            Row("awaiting-approval", ev.ToolFailed, "error", kinds=NEVER_RAN),
            Row("approved", ev.ToolFailed, "error", kinds=NEVER_RAN),
            Row("running", ev.ToolProgress, "running", note="title / metadata update"),
            Row("running", ev.ToolCompleted, "completed", note="output not empty (BR-09)"),
            Row("running", ev.ToolFailed, "error", note="any kind"),
            Row("completed", ev.ToolOutputCompacted, "compacted", note="time.compacted set"),
        ],
    ),
    rules={ev.ToolAdded: _tool_added, ev.ToolCompleted: _tool_completed,
           ev.ToolFailed: _tool_failed},
    evolve={ev.ToolAdded: _register_call, ev.ToolStarted: _set_deadline,
            ev.ToolCompleted: _add_attachments},
    creates={ev.ToolAdded: "tool"},
    unsettled=frozenset({"pending", "awaiting-approval", "approved", "running"}),
    late=frozenset({ev.ToolOutputCompacted}),  # compacting an old tool output
)

STEP: Final = Entity["Messages"](
    Table(
        "step",
        "Each message alternates step-start and step-finish parts.",
        [
            Row("idle", ev.StepStarted, "in-step"),
            Row("in-step", ev.StepFinished, "idle"),
        ],
    ),
    rules={ev.StepStarted: _steps_pair, ev.StepFinished: _steps_pair},
    evolve={ev.StepStarted: _move_step, ev.StepFinished: _move_step},
)

_COMPLETE_ON_ADD: Final[dict[type[Event], str]] = {
    ev.FileAdded: "file",
    ev.StepStarted: "step-start",
    ev.StepFinished: "step-finish",
    ev.SnapshotAdded: "snapshot",
    ev.PatchAdded: "patch",
    ev.AgentAdded: "agent",
    ev.SubtaskAdded: "subtask",
    ev.RetryAdded: "retry",
    ev.CompactionAdded: "compaction",
}

PART: Final = PartEntity(
    Table("part", "Parts that are complete when added.",
          [Row(ABSENT, cls, "added") for cls in _COMPLETE_ON_ADD]),
    rules=dict.fromkeys(_COMPLETE_ON_ADD, _part_id_given),
    creates=_COMPLETE_ON_ADD,
)

# Properties a part of any kind may carry: one FacetEntity each (none yet; see
# "Adding a facet" in docs/architecture.md).
FACETS: Final[tuple[FacetEntity, ...]] = (
)

PART_ENTITIES: Final[tuple[PartEntity, ...]] = (STREAM, TOOL, PART)
ENTITIES: Final[tuple[Entity[Messages], ...]] = (MESSAGE, STREAM, TOOL, STEP, PART, *FACETS)
# The events of the message itself (not of one of its parts).
MESSAGE_EVENTS: Final[frozenset[type[Event]]] = frozenset(r.event for r in MESSAGE.table.rows)

# --------------------------------------------------------------------------- derived
# Everything below is read off the declarations above; nothing is kept by hand.

# Which entity's table decides the part-level state of each part event.
PART_TABLE: Final[dict[type[Event], Table]] = {
    cls: entity.table for entity in PART_ENTITIES for cls in entity.table.events
}
# Which part kind each part-creating event makes.
PART_KIND: Final[dict[type[Event], str]] = {
    cls: kind for entity in PART_ENTITIES for cls, kind in entity.creates.items()
}
# Which part kinds each non-creating part event may move.
TARGET_KINDS: Final[dict[type[Event], frozenset[str]]] = {
    cls: kinds for entity in PART_ENTITIES for cls, kinds in entity.target_kinds().items()
}
# The table that names a part kind's states (for error messages).
KIND_TABLE: Final[dict[str, Table]] = {
    kind: entity.table for entity in PART_ENTITIES for kind in entity.creates.values()
}
# Which facet decides each facet event (a part of any kind, any state).
FACET_OF: Final[dict[type[Event], FacetEntity]] = {
    cls: facet for facet in FACETS for cls in facet.table.events
}
# Part states in which a part is still unsettled (a message cannot complete).
UNSETTLED: Final[frozenset[str]] = frozenset().union(*(e.unsettled for e in PART_ENTITIES))
# Events that need their message open: every part event but the late ones.
LATE: Final[frozenset[type[Event]]] = frozenset().union(*(e.late for e in PART_ENTITIES))
NEEDS_OPEN_MESSAGE: Final[frozenset[type[Event]]] = frozenset(
    cls for entity in (*PART_ENTITIES, STEP) for cls in entity.table.events if cls not in LATE
)
# Every extra rule and evolve step of each event type, in declaration order.
RULES: Final[dict[type[Event], tuple[Rule[Messages], ...]]] = {}
EVOLVES: Final[dict[type[Event], tuple[Any, ...]]] = {}
for _entity in ENTITIES:
    for _cls, _rule in _entity.rules.items():
        RULES[_cls] = (*RULES.get(_cls, ()), _rule)
    for _cls, _step in _entity.evolve.items():
        EVOLVES[_cls] = (*EVOLVES.get(_cls, ()), _step)
del _entity, _cls, _rule, _step


# --------------------------------------------------------------------------- composition


class Messages:
    """The composed message-side decider: every message and part of one session."""

    __slots__ = ("call_ids", "facets", "journal", "messages", "session_id")

    def __init__(self, session_id: str, journal: Journal) -> None:
        self.session_id = session_id
        self.journal = journal
        self.messages: dict[str, MessageLife] = {}
        self.call_ids: dict[tuple[str, str], str] = {}  # (message id, call id) -> part id
        # (message id, part id, facet) -> (the facet's state, the event that entered it)
        self.facets: dict[tuple[str, str, str], tuple[str, Event]] = {}

    def unsettled(self, message_id: str) -> Iterator[tuple[str, PartLife]]:
        msg = self.messages[message_id]
        for pid in msg.unsettled:
            yield pid, msg.parts[pid]

    # ------------------------------------------------------------------ check

    def check(self, e: Event) -> Row | None:
        """The row that allows ``e``, or None when ``e`` is an identical repeat.

        The entity's row first (located, and its no-op and open-message cases),
        then the rules every entity declared for the event's type.
        """
        cls = type(e)
        row = (self._message_row(e) if cls in MESSAGE_EVENTS  # type: ignore[arg-type]
               else self._facet_row(e) if cls in FACET_OF  # type: ignore[arg-type]
               else self._part_row(e))  # type: ignore[arg-type]
        if row is not None:
            rules = RULES.get(cls)
            if rules is not None:
                for rule in rules:
                    rule(self, e)
        return row

    def _message_row(self, e: ev.MessageEvent) -> Row | None:
        msg = self.messages.get(e.message_id)
        state = ABSENT if msg is None else msg.state
        row = MESSAGE.table.index.get((state, type(e)))
        if row is None:
            # An identical repeat of the start or the completion is a no-op.
            if msg is not None and same_payload(msg.entered, e):
                return None
            raise illegal(self.session_id, MESSAGE.table, e, state)
        return row

    def _facet_row(self, e: ev.PartEvent) -> Row | None:
        """A facet's row: judged by the facet's own table once the part exists, whatever
        the part's kind and state, and whether or not its message is completed."""
        facet = FACET_OF[type(e)]
        table = facet.table
        msg = self.messages.get(e.message_id)
        if msg is None:
            raise illegal(self.session_id, MESSAGE.table, e, ABSENT,
                          f"message {e.message_id} does not exist", entity="message")
        if e.part_id not in msg.parts:
            raise illegal(
                self.session_id, table, e, f"part {ABSENT}",
                f"part {e.part_id} does not exist in message {e.message_id}; a "
                f"{facet.name} applies to a part that exists, of any kind",
                valid_state=ABSENT,
            )
        state, entered = self.facets.get((e.message_id, e.part_id, facet.name), (ABSENT, None))
        row = table.index.get((state, type(e)))
        if row is None:
            if entered is not None and same_payload(entered, e):
                return None  # an identical repeat of the move that entered the state
            raise illegal(self.session_id, table, e, state,
                          f"the {facet.name} of part {e.part_id} is {state}")
        return row

    def _part_row(self, e: ev.PartEvent) -> Row | None:
        cls = type(e)
        msg = self.messages.get(e.message_id)
        table = PART_TABLE[cls]
        if msg is None:
            raise illegal(self.session_id, MESSAGE.table, e, ABSENT,
                          f"message {e.message_id} does not exist", entity="message")
        part = msg.parts.get(e.part_id)
        # A retried event stays a no-op even after the message completed: checked
        # first. Deltas (table self-loops) never reach the payload comparison.
        if (part is not None
                and (cls in PART_KIND or (part.state, cls) not in table.index)
                and same_payload(part.entered, e)):
            return None
        if msg.state != "open" and cls in NEEDS_OPEN_MESSAGE:
            raise illegal(
                self.session_id, table, e, f"message {msg.state}",
                "the message is completed; no part may be added or changed after completion",
            )
        if part is None:
            state = ABSENT
        else:
            state = part.state
            if cls in PART_KIND:  # BR-02: a part's id is unique within its message
                raise _fail(e, "BR-02", f"part id {e.part_id} is already used in message "
                            f"{e.message_id}; give the new part another id")
            kinds = TARGET_KINDS.get(cls)
            if kinds is None or part.kind not in kinds:
                want = "/".join(sorted(kinds)) if kinds else "a new"
                raise illegal(
                    self.session_id, KIND_TABLE.get(part.kind, PART.table), e,
                    f"{part.kind} {state}",
                    f"part {e.part_id} is a {part.kind} part; {tag_of(cls)} needs a {want} part",
                    valid_state=state,
                )
        row = table.index.get((state, cls))
        if row is None:
            raise illegal(self.session_id, table, e, state)
        if row.kinds is not None:
            kind = e.kind  # type: ignore[attr-defined]
            if kind not in row.kinds:
                raise illegal(
                    self.session_id, table, e, state,
                    f"from {state} a tool may only fail with kind "
                    f"{', '.join(sorted(row.kinds))}, not {kind}",
                )
        return row

    # ------------------------------------------------------------------ evolve

    def evolve(self, e: Event, row: Row) -> None:
        """Fold an event that ``check`` accepted (or that a trusted log holds)."""
        j = self.journal
        cls = type(e)
        if cls is ev.MessageStarted:
            assert isinstance(e, ev.MessageStarted)
            j.put(self.messages, e.message_id, MessageLife(e.role, e))
            return
        if cls is ev.MessageCompleted:
            assert isinstance(e, ev.MessageCompleted)
            msg = self.messages[e.message_id]
            j.set(msg, "state", row.target)
            j.set(msg, "entered", e)
            return
        if cls is ev.MessageStreamEnded:
            return  # the message stays open: nothing the tables judge changes
        assert isinstance(e, ev.PartEvent)
        facet = FACET_OF.get(cls)
        if facet is not None:
            j.put(self.facets, (e.message_id, e.part_id, facet.name), (row.target, e))
        else:
            self._move_part(e, row)
        for step in EVOLVES.get(cls, ()):
            step(j, self, e, row)

    def _move_part(self, e: ev.PartEvent, row: Row) -> None:
        j = self.journal
        cls = type(e)
        msg = self.messages[e.message_id]
        if row.source == ABSENT:
            j.put(msg.parts, e.part_id, PartLife(PART_KIND[cls], row.target, e))
            if row.target in UNSETTLED:
                j.put(msg.unsettled, e.part_id, e.seq)
        elif row.target != row.source:
            part = msg.parts[e.part_id]
            j.set(part, "state", row.target)
            j.set(part, "entered", e)
            if row.target not in UNSETTLED:
                j.pop_ranked(msg.unsettled, e.part_id)

    def row_for(self, e: Event) -> Row:
        """The row of a stored (already accepted) event, for replay without judging."""
        cls = type(e)
        if cls in MESSAGE_EVENTS:
            msg = self.messages.get(e.message_id)  # type: ignore[attr-defined]
            return MESSAGE.table.index[(ABSENT if msg is None else msg.state, cls)]
        assert isinstance(e, ev.PartEvent)
        facet = FACET_OF.get(cls)
        if facet is not None:
            state, _ = self.facets.get((e.message_id, e.part_id, facet.name), (ABSENT, None))
            return facet.table.index[(state, cls)]
        part = self.messages[e.message_id].parts.get(e.part_id)
        return PART_TABLE[cls].index[(ABSENT if part is None else part.state, cls)]

    def entered_seq(self, e: Event) -> int:
        """The seq of the event an idempotent repeat ``e`` repeats."""
        facet = FACET_OF.get(type(e))
        if facet is not None:
            assert isinstance(e, ev.PartEvent)
            return self.facets[(e.message_id, e.part_id, facet.name)][1].seq
        msg = self.messages[e.message_id]  # type: ignore[attr-defined]
        part_id = getattr(e, "part_id", None)
        return (msg.entered if part_id is None else msg.parts[part_id].entered).seq
