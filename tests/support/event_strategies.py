"""Hypothesis strategies for stamped events of every catalog type, and runs of them.

Field values come from ``msgspec.inspect`` (a new event type or field is covered
without touching this file). The envelope is drawn to stress a storage codec: ids
from the engine's own generator (predictable), other UUIDs, upper-case and
arbitrary strings; times that step, repeat, jump and go backwards over the whole
64-bit range; default and overridden actors; ``v`` of 1 and above.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from engine import events as ev
from engine.events import Event
from engine.ids import EventIds

INT64 = st.integers(-(2**63), 2**63 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(max_size=12)
JSON_SCALAR: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), INT64, FLOATS, TEXT)
JSON_VALUE: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALAR,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


def from_type(t: mi.Type) -> st.SearchStrategy[Any]:
    """Values of a msgspec type (as ``msgspec.inspect`` reports it)."""
    if isinstance(t, mi.StrType):
        return TEXT
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.IntType):
        return INT64
    if isinstance(t, mi.FloatType):
        return FLOATS
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.AnyType):
        return JSON_VALUE
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.ListType):
        return st.lists(from_type(t.item_type), max_size=3)
    if isinstance(t, mi.DictType):
        return st.dictionaries(from_type(t.key_type), from_type(t.value_type), max_size=3)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(from_type(x) for x in t.types))
    if isinstance(t, mi.StructType):
        return struct_strategy(t)
    raise AssertionError(f"no strategy for {t!r}")


def struct_strategy(t: mi.StructType, *, skip: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Required fields always, optional ones sometimes (else their default); the fields
    named in ``skip`` keep their defaults."""
    required = {f.name: from_type(f.type) for f in t.fields if f.required and f.name not in skip}
    optional = {f.name: from_type(f.type) for f in t.fields
                if not f.required and f.name not in skip}
    cls = t.cls
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))


_ENVELOPE = ("id", "session_id", "seq", "time", "actor", "v")


def body_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    """An event of ``cls`` with any field values and a blank envelope."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return struct_strategy(info, skip=_ENVELOPE)


ANY_BODY: st.SearchStrategy[Event] = st.one_of(*(body_strategy(c) for c in ev.EVENT_TYPES))

_TIME_STEP = st.one_of(st.integers(0, 3), st.integers(-5, 5), st.integers(-(10**12), 10**12))


@st.composite
def runs(draw: st.DrawFn, bodies: st.SearchStrategy[Event] = ANY_BODY, *,
         max_size: int = 40) -> tuple[str, int, list[Event]]:
    """(session id, first seq, consecutive stamped events of that session)."""
    session_id = draw(st.sampled_from(["019b76da-a801-7005-8c2c-d958d8744d16", "", "s é"]))
    first = draw(st.sampled_from([1, 2, 513, 10**12]))
    raw = draw(st.lists(bodies, min_size=1, max_size=max_size))
    gen = EventIds()
    t = draw(st.one_of(st.just(1_767_225_600_000), INT64))
    shared_msg = draw(TEXT)
    shared_part = draw(TEXT)
    out: list[Event] = []
    for i, e in enumerate(raw):
        if i:  # mostly a step from the previous time, now and then anywhere
            t = t + draw(_TIME_STEP) if draw(st.integers(0, 9)) else draw(INT64)
        t = min(max(t, -(2**63)), 2**63 - 1)
        how = draw(st.sampled_from(["gen", "gen", "gen", "uuid", "upper", "text"]))
        if how == "gen":
            event_id = gen(t)
        elif how == "uuid":
            event_id = str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1))))
        elif how == "upper":
            event_id = gen(t).upper()
        else:
            event_id = draw(st.text(max_size=40))
        actor = draw(st.sampled_from([type(e).default_actor, type(e).default_actor, "user",
                                      "assistant", "tool", "agent-7", ""]))
        v = draw(st.sampled_from([1, 1, 1, 2, 7]))
        changes: dict[str, Any] = {"id": event_id, "session_id": session_id,
                                   "seq": first + i, "time": t, "actor": actor, "v": v}
        # Message and part ids: mostly shared by neighbours (as in a stream), else new.
        if "message_id" in e.__struct_fields__:
            changes["message_id"] = draw(st.sampled_from([shared_msg, shared_msg])
                                         | TEXT)
        if "part_id" in e.__struct_fields__:
            changes["part_id"] = draw(st.sampled_from([shared_part, shared_part]) | TEXT)
        out.append(msgspec.structs.replace(e, **changes))
    return session_id, first, out


def drawn_damage(data: st.DataObject, blob: bytes) -> bytes:
    """``blob`` with one drawn damage: a byte flipped, the end cut off, or bytes inserted."""
    damaged = bytearray(blob)
    how = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
    at = data.draw(st.integers(0, len(damaged) - 1))
    if how == "flip":
        damaged[at] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        del damaged[at:]
    else:
        damaged[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    return bytes(damaged)
