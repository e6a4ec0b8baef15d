"""Free-form event fields (typed ``Any`` somewhere inside: metadata, tool input) and
the one rule msgspec's typed decoding cannot check in them: every map key a string.

The canonical bytes that the hash chain covers are only defined for string keys (the
encoder sorts them), and the door refuses anything else, so no stored event holds
another key. Damaged msgpack can still decode to one (a flipped byte turns a key's
header into an integer); a read must refuse it as it refuses any other damage, not
hand on an event that no store could have written."""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from engine.events import EVENT_TYPES, Event

_CONTAINERS = (dict, list)


def holds(info: msgspec.inspect.Type, kinds: tuple[type, ...], seen: set[type] | None = None,
          skip: frozenset[str] = frozenset()) -> bool:
    """Whether a declared type holds a value of one of ``kinds`` (``msgspec.inspect``
    types) anywhere inside (``skip``: top-level fields left out)."""
    if isinstance(info, kinds):
        return True
    seen = set() if seen is None else seen
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls in seen:
            return False
        seen.add(info.cls)
        return any(holds(f.type, kinds, seen) for f in info.fields if f.name not in skip)
    inner = [getattr(info, name) for name in ("item_type", "key_type", "value_type")
             if hasattr(info, name)]
    inner += list(getattr(info, "types", ()))
    return any(holds(t, kinds, seen) for t in inner)


@functools.cache
def _catalog_info() -> dict[type, msgspec.inspect.Type]:
    # One translation of the whole catalog: the nested types every event shares (the
    # envelope, tokens, sources) have their annotations evaluated once, not once for
    # each event type and each table built from them (four tables, 256 calls, were
    # about 130 ms of importing the door).
    return dict(zip(EVENT_TYPES, msgspec.inspect.multi_type_info(EVENT_TYPES), strict=True))


def struct_info(cls: type[Event]) -> msgspec.inspect.StructType:
    """``msgspec.inspect.type_info(cls)`` of an event class, from one shared translation
    of the catalog (a class outside it is translated alone)."""
    info = _catalog_info().get(cls) or msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    return info


@functools.cache
def free_fields(cls: type[Event]) -> tuple[str, ...]:
    """The names of ``cls``'s fields whose type holds ``Any`` (derived from the catalog)."""
    info = struct_info(cls)
    return tuple(f.name for f in info.fields if holds(f.type, (msgspec.inspect.AnyType,)))


def keys_are_strings(values: list[Any]) -> bool:
    """Whether every map inside ``values``, at any depth, has string keys only: the
    bodies of a packed block, checked once for the block (a loop with a stack:
    damaged bytes may nest deeper than Python's recursion). Typed fields would refuse
    another key as they convert; the free-form ones would not."""
    stack: list[Any] = [values]
    pop, push, containers = stack.pop, stack.append, _CONTAINERS
    while stack:
        value = pop()
        if type(value) is dict:
            for k, x in value.items():
                if type(k) is not str:
                    return False
                if type(x) in containers:
                    push(x)
        else:
            stack.extend(x for x in value if type(x) in containers)
    return True
