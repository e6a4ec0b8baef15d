"""Round trips: every event type through JSON and msgpack, and WithParts JSON via cattrs.

Event strategies are derived generically from ``msgspec.inspect.type_info``, so a
new event type or field is covered without touching this file. ``dict[str, Any]``
fields get JSON-compatible values only (the public format is JSON).
"""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import codec
from engine import events as ev
from engine.errors import EventDecodeError, IllegalTransition, PartValidationError
from engine.events import Event, tag_of
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections import views as v
from projections.json import converter
from projections.timetravel import at
from projections.withparts import WithPartsProjection
from tests.support.event_strategies import struct_strategy


@functools.cache
def event_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    """Any field values, at the schema version the engine writes today (``v``)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    current = ev.SCHEMA_VERSION[cls]
    return struct_strategy(info).map(lambda e: msgspec.structs.replace(e, v=current))


def fields_of(cls: type[Event]) -> tuple[mi.Field, ...]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return info.fields


EVENTS = pytest.mark.parametrize("cls", ev.EVENT_TYPES, ids=[tag_of(c) for c in ev.EVENT_TYPES])
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- events


@EVENTS
@FAST
@given(data=st.data())
def test_event_round_trips_through_json_and_msgpack(cls: type[Event], data: st.DataObject) -> None:
    e = data.draw(event_strategy(cls))
    as_json = codec.encode_json(e)
    assert json.loads(as_json)["type"] == tag_of(cls)
    back = codec.decode_json(as_json)
    assert type(back) is cls
    assert back == e
    assert codec.decode_json(as_json.decode()) == e  # str input too
    packed = codec.encode_msgpack(e)
    back = codec.decode_msgpack(packed)
    assert type(back) is cls
    assert back == e
    buffer = bytearray(b"prefix")
    codec.encode_msgpack_into(e, buffer)
    assert buffer[:6] == b"prefix"
    assert codec.decode_msgpack(bytes(buffer[6:])) == e
    assert codec.from_builtins(codec.to_builtins(e)) == e
    assert codec.decode_json_list(msgspec.json.encode([e, e])) == [e, e]
    assert codec.decode_msgpack_list(msgspec.msgpack.encode([e, e])) == [e, e]
    # Re-encoding is stable byte for byte.
    assert codec.encode_json(codec.decode_json(as_json)) == as_json
    assert codec.encode_msgpack(codec.decode_msgpack(packed)) == packed


@EVENTS
@FAST
@given(data=st.data())
def test_missing_required_field_is_named(cls: type[Event], data: st.DataObject) -> None:
    required = [f for f in fields_of(cls) if f.required]
    if not required:
        return
    e = data.draw(event_strategy(cls))
    field = data.draw(st.sampled_from(required))
    obj = codec.to_builtins(e)
    del obj[field.encode_name]
    with pytest.raises(EventDecodeError) as from_json:
        codec.decode_json(json.dumps(obj).encode())
    with pytest.raises(EventDecodeError) as from_msgpack:
        codec.decode_msgpack(msgspec.msgpack.encode(obj))
    for info in (from_json, from_msgpack):
        assert field.encode_name in str(info.value)
        assert info.value.path == f"$.{field.encode_name}"


WRONG_VALUES: list[Any] = [{"not": "this"}, 12345, "text", [1, 2], True, None]


@EVENTS
@FAST
@given(data=st.data())
def test_wrong_type_is_named(cls: type[Event], data: st.DataObject) -> None:
    """A value of the wrong JSON kind fails with the path of its field."""
    e = data.draw(event_strategy(cls))
    field = data.draw(st.sampled_from(fields_of(cls)))
    obj = codec.to_builtins(e)
    for wrong in WRONG_VALUES:
        obj[field.encode_name] = wrong
        back = _decode(json.dumps(obj).encode())
        if isinstance(back, EventDecodeError):
            assert back.path is not None
            assert back.path.startswith(f"$.{field.encode_name}"), back
            assert field.encode_name in str(back)
        else:  # the value was acceptable after all (a union, Any, a nullable field)
            assert getattr(back, field.name) == wrong


def _decode(raw: bytes) -> Event | EventDecodeError:
    try:
        return codec.decode_json(raw)
    except EventDecodeError as exc:
        return exc


def test_wrong_type_examples() -> None:
    bad = b'{"type": "text.delta", "message_id": "m", "part_id": "p", "delta": 5}'
    with pytest.raises(EventDecodeError) as info:
        codec.decode_json(bad)
    assert info.value.path == "$.delta"
    bad = b'{"type": "tool.completed", "message_id": "m", "part_id": "p", "output": "x",' \
          b' "attachments": [{"part_id": 1, "mime": "a", "url": "u"}]}'
    with pytest.raises(EventDecodeError) as info:
        codec.decode_json(bad)
    assert info.value.path == "$.attachments[0].part_id"


@given(tag=st.text(max_size=20).filter(lambda t: t not in ev.EVENT_BY_TAG))
@FAST
def test_unknown_event_type_is_an_error(tag: str) -> None:
    raw = json.dumps({"type": tag, "message_id": "m"}).encode()
    with pytest.raises(EventDecodeError, match="type"):
        codec.decode_json(raw)
    with pytest.raises(EventDecodeError, match="type"):
        codec.decode_msgpack(msgspec.msgpack.encode({"type": tag, "message_id": "m"}))


@EVENTS
def test_unknown_field_is_an_error(cls: type[Event]) -> None:
    obj = {"type": tag_of(cls), **{f.encode_name: _minimal(f.type) for f in fields_of(cls)
                                   if f.required}}
    assert codec.decode_json(json.dumps(obj).encode()).__class__ is cls
    obj["surprise"] = 1
    with pytest.raises(EventDecodeError, match="surprise"):
        codec.decode_json(json.dumps(obj).encode())


def _minimal(t: mi.Type) -> Any:
    if isinstance(t, mi.StrType):
        return "x"
    if isinstance(t, mi.IntType | mi.FloatType):
        return 0
    if isinstance(t, mi.BoolType):
        return False
    if isinstance(t, mi.LiteralType):
        return t.values[0]
    if isinstance(t, mi.ListType):
        return []
    if isinstance(t, mi.DictType | mi.AnyType):
        return {}
    if isinstance(t, mi.UnionType):
        return _minimal(t.types[0])
    assert isinstance(t, mi.StructType)
    out = {f.encode_name: _minimal(f.type) for f in t.fields if f.required}
    if t.tag_field is not None:
        out[t.tag_field] = t.tag
    return out


# --------------------------------------------------------------------------- WithParts JSON


PART_TYPES = [c for c in ev.EVENT_TYPES if issubclass(c, ev.PartEvent)]
CREATING = {ev.TextAdded, ev.ReasoningAdded, ev.FileAdded, ev.ToolAdded, ev.StepStarted,
            ev.StepFinished, ev.SnapshotAdded, ev.PatchAdded, ev.AgentAdded, ev.SubtaskAdded,
            ev.RetryAdded, ev.CompactionAdded}
ENVELOPE = {"id": "", "session_id": "", "seq": 0, "time": 0, "actor": "", "v": 1}


@st.composite
def random_session(draw: st.DrawFn) -> Session:
    """A session built from random raw events; the rejected ones are simply dropped."""
    session = Session.create(MemoryStore(), clock=StepClock(step=7))
    for _ in range(draw(st.integers(1, 40))):
        lc = session.lifecycle
        open_ids = [m for m, msg in lc.messages.items() if msg.state == "open"]
        if not open_ids or draw(st.integers(0, 7)) == 0:
            started = draw(event_strategy(ev.MessageStarted))
            e: Event = msgspec.structs.replace(
                started, **ENVELOPE, message_id=str(draw(st.uuids())), parent_id=None)
        elif draw(st.integers(0, 9)) == 0:
            done = draw(event_strategy(ev.MessageCompleted))
            e = msgspec.structs.replace(done, **ENVELOPE,
                                        message_id=draw(st.sampled_from(open_ids)))
        else:
            cls = draw(st.sampled_from(PART_TYPES))
            mid = draw(st.sampled_from(open_ids))
            parts = list(lc.messages[mid].parts)
            pid = (f"prt_{draw(st.uuids()).hex[:12]}" if cls in CREATING or not parts
                   else draw(st.sampled_from(parts)))
            e = msgspec.structs.replace(draw(event_strategy(cls)), **ENVELOPE, message_id=mid,
                                        part_id=pid)
        with contextlib.suppress(IllegalTransition, PartValidationError):
            session.append([e])
    if draw(st.booleans()):
        for mid, msg in list(session.lifecycle.messages.items()):
            if msg.state == "open":
                session.abort(mid)
    return session


def _round_trip(messages: list[v.WithParts]) -> None:
    as_json = converter.unstructure(messages, list[v.WithParts])
    text = json.dumps(as_json, sort_keys=True)
    back = converter.structure(json.loads(text), list[v.WithParts])
    assert back == messages
    assert json.dumps(converter.unstructure(back, list[v.WithParts]), sort_keys=True) == text
    packed = converter.structure(msgspec.msgpack.decode(msgspec.msgpack.encode(as_json)),
                                 list[v.WithParts])
    assert packed == messages
    for wp in messages:
        one = converter.unstructure(wp)
        assert one["info"]["role"] == wp.info.role
        assert [p["type"] for p in one["parts"]] == [p.TAG for p in wp.parts]
        assert all(p["sessionID"] == wp.info.session_id for p in one["parts"])
        assert converter.structure(one, v.WithParts) == wp


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(session=random_session(), data=st.data())
def test_withparts_json_round_trips(session: Session, data: st.DataObject) -> None:
    store = session.store
    final = WithPartsProjection(session.id).apply_all(store.read(session.id))
    _round_trip(final.messages())
    k = data.draw(st.integers(0, session.version))
    _round_trip(at(store, session.id, k).messages())
    # The projection's own JSON equals the converter's, and restores from it.
    assert final.to_json() == converter.unstructure(final.messages(), list[v.WithParts])
    restored = WithPartsProjection.restore(session.id, final.snapshot())
    assert restored.messages() == final.messages()


def test_random_sessions_are_rich() -> None:
    """The session strategy reaches tools, text and settled states (it is not degenerate)."""
    seen: set[str] = set()

    # Derandomized: a claim about what the strategy reaches, checked on a fixed draw
    # (drawn afresh, 20 examples missed the bar about once in five runs).
    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(session=random_session())
    def collect(session: Session) -> None:
        for e in session.store.read(session.id):
            seen.add(tag_of(type(e)))

    collect()
    assert {"message.started", "text.added", "tool.added", "message.completed"} <= seen
    assert len(seen) >= 12, seen
