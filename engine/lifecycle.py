"""The write side's own fold: the lifecycle state of every message and part.

``check`` is the gate every event passes (commands and raw events alike): it
reads the transition tables and the business rules and says apply, no-op, or
raises. ``evolve`` folds an accepted event and never validates. While a batch is
being checked, every mutation is journaled so a rejected batch rolls back whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from engine import events as ev
from engine import tables as tb
from engine.conversation import ConversationLife
from engine.errors import IllegalTransition, PartValidationError
from engine.events import Event, tag_of
from engine.ids import is_uuid

_MISSING: Any = object()
_WHOLE: Any = object()  # journal key meaning "the whole dict as it was"
_CONVERSATION = ev.CONVERSATION_EVENT_TYPES  # decided by engine.conversation

# Which part kinds each non-creating part event may target.
_KIND_OF_TABLE = {"text": tb.STREAM, "reasoning": tb.STREAM, "tool": tb.TOOL}
# Events with checks beyond their table row (``_check_rules``, the step pairing).
_RULED = frozenset({ev.ToolAdded, ev.ToolCompleted, ev.ToolFailed, ev.StepStarted,
                    ev.StepFinished})
_TARGET_KINDS: dict[type[Event], frozenset[str]] = {
    ev.TextDelta: frozenset({"text"}),
    ev.ReasoningDelta: frozenset({"reasoning"}),
    ev.PartEnded: frozenset({"text", "reasoning"}),
    **{row.event: frozenset({"tool"}) for row in tb.TOOL.rows if row.source != tb.ABSENT},
}


def _self_loops() -> dict[type[Event], tuple[frozenset[str], frozenset[str]]]:
    """Part events whose every row is a rule-free self-loop (the streaming deltas).

    For these, legality is "the message is open and the part exists, has a
    target kind and is in a source state": :meth:`Lifecycle.apply` decides them
    with a few lookups and folds only the version. Derived from the tables.
    """
    out: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = {}
    for cls, table in tb.PART_TABLE.items():
        rows = [r for r in table.rows if r.event is cls]
        if (cls in tb.NEEDS_OPEN_MESSAGE and cls not in tb.PART_KIND and cls in _TARGET_KINDS
                and all(r.source == r.target and r.kinds is None for r in rows)
                and cls not in _RULED):
            out[cls] = (_TARGET_KINDS[cls], frozenset(r.source for r in rows))
    return out


class PartLife:
    __slots__ = ("deadline", "entered", "kind", "state")

    def __init__(self, kind: str, state: str, entered: Event) -> None:
        self.kind = kind
        self.state = state
        self.entered = entered  # the event that moved the part into ``state``
        self.deadline: int | None = None


class MessageLife:
    __slots__ = ("entered", "parts", "role", "state", "step", "unsettled")

    def __init__(self, role: str, entered: Event) -> None:
        self.role = role
        self.entered = entered
        self.state = "open"
        self.step = "idle"
        self.parts: dict[str, PartLife] = {}
        self.unsettled: dict[str, None] = {}  # ordered set of part ids


def _envelope_free(e: Event) -> Event:
    return msgspec.structs.replace(e, id="", seq=0, time=0, session_id="", actor="")


def same_payload(a: Event, b: Event) -> bool:
    """Equal but for the envelope (id, seq, time, session, actor)."""
    return type(a) is type(b) and _envelope_free(a) == _envelope_free(b)


class Lifecycle:
    """Messages and parts of one session, with just enough state to decide legality."""

    __slots__ = ("_undo", "call_ids", "conversation", "messages", "session_id", "version")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self.messages: dict[str, MessageLife] = {}
        self.call_ids: dict[str, tuple[str, str]] = {}
        self._undo: list[tuple[Any, Any, Any]] | None = None
        self.conversation = ConversationLife(self)  # conversation-level events

    # ------------------------------------------------------------------ journal

    def begin(self) -> None:
        self._undo = []

    def commit(self) -> None:
        self._undo = None

    def rollback(self) -> None:
        undo, self._undo = self._undo, None
        for target, key, old in reversed(undo or ()):
            if key is _WHOLE:
                target.clear()  # a removal: restore the entries and their order
                target.update(old)
            elif isinstance(target, dict):
                if old is _MISSING:
                    del target[key]
                else:
                    target[key] = old
            else:
                setattr(target, key, old)

    def _set(self, obj: object, name: str, value: object) -> None:
        if self._undo is not None:
            self._undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def _put(self, d: dict[Any, Any], key: object, value: object) -> None:
        if self._undo is not None:
            self._undo.append((d, key, d.get(key, _MISSING)))
        d[key] = value

    def _pop(self, d: dict[Any, Any], key: object) -> None:
        # Only small dicts lose keys (a message's open parts, context files); copying
        # them keeps their order on rollback, which decides e.g. how an abort settles.
        if key in d:
            if self._undo is not None:
                self._undo.append((d, _WHOLE, dict(d)))
            del d[key]

    # ------------------------------------------------------------------ queries

    def part(self, message_id: str, part_id: str) -> PartLife | None:
        msg = self.messages.get(message_id)
        return None if msg is None else msg.parts.get(part_id)

    def unsettled(self, message_id: str) -> Iterator[tuple[str, PartLife]]:
        msg = self.messages[message_id]
        for pid in msg.unsettled:
            yield pid, msg.parts[pid]

    # ------------------------------------------------------------------ check

    def _illegal(
        self, table: tb.Table, e: Event, current: str, reason: str = "", *, entity: str = "",
        valid_state: str | None = None,
    ) -> IllegalTransition:
        targets, tags = table.valid_from(current if valid_state is None else valid_state)
        attempted = table.targets_of.get(type(e), ("?",))
        return IllegalTransition(
            entity=entity or table.entity,
            session_id=self.session_id,
            message_id=getattr(e, "message_id", None),
            part_id=getattr(e, "part_id", None),
            current=current,
            attempted=" | ".join(attempted),
            event_type=tag_of(type(e)),
            valid=targets,
            valid_events=tags,
            reason=reason,
            event_id=e.id,
        )

    def check(self, e: Event) -> tb.Row | None:
        """The row that allows ``e``, or None when ``e`` is an idempotent repeat."""
        cls = type(e)
        if cls is ev.MessageStarted or cls is ev.MessageCompleted:
            return self._check_message(e)  # type: ignore[arg-type]
        if cls in _CONVERSATION:
            return self.conversation.check(e)
        assert isinstance(e, ev.PartEvent)
        msg = self.messages.get(e.message_id)
        table = tb.PART_TABLE[cls]
        if msg is None:
            raise self._illegal(
                tb.MESSAGE, e, tb.ABSENT, f"message {e.message_id} does not exist", entity="message"
            )
        part = msg.parts.get(e.part_id)
        # A retried event stays a no-op even after the message completed: checked
        # first. Deltas (table self-loops) never reach the payload comparison.
        if (part is not None
                and (cls in tb.PART_KIND or (part.state, cls) not in table.index)
                and same_payload(part.entered, e)):
            return None
        if msg.state != "open" and cls in tb.NEEDS_OPEN_MESSAGE:
            raise self._illegal(
                table, e, f"message {msg.state}",
                "the message is completed; no part may be added or changed after completion",
            )
        if part is None:
            state = tb.ABSENT
        else:
            state = part.state
            if cls in tb.PART_KIND:
                raise PartValidationError(
                    "BR-02", f"part id {e.part_id} is already used in message {e.message_id}",
                    event_id=e.id, event_type=tag_of(cls),
                )
            kinds = _TARGET_KINDS.get(cls)
            if kinds is None or part.kind not in kinds:
                want = "/".join(sorted(kinds)) if kinds else "a new"
                raise self._illegal(
                    _KIND_OF_TABLE.get(part.kind, tb.PART), e, f"{part.kind} {state}",
                    f"part {e.part_id} is a {part.kind} part; {tag_of(cls)} needs a {want} part",
                    valid_state=state,
                )
        row = table.index.get((state, cls))
        if row is None:
            raise self._illegal(table, e, state)
        if row.kinds is not None:
            kind = e.kind  # type: ignore[attr-defined]
            if kind not in row.kinds:
                raise self._illegal(
                    table, e, state,
                    f"from {state} a tool may only fail with kind "
                    f"{', '.join(sorted(row.kinds))}, not {kind}",
                )
        if (cls is ev.StepStarted or cls is ev.StepFinished) and (
            (msg.step, cls) not in tb.STEP.index
        ):
            raise self._illegal(tb.STEP, e, msg.step, "step-start and step-finish must pair")
        self._check_rules(e, msg)
        return row

    def _check_message(self, e: ev.MessageStarted | ev.MessageCompleted) -> tb.Row | None:
        msg = self.messages.get(e.message_id)
        state = tb.ABSENT if msg is None else msg.state
        row = tb.MESSAGE.index.get((state, type(e)))
        if row is None:
            # An identical repeat of the start or the completion is a no-op.
            if msg is not None and same_payload(msg.entered, e):
                return None
            raise self._illegal(tb.MESSAGE, e, state)
        if isinstance(e, ev.MessageStarted):
            if not is_uuid(e.message_id):
                raise PartValidationError(
                    "BR-04", f"message id {e.message_id!r} is not a UUID",
                    event_id=e.id, event_type=tag_of(type(e)),
                )
            if e.parent_id is not None:
                parent = self.messages.get(e.parent_id)
                if parent is None:
                    raise PartValidationError(
                        "parentID", f"parent message {e.parent_id} does not exist",
                        event_id=e.id, event_type="message.started",
                    )
        else:
            assert msg is not None
            if msg.unsettled:
                open_ids = ", ".join(msg.unsettled)
                raise self._illegal(
                    tb.MESSAGE, e, state,
                    f"unsettled parts: {open_ids} (tools must end with a result and streaming "
                    "parts must end; an abort settles them)",
                )
            if msg.step != "idle" and e.error is None:
                raise self._illegal(
                    tb.MESSAGE, e, state, "a step is open: finish it, or complete with an error"
                )
        return row

    def _check_rules(self, e: ev.PartEvent, msg: MessageLife) -> None:
        tag = tag_of(type(e))

        def fail(rule: str, text: str) -> PartValidationError:
            return PartValidationError(rule, text, event_id=e.id, event_type=tag)

        if not e.part_id:
            raise fail("BR-01", "part id is empty")
        if isinstance(e, ev.ToolAdded):
            if not e.call_id or not e.tool:
                raise fail("BR-01", "a tool part needs a callID and a tool name")
            owner = self.call_ids.get(e.call_id)
            if owner is not None:
                raise fail("callID", f"callID {e.call_id} is already used by part {owner[1]}")
        elif isinstance(e, ev.ToolCompleted):
            if not e.output:
                raise fail("BR-09", "a completed tool's output must not be empty")
            used = {e.part_id}  # attachments become file parts: ids present and unique
            for att in e.attachments:
                if not att.part_id:
                    raise fail("BR-01", "an attachment's part id is empty")
                if att.part_id in msg.parts or att.part_id in used:
                    raise fail("BR-02", f"attachment part id {att.part_id} is already used")
                used.add(att.part_id)
        elif isinstance(e, ev.ToolFailed) and not e.error.strip():
            raise fail("BR-10", "an error state needs a description")

    # ------------------------------------------------------------------ evolve

    def evolve(self, e: Event, row: tb.Row) -> None:
        """Fold an event that ``check`` accepted (or that a trusted log holds)."""
        self._set(self, "version", e.seq)
        cls = type(e)
        if cls is ev.MessageStarted:
            assert isinstance(e, ev.MessageStarted)
            self._put(self.messages, e.message_id, MessageLife(e.role, e))
            return
        if cls is ev.MessageCompleted:
            assert isinstance(e, ev.MessageCompleted)
            msg = self.messages[e.message_id]
            self._set(msg, "state", row.target)
            self._set(msg, "entered", e)
            return
        if cls in _CONVERSATION:
            self.conversation.evolve(e, row)
            return
        assert isinstance(e, ev.PartEvent)
        msg = self.messages[e.message_id]
        if row.source == tb.ABSENT:
            part = PartLife(tb.PART_KIND[cls], row.target, e)
            self._put(msg.parts, e.part_id, part)
            if row.target in tb.UNSETTLED:
                self._put(msg.unsettled, e.part_id, None)
            if isinstance(e, ev.ToolAdded):
                self._put(self.call_ids, e.call_id, (e.message_id, e.part_id))
        else:
            part = msg.parts[e.part_id]
            if row.target != row.source:
                self._set(part, "state", row.target)
                self._set(part, "entered", e)
                if row.target not in tb.UNSETTLED:
                    self._pop(msg.unsettled, e.part_id)
            if isinstance(e, ev.ToolStarted):
                self._set(part, "deadline", e.deadline)
            elif isinstance(e, ev.ToolCompleted):
                for att in e.attachments:
                    self._put(msg.parts, att.part_id, PartLife("attachment", "added", e))
        if cls is ev.StepStarted or cls is ev.StepFinished:
            self._set(msg, "step", tb.STEP.index[(msg.step, cls)].target)

    def apply(self, e: Event) -> bool:
        """Check and fold. False when the event is an idempotent no-op."""
        loop = _SELF_LOOP.get(type(e))
        if loop is not None:  # a delta: the hot path of a stream
            msg = self.messages.get(e.message_id)  # type: ignore[attr-defined]
            if msg is not None and msg.state == "open":
                part = msg.parts.get(e.part_id)  # type: ignore[attr-defined]
                if part is not None and part.kind in loop[0] and part.state in loop[1]:
                    if self._undo is not None:
                        self._undo.append((self, "version", self.version))
                    self.version = e.seq
                    return True
            # Not legal: the full check below raises with the precise reason.
        row = self.check(e)
        if row is None:
            return False
        self.evolve(e, row)
        return True

    def replay(self, e: Event) -> None:
        """Fold a stored event without judging it (the log already accepted it)."""
        cls = type(e)
        if cls in _SELF_LOOP:  # a delta moves nothing but the version
            self.version = e.seq
            return
        if cls is ev.MessageStarted or cls is ev.MessageCompleted:
            assert isinstance(e, ev.MessageStarted | ev.MessageCompleted)
            msg = self.messages.get(e.message_id)
            state = tb.ABSENT if msg is None else msg.state
            self.evolve(e, tb.MESSAGE.index[(state, cls)])
            return
        if cls in _CONVERSATION:
            self.evolve(e, self.conversation.row_for(e))
            return
        assert isinstance(e, ev.PartEvent)
        part = self.messages[e.message_id].parts.get(e.part_id)
        state = tb.ABSENT if part is None else part.state
        self.evolve(e, tb.PART_TABLE[cls].index[(state, cls)])


_SELF_LOOP: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = _self_loops()
