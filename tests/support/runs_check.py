"""What a bulk read (engine.store.runs) must give: the events, with each Run standing
for exactly the consecutive deltas it joins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from engine import codec
from engine import events as ev
from engine.events import Event
from engine.store.runs import RUN_KINDS, Run


def assert_runs_join(items: Sequence[Any], events: Sequence[Event], *, ids: bool = True
                     ) -> None:
    """``items`` is ``events`` with some stretches replaced by a Run each: every other
    item is the event itself (same canonical bytes), and each Run's fields are those
    its events share, its text their strings joined. ``ids=False`` (a read made
    with ``ids=False``): an item may lack its event's id (``""``), nothing else."""
    i = 0
    for item in items:
        if type(item) is Run:
            joined = list(events[i:i + item.count])
            assert len(joined) == item.count >= 1
            assert item.kind in RUN_KINDS
            assert (item.first, item.seq, item.time) == (
                joined[0].seq, joined[-1].seq, joined[-1].time)
            field = "fragment" if item.kind is ev.ToolInputDelta else "delta"
            for e in joined:
                assert type(e) is item.kind
                assert (e.message_id, e.part_id) == (  # type: ignore[attr-defined]
                    item.message_id, item.part_id)
                assert e.actor == item.kind.default_actor
                assert e.v == 1
            assert item.text == "".join(getattr(e, field) for e in joined)
            i += item.count
        else:
            event = item
            if not ids and item.id == "":
                event = msgspec.structs.replace(item, id=events[i].id)
            assert event == events[i]
            assert type(event) is type(events[i])
            assert codec.canonical(event) == codec.canonical(events[i])
            i += 1
    assert i == len(events)
