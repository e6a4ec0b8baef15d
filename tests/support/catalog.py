"""Events of every catalog type built mechanically from their declarations.

``minimal(cls)`` is a valid instance of an event type (every required field set to
a plain value of its type); ``fields(cls)`` lists every field path inside it with
its declared type, so a test can put a wrong value at any of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import msgspec
from msgspec import inspect as mi

from engine.events import EVENT_TYPES, Event

UUID = "0190a000-0000-7000-8000-00000000f{:03x}"
_EVENT_IDS = itertools.count(1)


def _event_id() -> str:
    """A fresh event id per built event (stores refuse an empty one)."""
    return f"0190a000-0000-7000-8000-{0xe0000000 + next(_EVENT_IDS):012x}"


def _value(info: mi.Type, name: str, counter: list[int]) -> Any:
    """A plain valid value of a declared type."""
    if isinstance(info, mi.UnionType):
        options = [t for t in info.types if not isinstance(t, mi.NoneType)]
        return _value(options[0], name, counter)
    if isinstance(info, mi.LiteralType):
        return info.values[0]
    if isinstance(info, mi.StrType):
        counter[0] += 1
        return UUID.format(counter[0]) if name.endswith("id") else f"{name}-value"
    if isinstance(info, mi.BoolType):
        return True
    if isinstance(info, mi.IntType):
        return 3
    if isinstance(info, mi.FloatType):
        return 1.5
    if isinstance(info, mi.ListType):
        return [_value(info.item_type, name, counter)]
    if isinstance(info, mi.DictType):
        return {"k": _value(info.value_type, name, counter)}
    if isinstance(info, mi.StructType):
        return _build(info, counter)
    if isinstance(info, mi.AnyType):
        return {"free": [1, "two", None]}
    raise TypeError(f"no plain value for {info!r}")


def _build(info: mi.StructType, counter: list[int]) -> Any:
    kwargs = {f.name: _value(f.type, f.name, counter) for f in info.fields if f.required}
    return info.cls(**kwargs)


def minimal(cls: type[Event]) -> Event:
    """A valid event of type ``cls`` with every required field and a fresh id (the rest
    of the envelope left for the log to fill)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    event: Event = msgspec.structs.replace(_build(info, [0]), id=_event_id())
    return event


def full(cls: type[Event]) -> Event:
    """Like ``minimal`` but with every optional field set too (so every nested field
    path exists in the instance)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    counter = [100]
    kwargs = {f.name: _value(f.type, f.name, counter) for f in info.fields
              if f.name not in ("id", "session_id", "seq", "time", "actor", "v")}
    event: Event = cls(**kwargs, id=_event_id())
    return event


def field_paths(cls: type[Event]) -> Iterator[tuple[tuple[str, ...], mi.Type]]:
    """(path of attribute names, declared type) of every field of ``full(cls)``, nested
    structs included; the log's envelope stamps (seq, session_id, v) are left out."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)

    def walk(info: mi.StructType, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...],
                                                                             mi.Type]]:
        for f in info.fields:
            if not prefix and f.name in ("seq", "session_id", "v", "id"):
                continue
            path = (*prefix, f.name)
            yield path, f.type
            inner = f.type
            if isinstance(inner, mi.UnionType):
                structs = [t for t in inner.types if isinstance(t, mi.StructType)]
                inner = structs[0] if len(structs) == 1 else inner
            if isinstance(inner, mi.StructType):
                yield from walk(inner, path)

    yield from walk(info, ())


def with_value(event: Any, path: tuple[str, ...], value: Any) -> Any:
    """``event`` with the field at ``path`` replaced (structs rebuilt on the way up)."""
    if len(path) == 1:
        return msgspec.structs.replace(event, **{path[0]: value})
    inner = getattr(event, path[0])
    return msgspec.structs.replace(event, **{path[0]: with_value(inner, path[1:], value)})


def literal_fields() -> list[tuple[type[Event], tuple[str, ...], tuple[Any, ...]]]:
    """Every (event type, field path, allowed values) whose type is a Literal."""
    out = []
    for cls in EVENT_TYPES:
        for path, info in field_paths(cls):
            lits = [info] if isinstance(info, mi.LiteralType) else [
                t for t in getattr(info, "types", ()) if isinstance(t, mi.LiteralType)]
            for lit in lits:
                out.append((cls, path, tuple(lit.values)))
    return out


def typed_fields() -> list[tuple[type[Event], tuple[str, ...], mi.Type]]:
    """Every (event type, field path, declared type) of the catalog."""
    return [(cls, path, info) for cls in EVENT_TYPES for path, info in field_paths(cls)]
