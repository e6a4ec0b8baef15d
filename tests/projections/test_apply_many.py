"""A subscribed WithParts fold takes a committed batch through ``apply_many``: the
same state as folding each event with ``apply``, and the same failure (error and
``seq``) when an event in the middle of a batch cannot be folded."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.adapters.anthropic import AnthropicIngest
from engine.session import Session
from engine.store import MemoryStore
from projections.withparts import WithPartsProjection
from tests.support.anthropic_streams import anthropic_streams

_drain = deque[object](maxlen=0).extend


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=anthropic_streams(), batch=st.sampled_from([1, 5, 64]))
def test_a_subscribed_fold_is_the_fold_of_each_event(stream: list[Any], batch: int) -> None:
    session = Session.create(MemoryStore())
    live = WithPartsProjection(session.id)
    session.subscribe(live)
    AnthropicIngest(session, batch=batch).ingest(stream)
    one_by_one = WithPartsProjection(session.id)
    for e in session.store.read(session.id):
        one_by_one.apply(e)
    assert live.seq == one_by_one.seq == session.version
    assert live.messages() == one_by_one.messages()


def _events(session: Session) -> list[ev.Event]:
    mid = session.start_message("assistant")
    ref = session.add_text(mid, "a")
    session.text_delta(ref, "b")
    return list(session.store.read(session.id))


def test_a_failure_in_a_batch_stops_where_apply_stops() -> None:
    session = Session.create(MemoryStore())
    good = _events(session)
    unknown = ev.TextDelta(message_id=good[0].message_id, part_id="prt_missing",  # type: ignore[attr-defined]
                           delta="x", seq=len(good) + 1)
    batch = [*good, unknown, good[-1]]
    many, each = WithPartsProjection(session.id), WithPartsProjection(session.id)
    with pytest.raises(KeyError) as by_many:
        many.apply_many(batch)
    with pytest.raises(KeyError) as by_each:
        _drain(map(each.apply, batch))
    assert str(by_many.value) == str(by_each.value)
    assert many.seq == each.seq == len(good)
    assert many.messages() == each.messages()


class _Counting(WithPartsProjection):
    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.calls = 0

    def __call__(self, e: ev.Event) -> None:
        self.calls += 1
        super().apply(e)


def test_a_subclass_gets_each_event_through_its_own_call() -> None:
    session = Session.create(MemoryStore())
    fold = _Counting(session.id)
    session.subscribe(fold)
    _events(session)
    session.user_message("hello")  # a batch of four events
    assert fold.calls == session.version
