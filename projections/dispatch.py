"""Each fold declares, once, which event types it handles and which it ignores.

A handler is a method marked ``@handles(ev.SomeEvent, ...)``; the types a fold
deliberately leaves alone are its ``IGNORES`` class attribute; ``@event_fold``
registers the class. :func:`coverage_problems` checks that every event type is
in exactly one of the two sets (``tests/projections/test_fold_coverage.py``
runs it over every registered fold), so a new event type fails a test naming
each fold that forgot it, instead of a ``KeyError`` deep in a replay.

Folding stays one dict lookup per event: :func:`bind` turns the declaration
into ``{event type: bound handler}`` once per fold instance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from engine.events import EVENT_TYPES, Event, tag_of

F = TypeVar("F", bound=Callable[..., None])
C = TypeVar("C", bound=type)

_MARK: Final = "__folds_events__"

# Every class decorated with @event_fold, in definition order.
FOLDS: list[type] = []


def handles(*types: type[Event]) -> Callable[[F], F]:
    """Mark a method as the handler of ``types`` in its fold."""
    def mark(fn: F) -> F:
        setattr(fn, _MARK, (*getattr(fn, _MARK, ()), *types))
        return fn
    return mark


def event_fold(cls: C) -> C:
    """Register a fold class (it declares ``IGNORES`` and its ``@handles`` methods)."""
    if not isinstance(getattr(cls, "IGNORES", None), frozenset):
        raise TypeError(f"{cls.__name__} must declare IGNORES: a frozenset of event types")
    FOLDS.append(cls)
    return cls


def handlers(cls: type) -> dict[type[Event], str]:
    """``{event type: method name}`` declared by ``cls`` and its bases."""
    return dict(_handler_names(cls))


# Per class: folds are built often (every at(), every Timeline.at); classes never change.
_NAMES: dict[type, tuple[tuple[type[Event], str], ...]] = {}


def _handler_names(cls: type) -> tuple[tuple[type[Event], str], ...]:
    names = _NAMES.get(cls)
    if names is None:
        table: dict[type[Event], str] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                for t in getattr(member, _MARK, ()):
                    table[t] = name
        names = _NAMES[cls] = tuple(table.items())
    return names


def ignored(cls: type) -> frozenset[type[Event]]:
    found: frozenset[type[Event]] = getattr(cls, "IGNORES", frozenset())
    return found


def _nothing(e: Event) -> None:
    pass


def bind(obj: Any) -> dict[type[Event], Callable[[Any], None]]:
    """The dispatch table of a fold instance: each type to its bound handler (a no-op
    for an ignored type)."""
    cls = type(obj)
    table: dict[type[Event], Callable[[Any], None]] = dict.fromkeys(ignored(cls), _nothing)
    for t, name in _handler_names(cls):
        table[t] = getattr(obj, name)
    return table


def fold_all(fold: object, table: dict[type[Event], Callable[[Any], None]],
             events: Iterable[Event]) -> Event | None:
    """Feed ``events`` in order to ``table`` (:func:`bind` of ``fold``); the last event
    folded, or None. The replay hot path: one dict lookup per event, and the
    "undeclared type" check only once a ``KeyError`` is raised."""
    e: Any = None
    last = None
    try:
        for e in events:
            table[type(e)](e)
            last = e
    except KeyError:
        if e is not last and type(e) not in table:
            raise unhandled(fold, e) from None
        raise  # raised by a handler, not by the lookup
    return last


def _tags(types: Iterable[type[Event]]) -> str:
    return ", ".join(sorted(tag_of(t) if t in EVENT_TYPES else t.__name__ for t in types))


def coverage_problems(cls: type, event_types: Iterable[type[Event]] = EVENT_TYPES) -> list[str]:
    """What is wrong with a fold's declaration, in words naming the fold (empty: sound)."""
    every = frozenset(event_types)
    handled = frozenset(handlers(cls))
    ignores = ignored(cls)
    name = cls.__qualname__
    problems = []
    if missing := every - handled - ignores:
        problems.append(f"{name} neither handles nor ignores: {_tags(missing)} "
                        f"(add a @handles method, or list them in {name}.IGNORES)")
    if both := handled & ignores:
        problems.append(f"{name} both handles and ignores: {_tags(both)}")
    if unknown := (handled | ignores) - every:
        problems.append(f"{name} names types that are not events: {_tags(unknown)}")
    return problems


def unhandled(fold: object, e: Event) -> TypeError:
    """The error a fold raises for an event type it never declared."""
    return TypeError(f"{type(fold).__qualname__} has no handler for {type(e).__name__} "
                     "(declare it with @handles or in IGNORES)")
