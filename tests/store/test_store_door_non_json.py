"""The door and values of no JSON type (issue 27 item 5).

``bytes`` in a tool's input encoded and decoded back to itself in msgpack, so the
door let it through; the memory and JSONL stores then held something else than
they had chained (JSONL: base64 text) and failed verify for good. The rule closed
here: whatever a free-form field holds is either refused at the door (a typed
:class:`InvalidEvent`, the log unchanged) or held identically by every store, so
verify passes on every store for everything it acknowledged.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.codec import canonical
from engine.errors import InvalidEvent, UnknownSession
from engine.session import Session
from engine.store import Store, open_store
from engine.store.verify import verify
from tests.support.catalog import full, with_value

NON_JSON: list[Any] = [
    b"\xff", b"", bytearray(b"ab"), memoryview(b"x"),
    datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), datetime.date(2026, 1, 2),
    datetime.time(1, 2), datetime.timedelta(seconds=3), uuid.UUID(int=7),
    decimal.Decimal("1.5"), {1, 2}, frozenset(), complex(1, 2), object(),
]


@pytest.fixture
def session(any_url: str) -> Iterator[Session]:
    store = open_store(any_url)
    try:
        yield Session.create(store)
    finally:
        store.close()


def _tool(session: Session) -> Any:
    mid = session.start_message("assistant")
    return session.add_tool(mid, "call-1", "bash")


@pytest.mark.parametrize("value", NON_JSON, ids=lambda v: type(v).__name__)
def test_a_non_json_value_is_refused_on_every_store(session: Session, value: Any) -> None:
    ref = _tool(session)
    before = session.store.version(session.id)
    with pytest.raises(InvalidEvent) as info:
        session.tool_input_ready(ref, {"b": value, "ok": "text"})
    assert info.value.path.startswith("$.input.b")
    text = session.add_text(ref.message_id)
    before = session.store.version(session.id)
    with pytest.raises(InvalidEvent):
        session.end_part(text, metadata={"nested": [1, {"deeper": value}]})
    assert session.store.version(session.id) == before
    assert verify(session.store).ok


def test_the_issue_s_example_leaves_a_store_that_verifies(session: Session) -> None:
    ref = _tool(session)
    with pytest.raises(InvalidEvent, match="bytes is not a JSON value"):
        session.tool_input_ready(ref, {"b": b"\xff"})
    session.tool_input_ready(ref, {"b": "\xff"})  # the text is fine
    report = verify(session.store)
    assert report.ok, report.first


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8), st.binary(max_size=4),
    st.datetimes(timezones=st.just(datetime.UTC)), st.uuids(), st.decimals(allow_nan=False),
    st.sets(st.integers(0, 3), max_size=2),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)

_FIELDS = [(ev.ToolInputReady, "input"), (ev.TextAdded, "metadata"),
           (ev.PartEnded, "metadata"), (ev.ToolCompleted, "metadata")]
SID = "0190a000-0000-7000-8000-0000000d0027"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(_FIELDS), obj=st.dictionaries(st.text(max_size=4), _VALUES,
                                                         max_size=3))
def test_what_a_store_acknowledges_it_reads_back_and_verifies(any_url: str,
                                                               case: tuple[type[ev.Event], str],
                                                               obj: dict[str, Any]) -> None:
    """Any Python values in a free-form field: refused with InvalidEvent and the log
    unchanged, or read back as the same canonical bytes (a tuple is the same array
    as a list) and the whole store sound."""
    cls, name = case
    store: Store = open_store(any_url)
    try:
        try:
            store.session_info(SID)
        except UnknownSession:
            store.create_session(SID, created=1)
        before = store.version(SID)
        event = msgspec.structs.replace(with_value(full(cls), (name,), obj),
                                        id=str(uuid.uuid4()))
        try:
            (seq,) = store.append(SID, [event]).seqs
        except InvalidEvent:
            assert store.version(SID) == before
        else:
            back = next(iter(store.read(SID, seq, seq)))
            assert canonical(getattr(back, name)) == canonical(getattr(event, name))
        report = verify(store, SID, deep=False)
        assert report.ok, report.first
    finally:
        store.close()

