"""The write side's own fold: the composition of every entity's decider.

``check`` is the gate every event passes (commands and raw events alike): the
entity the event moves says apply, no-op, or raises (its table row, then its
rules). ``evolve`` folds an accepted event and never validates. The entities are
declared in :mod:`engine.messages` (message, stream part, tool, step, parts) and
:mod:`engine.conversation` (conversation, tangent, context file, checkpoint);
this module only routes between them. While a batch is being checked, every
mutation is journaled so a rejected batch rolls back whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from engine import events as ev
from engine.conversation import ConversationLife
from engine.decider import _MISSING, ABSENT, Journal, Row, same_payload
from engine.errors import ConvlogError, CorruptLog
from engine.events import Event, tag_of
from engine.mailbox import MailboxLife
from engine.messages import (
    EVOLVES,
    NEEDS_OPEN_MESSAGE,
    PART_KIND,
    PART_TABLE,
    RULES,
    TARGET_KINDS,
    UNSETTLED,
    MessageLife,
    Messages,
    PartLife,
)

__all__ = ["Lifecycle", "MessageLife", "PartLife", "same_payload"]

_CONVERSATION = ev.CONVERSATION_EVENT_TYPES  # decided by engine.conversation
_MAILBOX = ev.MAILBOX_EVENT_TYPES  # decided by engine.mailbox


def _self_loops() -> dict[type[Event], tuple[frozenset[str], frozenset[str]]]:
    """Part events whose every row is a rule-free, evolve-free self-loop (the deltas).

    For these, legality is "the message is open and the part exists, has a
    target kind and is in a source state": :meth:`Lifecycle.apply` decides them
    with a few lookups and folds only the version. Derived from the entity
    declarations: an event that gains a rule or an evolve step leaves the fast path.
    """
    out: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = {}
    for cls, table in PART_TABLE.items():
        rows = [r for r in table.rows if r.event is cls]
        if (cls in NEEDS_OPEN_MESSAGE and cls not in PART_KIND and cls in TARGET_KINDS
                and all(r.source == r.target and r.kinds is None for r in rows)
                and cls not in RULES and cls not in EVOLVES):
            out[cls] = (TARGET_KINDS[cls], frozenset(r.source for r in rows))
    return out


class _Create(NamedTuple):
    """How a part-creating event folds: read off its table row (absent -> target)."""

    kind: str
    target: str
    unsettled: bool  # the new part is unsettled (its message cannot complete yet)
    rules: tuple[Any, ...]
    evolves: tuple[Any, ...]
    row: Row


class _Move(NamedTuple):
    """How a part event moves an existing part: its rows by source state."""

    kinds: frozenset[str]
    by_state: dict[str, tuple[Row, bool, bool]]  # row, state changes, part settles
    rules: tuple[Any, ...]
    evolves: tuple[Any, ...]


def _part_steps() -> tuple[dict[type[Event], _Create], dict[type[Event], _Move]]:
    """The part events besides the deltas that :meth:`Lifecycle.apply_batch` folds
    inline: those that create a part, and those that move one along a row without a
    ``kinds`` condition (a block's ``part.ended``, a tool's start). Read off the same
    tables the full check reads; an event outside them (kinds conditions, late events)
    takes the full check. The rules run as the full check runs them, after the row."""
    creates: dict[type[Event], _Create] = {}
    moves: dict[type[Event], _Move] = {}
    for cls, table in PART_TABLE.items():
        if cls not in NEEDS_OPEN_MESSAGE or cls in _SELF_LOOP:
            continue
        rows = [r for r in table.rows if r.event is cls]
        if any(r.kinds is not None for r in rows):
            continue
        rules, evolves = RULES.get(cls, ()), EVOLVES.get(cls, ())
        if cls in PART_KIND:
            [row] = rows  # a creating event has one row, from absent
            assert row.source == ABSENT
            creates[cls] = _Create(PART_KIND[cls], row.target, row.target in UNSETTLED,
                                   rules, evolves, row)
        elif cls in TARGET_KINDS:
            moves[cls] = _Move(TARGET_KINDS[cls], {
                r.source: (r, r.target != r.source, r.target not in UNSETTLED)
                for r in rows}, rules, evolves)
    return creates, moves


class Lifecycle:
    """Messages, parts and the conversation of one session: enough state to judge."""

    __slots__ = ("_journal", "call_ids", "conversation", "mailbox", "message_decider",
                 "messages", "session_id", "version")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self._journal = Journal()
        self.message_decider = Messages(session_id, self._journal)
        self.conversation = ConversationLife(session_id, self._journal)
        self.mailbox = MailboxLife(session_id, self._journal)
        # The sub-decider's own dicts, named here for the fast path and for readers.
        self.messages: dict[str, MessageLife] = self.message_decider.messages
        self.call_ids: dict[tuple[str, str], str] = self.message_decider.call_ids

    # ------------------------------------------------------------------ journal

    @property
    def journaling(self) -> bool:
        """True inside a batch (between ``begin`` and ``commit``/``rollback``)."""
        return self._journal.undo is not None

    def begin(self) -> None:
        # Journal.begin, inlined, with the version journaled once for the whole batch:
        # a rollback restores it last, so the deltas need not journal it each.
        self._journal.undo = [(self, "version", self.version)]

    def commit(self) -> None:
        self._journal.undo = None

    def rollback(self) -> None:
        self._journal.rollback()

    # ------------------------------------------------------------------ queries

    def part(self, message_id: str, part_id: str) -> PartLife | None:
        msg = self.messages.get(message_id)
        return None if msg is None else msg.parts.get(part_id)

    def unsettled(self, message_id: str) -> Iterator[tuple[str, PartLife]]:
        return self.message_decider.unsettled(message_id)

    def entered_seq(self, e: Event) -> int:
        """The seq of the event an idempotent repeat ``e`` repeats."""
        if type(e) in _CONVERSATION:
            return self.conversation.entered_seq(e)
        if type(e) in _MAILBOX:
            return self.mailbox.entered_seq(e)
        return self.message_decider.entered_seq(e)

    # ------------------------------------------------------------------ check and fold

    def check(self, e: Event) -> Row | None:
        """The row that allows ``e``, or None when ``e`` is an idempotent repeat."""
        if type(e) in _CONVERSATION:
            return self.conversation.check(e)
        if type(e) in _MAILBOX:
            return self.mailbox.check(e)
        return self.message_decider.check(e)

    def evolve(self, e: Event, row: Row) -> None:
        """Fold an event that ``check`` accepted (or that a trusted log holds)."""
        j = self._journal
        if j.undo is not None:
            j.undo.append((self, "version", self.version))
        self.version = e.seq
        if type(e) in _CONVERSATION:
            self.conversation.evolve(e, row)
        elif type(e) in _MAILBOX:
            self.mailbox.evolve(e, row)
        else:
            self.message_decider.evolve(e, row)

    def apply(self, e: Event) -> bool:
        """Check and fold. False when the event is an idempotent no-op."""
        loop = _SELF_LOOP.get(type(e))
        if loop is not None:  # a delta: the hot path of a stream
            msg = self.messages.get(e.message_id)  # type: ignore[attr-defined]
            if msg is not None and msg.state == "open":
                part = msg.parts.get(e.part_id)  # type: ignore[attr-defined]
                if part is not None and part.kind in loop[0] and part.state in loop[1]:
                    # Journaled once per batch by begin(); outside a batch, nothing is.
                    self.version = e.seq
                    return True
            # Not legal: the full check below raises with the precise reason.
        row = (self.conversation if type(e) in _CONVERSATION else
               self.mailbox if type(e) in _MAILBOX else self.message_decider).check(e)
        if row is None:
            return False
        self.evolve(e, row)
        return True

    def apply_batch(self, events: Sequence[Event]) -> list[Event]:
        """:meth:`apply` each event in order (inside a batch: between ``begin`` and
        ``commit``); the accepted ones, each with the seq after the version before
        it. Deltas, and the part events that create a part or move it along a plain
        row (a block's start and end), are decided and folded inline from the same
        tables :meth:`apply` reads, with the same journal entries; anything they do
        not cover (a missing message or part, a state without a row, a repeat) goes
        through :meth:`apply`, which decides it and raises the precise error."""
        accepted: list[Event] = []
        append = accepted.append
        messages = self.messages
        journal = self._journal
        # A subclass that overrides apply (a test's recorder) sees every event; outside
        # a batch (no journal) nothing is decided inline.
        inline = self.__class__.apply is Lifecycle.apply and journal.undo is not None
        undo = journal.undo if journal.undo is not None else []
        loops = _SELF_LOOP if inline else {}
        creates = _CREATES if inline else {}
        moves = _MOVES if inline else {}
        decider = self.message_decider
        # The last delta's (rule, message, part) that passed: a delta changes no state,
        # so the next of the same rule on the very same part objects passes too.
        passed_loop: object = None
        passed_mid: object = None
        passed_pid: object = None
        for planned in events:
            e = planned
            if e.seq != self.version + 1:
                e = msgspec.structs.replace(e, seq=self.version + 1)
            cls = e.__class__
            loop = loops.get(cls)
            if loop is not None:
                mid, pid = e.message_id, e.part_id  # type: ignore[attr-defined]
                if pid is passed_pid and mid is passed_mid and loop is passed_loop:
                    self.version = e.seq
                    append(e)
                    continue
                msg = messages.get(mid)
                if msg is not None and msg.state == "open":
                    part = msg.parts.get(pid)
                    if (part is not None and part.kind in loop[0]
                            and part.state in loop[1]):
                        self.version = e.seq
                        append(e)
                        passed_loop, passed_mid, passed_pid = loop, mid, pid
                        continue
            passed_loop = None  # anything else may change what a delta needs
            create = creates.get(cls)
            if create is not None:
                msg = messages.get(e.message_id)  # type: ignore[attr-defined]
                pid = e.part_id  # type: ignore[attr-defined]
                if msg is not None and msg.state == "open" and pid not in msg.parts:
                    for rule in create.rules:
                        rule(decider, e)
                    self.version = e.seq
                    # Journal.put, inlined: the part was absent.
                    undo.append((msg.parts, pid, _MISSING))
                    msg.parts[pid] = PartLife(create.kind, create.target, e)
                    if create.unsettled:
                        undo.append((msg.unsettled, pid, _MISSING))
                        msg.unsettled[pid] = e.seq
                    for step in create.evolves:
                        step(journal, decider, e, create.row)
                    append(e)
                    continue
            else:
                move = moves.get(cls)
                if move is not None:
                    msg = messages.get(e.message_id)  # type: ignore[attr-defined]
                    if msg is not None and msg.state == "open":
                        pid = e.part_id  # type: ignore[attr-defined]
                        part = msg.parts.get(pid)
                        if part is not None and part.kind in move.kinds:
                            way = move.by_state.get(part.state)
                            if way is not None:
                                row, changes, settles = way
                                for rule in move.rules:
                                    rule(decider, e)
                                self.version = e.seq
                                if changes:  # Journal.set twice and pop_ranked, inlined
                                    undo.append((part, "state", part.state))
                                    undo.append((part, "entered", part.entered))
                                    part.state = row.target
                                    part.entered = e
                                    if settles:
                                        journal.pop_ranked(msg.unsettled, pid)
                                for step in move.evolves:
                                    step(journal, decider, e, row)
                                append(e)
                                continue
            if self.apply(e):
                append(e)
        return accepted

    def replay(self, e: Event) -> None:
        """Fold a stored event without judging it (the log already accepted it)."""
        cls = type(e)
        if cls in _SELF_LOOP:  # a delta moves nothing but the version
            self.version = e.seq
            return
        decider: ConversationLife | MailboxLife | Messages = (
            self.conversation if cls in _CONVERSATION
            else self.mailbox if cls in _MAILBOX else self.message_decider)
        try:
            self.evolve(e, decider.row_for(e))
        except (KeyError, AttributeError):
            # A log only its door should have written holds an event its tables
            # refuse here (edited, or written around the door): say which and why,
            # in the words append would have used, instead of a bare KeyError.
            try:
                decider.check(e)
                why = "what it names is missing"
            except ConvlogError as refusal:
                why = str(refusal)
            raise CorruptLog(e.session_id, e.seq,
                             f"the log holds {tag_of(cls)}, which its tables refuse here: "
                             f"{why}") from None


_SELF_LOOP: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = _self_loops()
_CREATES, _MOVES = _part_steps()
