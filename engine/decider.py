"""The parts every decider is built from: transition tables as data, and the journal.

A decider (the functional event-sourcing pattern) is ``decide(command, state) ->
events`` plus ``evolve(state, event) -> state``. In convlog every command becomes
events first and each event passes one gate, so a decider here is an *entity
declaration*: its transition table (which events are legal from which state), its
extra rules (checks a row cannot express) and its evolve (what an accepted event
changes beyond the entity's state). :mod:`engine.messages` and
:mod:`engine.conversation` declare the entities; :mod:`engine.lifecycle` composes
them; :mod:`engine.tables` derives every catalog (fast paths, hand lists, docs)
from the declarations.

Sub-deciders mutate only through a :class:`Journal`, so a rejected batch rolls
back whole without any of them knowing who owns them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final, Generic, TypeVar

import attrs
import msgspec

from engine import events as ev
from engine.errors import IllegalTransition
from engine.events import Event, tag_of

ABSENT: Final = "absent"


@attrs.frozen
class Row:
    source: str
    event: type[ev.Event]
    target: str
    kinds: frozenset[str] | None = None
    note: str = ""

    @property
    def tag(self) -> str:
        return tag_of(self.event)


class Table:
    """One entity's rows, indexed for O(1) lookup."""

    __slots__ = ("by_source", "entity", "index", "rows", "summary", "targets_of")

    def __init__(self, entity: str, summary: str, rows: Iterable[Row]) -> None:
        self.entity = entity
        self.summary = summary
        self.rows: tuple[Row, ...] = tuple(rows)
        self.index: dict[tuple[str, type[ev.Event]], Row] = {}
        self.by_source: dict[str, list[Row]] = {}
        self.targets_of: dict[type[ev.Event], tuple[str, ...]] = {}
        for row in self.rows:
            key = (row.source, row.event)
            if key in self.index:
                raise ValueError(f"duplicate row {row.source} --{row.tag}--> in {entity}")
            self.index[key] = row
            self.by_source.setdefault(row.source, []).append(row)
            targets = self.targets_of.get(row.event, ())
            if row.target not in targets:
                self.targets_of[row.event] = (*targets, row.target)

    @property
    def events(self) -> tuple[type[ev.Event], ...]:
        return tuple(dict.fromkeys(r.event for r in self.rows))

    @property
    def states(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.setdefault(row.source)
            seen.setdefault(row.target)
        return tuple(seen)

    @property
    def terminal(self) -> tuple[str, ...]:
        return tuple(s for s in self.states if s not in self.by_source)

    def valid_from(self, state: str) -> tuple[list[str], list[str]]:
        """Valid next states and the events that reach them."""
        rows = self.by_source.get(state, [])
        targets = list(dict.fromkeys(r.target for r in rows))
        tags = list(dict.fromkeys(r.tag for r in rows))
        return targets, tags


S = TypeVar("S")
# An extra rule: reads the sub-decider's state ``S`` and the event; raises to refuse.
Rule = Callable[[S, Any], None]
# An evolve step beyond the entity's own state: journals every change it makes.
Evolve = Callable[["Journal", S, Any, Row], None]


@attrs.frozen
class Entity(Generic[S]):
    """One entity's declaration: its table, its extra rules and its evolve.

    ``rules`` and ``evolve`` are keyed by event type, so what an entity does with
    an event beyond its row is visible (and countable: the delta fast path is
    derived from which event types have none).
    """

    table: Table
    rules: Mapping[type[Event], Rule[S]] = attrs.field(factory=dict)
    evolve: Mapping[type[Event], Evolve[S]] = attrs.field(factory=dict)

    @property
    def name(self) -> str:
        return self.table.entity

    def __attrs_post_init__(self) -> None:
        events = set(self.table.events)
        for kind, keys in (("rule", self.rules), ("evolve", self.evolve)):
            for cls in keys:
                if cls not in events:
                    raise ValueError(f"{self.name}: a {kind} for {cls.__name__}, "
                                     "which has no row in its table")
        for cls in events:
            if cls.entity != self.name and cls.entity not in _SHARED.get(self.name, ()):
                raise ValueError(f"{cls.__name__} declares entity {cls.entity!r} but has "
                                 f"rows in {self.name!r}")


# Where a keyed entity is: its state and the event that entered it (None: not repeatable).
Locate = Callable[[S, Any], tuple[str, Event | None]]
# Why a move is refused, beyond "no row": reads the event and the entity's state.
Refusal = Callable[[Any, str], str]


@attrs.frozen
class KeyedEntity(Entity[S]):
    """An entity with many instances (one per path, tag, agent, ...): ``locate``
    finds the instance an event addresses. ``repeatable``: an identical repeat of
    the event that entered the current state is a no-op; ``refusal`` words a
    refused move (default: "<entity> is <state>")."""

    locate: Locate[S] = attrs.field(kw_only=True)
    refusal: Refusal | None = attrs.field(kw_only=True, default=None)
    repeatable: bool = attrs.field(kw_only=True, default=True)


class EntityGroup:
    """A sub-decider made of keyed entities: judges, folds and replays each event
    by the entity that declares it (``ENTITY_OF``, set by the subclass).

    Mutates only through ``journal``, so a rejected batch rolls back whole.
    """

    __slots__ = ("journal", "session_id")
    ENTITY_OF: ClassVar[Mapping[type[Event], KeyedEntity[Any]]]

    def __init__(self, session_id: str, journal: Journal) -> None:
        self.session_id = session_id
        self.journal = journal

    def check(self, e: Event) -> Row | None:
        """The row that allows ``e``, or None for an identical repeat (a no-op)."""
        return self.judge(self.ENTITY_OF[type(e)], e)

    def judge(self, entity: KeyedEntity[Any], e: Event) -> Row | None:
        """:meth:`check` once the entity deciding ``e`` is known."""
        cls = type(e)
        state, entered = entity.locate(self, e)
        row = entity.table.index.get((state, cls))
        if row is None:
            if entered is not None and entity.repeatable and same_payload(entered, e):
                return None
            reason = (f"{entity.name} is {state}" if entity.refusal is None
                      else entity.refusal(e, state))
            raise illegal(self.session_id, entity.table, e, state, reason)
        rule = entity.rules.get(cls)
        if rule is not None:
            rule(self, e)
        return row

    def evolve(self, e: Event, row: Row) -> None:
        """Fold an accepted event (journaled)."""
        step = self.ENTITY_OF[type(e)].evolve.get(type(e))
        if step is not None:
            step(self.journal, self, e, row)

    def row_for(self, e: Event) -> Row:
        """The row of a stored (already accepted) event, for replay without judging."""
        entity = self.ENTITY_OF[type(e)]
        state, _ = entity.locate(self, e)
        return entity.table.index[(state, type(e))]

    def entered_seq(self, e: Event) -> int:
        """The seq of the event an idempotent repeat ``e`` repeats."""
        _, entered = self.ENTITY_OF[type(e)].locate(self, e)
        assert entered is not None
        return entered.seq


# Tables whose rows also name events of another entity: the complete-on-add parts
# table creates the step parts (whose own entity is the message's step state).
_SHARED: Final = {"part": ("step",)}


# --------------------------------------------------------------------------- journal

_MISSING: Any = object()
_WHOLE: Any = object()  # journal key meaning "the whole dict as it was"
_RANKED: Any = object()  # journal key meaning "(key, rank) was popped from a ranked dict"


class Journal:
    """Records every mutation while a batch is checked, so a rejection undoes it all.

    ``undo`` is None outside a batch (replaying a stored log journals nothing).
    """

    __slots__ = ("undo",)

    def __init__(self) -> None:
        self.undo: list[tuple[Any, Any, Any]] | None = None

    def begin(self) -> None:
        self.undo = []

    def commit(self) -> None:
        self.undo = None

    def rollback(self) -> None:
        undo, self.undo = self.undo, None
        ranked: list[dict[Any, Any]] = []
        for target, key, old in reversed(undo or ()):
            if key is _RANKED:
                target[old[0]] = old[1]  # back at the end for now; re-ranked below
                ranked.append(target)
            elif key is _WHOLE:
                target.clear()  # a removal: restore the entries and their order
                target.update(old)
            elif isinstance(target, dict):
                if old is _MISSING:
                    del target[key]
                else:
                    target[key] = old
            else:
                setattr(target, key, old)
        for d in {id(d): d for d in ranked}.values():
            items = sorted(d.items(), key=_rank)
            d.clear()
            d.update(items)

    def set(self, obj: object, name: str, value: object) -> None:
        if self.undo is not None:
            self.undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def put(self, d: dict[Any, Any], key: object, value: object) -> None:
        if self.undo is not None:
            self.undo.append((d, key, d.get(key, _MISSING)))
        d[key] = value

    def pop(self, d: dict[Any, Any], key: object) -> None:
        # Only small dicts lose keys (a message's open parts, context files); copying
        # them keeps their order on rollback, which decides e.g. how an abort settles.
        if key in d:
            if self.undo is not None:
                self.undo.append((d, _WHOLE, dict(d)))
            del d[key]

    def pop_ranked(self, d: dict[Any, int], key: object) -> None:
        """Remove ``key`` from a dict whose values rank its keys (ascending in insertion
        order, e.g. the seq that added each): undone in O(1) per pop, and a rollback
        restores the order by sorting on the ranks. A message's unsettled parts can be
        thousands of pending tools; copying them on every pop was quadratic."""
        if key in d:
            if self.undo is not None:
                self.undo.append((d, _RANKED, (key, d[key])))
            del d[key]


def _rank(item: tuple[Any, int]) -> int:
    return item[1]


# --------------------------------------------------------------------------- refusals


def _envelope_free(e: Event) -> Event:
    return msgspec.structs.replace(e, id="", seq=0, time=0, session_id="", actor="")


def same_payload(a: Event, b: Event) -> bool:
    """Equal but for the envelope (id, seq, time, session, actor)."""
    return type(a) is type(b) and _envelope_free(a) == _envelope_free(b)


def illegal(
    session_id: str, table: Table, e: Event, current: str, reason: str = "", *,
    entity: str = "", valid_state: str | None = None,
) -> IllegalTransition:
    """The typed refusal of ``e`` by ``table``: current, attempted and valid states."""
    targets, tags = table.valid_from(current if valid_state is None else valid_state)
    attempted = table.targets_of.get(type(e), ("?",))
    return IllegalTransition(
        entity=entity or table.entity,
        session_id=session_id,
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
