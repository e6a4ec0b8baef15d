"""Every fold declares each event type once: handled or deliberately ignored.

A new event type then fails here, naming each fold that forgot it, rather than
with a bare ``KeyError`` in the middle of a replay.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

import projections.qcli  # noqa: F401 - registers ConversationFold
from engine import events as ev
from engine.events import EVENT_TYPES, Event
from projections.dispatch import (
    FOLDS,
    bind,
    coverage_problems,
    event_fold,
    handlers,
    handles,
    ignored,
)
from projections.qcli import ConversationFold
from projections.withparts import WithPartsProjection


def test_the_registry_holds_every_fold() -> None:
    assert {WithPartsProjection, ConversationFold} <= set(FOLDS)


@pytest.mark.parametrize("fold", FOLDS, ids=lambda c: c.__qualname__)
def test_each_event_type_is_handled_or_ignored_exactly_once(fold: type) -> None:
    handled, ignores = set(handlers(fold)), ignored(fold)
    assert not coverage_problems(fold), "\n".join(coverage_problems(fold))
    assert handled | ignores == set(EVENT_TYPES)
    assert not handled & ignores


@pytest.mark.parametrize("fold", FOLDS, ids=lambda c: c.__qualname__)
def test_dispatch_table_is_one_entry_per_event_type(fold: type) -> None:
    table = bind(fold("s"))
    assert set(table) == set(EVENT_TYPES)
    for t, name in handlers(fold).items():
        assert table[t].__name__ == name


def test_a_fold_that_forgets_types_is_named_with_them() -> None:
    class Forgetful:
        IGNORES: ClassVar[frozenset[type[Event]]] = frozenset({ev.TextDelta, ev.ToolAdded})

        @handles(ev.MessageStarted, ev.ToolAdded)
        def _started(self, e: Event) -> None:
            pass

    problems = coverage_problems(Forgetful)
    assert len(problems) == 2
    missing, both = problems
    assert missing.startswith("test_a_fold_that_forgets_types_is_named_with_them.<locals>"
                              ".Forgetful neither handles nor ignores: ")
    assert "message.completed" in missing
    assert "text.delta" not in missing
    assert "message.started" not in missing
    assert "both handles and ignores: tool.added" in both
    assert coverage_problems(Forgetful, [ev.MessageStarted, ev.TextDelta]) == [
        f"{Forgetful.__qualname__} both handles and ignores: tool.added",
        f"{Forgetful.__qualname__} names types that are not events: tool.added",
    ]


class Surprise(ev.MessageEvent, frozen=True, tag="test.surprise"):
    """An event type no fold declares (as if just added to the catalog)."""


@pytest.mark.parametrize("fold", [WithPartsProjection, ConversationFold])
def test_an_undeclared_event_type_names_the_fold(fold: type) -> None:
    surprise = Surprise(message_id="m", seq=1)
    with pytest.raises(TypeError, match=f"{fold.__name__} has no handler for Surprise"):
        fold("s").apply(surprise)
    with pytest.raises(TypeError, match=f"{fold.__name__} has no handler for Surprise"):
        fold("s").apply_all([surprise])


def test_a_key_error_inside_a_handler_stays_a_key_error() -> None:
    # A delta for a message the fold never saw is a broken log, not a missing handler.
    delta = ev.TextDelta(message_id="m", part_id="p", delta="x", seq=1)
    with pytest.raises(KeyError):
        WithPartsProjection("s").apply(delta)
    with pytest.raises(KeyError):
        WithPartsProjection("s").apply_all([delta])


def test_event_fold_requires_an_ignores_declaration() -> None:
    class NoIgnores:
        pass

    with pytest.raises(TypeError, match="NoIgnores must declare IGNORES"):
        event_fold(NoIgnores)
    assert NoIgnores not in FOLDS
