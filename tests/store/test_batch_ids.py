"""Store.append checks a batch's ids in one pass (one match over the ids joined by
newlines, two sets); its verdict is the per-event check's, whatever the ids."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import ConvlogError
from engine.session import Session
from engine.store import MemoryStore
from engine.store.base import check_id

# Ids that pass and ids that break one rule each: a newline (which the joined match
# would otherwise read as two ids), dots, a bad first character, too long, empty.
IDS = st.one_of(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,12}", fullmatch=True),
    st.sampled_from(["a\nb", "a\n", "\nb", "a..b", ".a", "-a", "", "x" * 200, "x" * 201,
                     "a b", "é", "a\r", "ok"]),
    st.text(max_size=6))


def _verdict(fn: object) -> str:
    try:
        fn()  # type: ignore[operator]
    except ConvlogError as exc:
        return type(exc).__name__
    return "ok"


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(IDS, min_size=2, max_size=5), other_session=st.booleans())
def test_a_batch_is_refused_exactly_when_one_of_its_events_would_be(
        ids: list[str], other_session: bool) -> None:
    store = MemoryStore()
    session = Session.create(store)
    mid = "018f0000-0000-7000-8000-000000000002"
    store.append(session.id, [ev.MessageStarted(id="start", message_id=mid, role="user")])
    events = [ev.TextAdded(id=i, message_id=mid, part_id=f"p{n}", text="x")
              for n, i in enumerate(ids)]
    if other_session:
        events[-1] = msgspec.structs.replace(events[-1], session_id="another-session")
    # The per-event rules, event by event: its id, then a repeat within the batch, then
    # its session; then an id stored already (the retry rule refuses this one).
    expected = "ok"
    seen: set[str] = set()
    for e in events:
        expected = _verdict(lambda e=e: check_id("event", e.id))
        if expected != "ok":
            break
        if e.id in seen:
            expected = "DuplicateEventId"
            break
        seen.add(e.id)
        if e.session_id and e.session_id != session.id:
            expected = "BadBatch"
            break
    else:
        if "start" in ids:
            expected = "refused"
    got = _verdict(lambda: store.append(session.id, events))
    if expected == "refused":
        assert got != "ok"
    else:
        assert got == expected
    if got != "ok":
        assert store.version(session.id) == 1  # nothing written


def test_an_id_with_a_newline_is_refused_in_a_batch() -> None:
    store = MemoryStore()
    session = Session.create(store)
    mid = "018f0000-0000-7000-8000-000000000002"
    with pytest.raises(ConvlogError):
        store.append(session.id, [ev.MessageStarted(id="ok-1", message_id=mid, role="user"),
                                  ev.TextAdded(id="a\nb", message_id=mid, part_id="p")])
    assert store.version(session.id) == 0
