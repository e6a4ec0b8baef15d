"""The ingest hot path records exactly what the general path records.

Fast: ``AnthropicIngest.ingest`` (its loop inlines ``feed``), deltas queued directly,
``Lifecycle.apply_batch`` deciding deltas inline, ``Session.record`` stamping
inline, the door's short proof (in the adapter's pre-check and at the store).
General: ``feed`` per event then ``finish``, ``_text``/``_fragment``, ``apply`` per
event, ``_stamp`` per event, the full proof for every event. On random valid and
damaged streams, cut or cancelled at any point, at any batch size: the same events
in the same order (ids renamed by first appearance) and the same error type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from unittest import mock

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.anthropic import AnthropicIngest
from engine.events import Event
from engine.lifecycle import Lifecycle
from engine.session import Session, StepClock
from engine.store import MemoryStore, door
from tests.adapters.test_ingest_fuzz import broken, valid_with_odd_values
from tests.support.anthropic_streams import anthropic_streams

JSON = dict[str, Any]


class _GeneralLifecycle(Lifecycle):
    def apply(self, e: Event) -> bool:  # an override: apply_batch calls it for every event
        return super().apply(e)


class _GeneralSession(Session):
    def record(self, events: Sequence[Event]) -> list[Event]:
        """Session.record as it stamped before the inline loop: _stamp per event."""
        now = self._clock()
        version = self._lc.version
        return self._commit([self._stamp(e, seq=version + i, now=now)
                             for i, e in enumerate(events, start=1)])


def _run(events: list[JSON], batch: int, cancel_at: int | None, *, fast: bool
         ) -> tuple[list[Any], str | None]:
    store = MemoryStore()
    clock = StepClock()
    if fast:
        session = Session.create(store, "018f0000-0000-7000-8000-000000000001", clock=clock)
    else:
        info = store.create_session("018f0000-0000-7000-8000-000000000001",
                                    created=clock())
        session = _GeneralSession(store, info, _GeneralLifecycle(info.id), clock)
    ing = AnthropicIngest(session, batch=batch)
    error: str | None = None
    try:
        if cancel_at is not None:  # a cancel from outside after some events
            for e in events[:cancel_at]:
                ing.feed(e)
            ing.fail("cancelled by the client")
        elif fast:
            ing.ingest(events)
        else:
            ing.direct_deltas = False
            for e in events:
                ing.feed(e)
            ing.finish()
    except Exception as exc:
        error = type(exc).__name__
    return _normalized(list(store.read(session.id))), error


def _normalized(log: list[Event]) -> list[Any]:
    """The log as builtins without the event ids, message and part ids renamed in order
    of first appearance (they are random)."""
    names: dict[str, str] = {}
    out = []
    for e in log:
        for key in ("message_id", "part_id"):
            value = getattr(e, key, None)
            if isinstance(value, str) and value not in names:
                names[value] = f"{key}-{len(names)}"
        out.append(_rename({k: v for k, v in msgspec.to_builtins(e).items() if k != "id"},
                           names))
    return out


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):  # (an event id may be named in an error message)
        return _UUID.sub("<id>", names.get(value, value))
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_fast_path_records_what_the_general_path_records(data: st.DataObject) -> None:
    stream = data.draw(anthropic_streams(max_blocks=5))
    how = data.draw(st.sampled_from(["valid", "odd values", "damaged", "cancelled"]))
    if how == "odd values":
        stream = data.draw(valid_with_odd_values(stream))
    elif how == "damaged":
        stream = data.draw(broken(stream))
    cancel_at = (data.draw(st.integers(0, len(stream))) if how == "cancelled" else None)
    batch = data.draw(st.sampled_from([1, 2, 3, 64]))
    fast = _run(stream, batch, cancel_at, fast=True)
    with mock.patch.dict(door._FAST, clear=True):  # the full proof for every event
        general = _run(stream, batch, cancel_at, fast=False)
    assert fast == general
    if how in ("valid", "odd values"):
        assert fast[0], "a whole stream records at least its start"
