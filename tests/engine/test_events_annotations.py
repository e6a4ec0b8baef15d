"""The event catalog's annotations are objects, not strings (engine/events.py says
why: msgspec evaluates a string annotation again at every decoder and type
description it builds, which made importing the door cost ~0.1 s)."""

from __future__ import annotations

import msgspec

from engine import events
from engine.events import EVENT_TYPES


def _structs() -> list[type]:
    return [obj for obj in vars(events).values()
            if isinstance(obj, type) and issubclass(obj, msgspec.Struct)
            and obj.__module__ == events.__name__]


def test_every_struct_of_the_catalog_has_evaluated_annotations() -> None:
    structs = _structs()
    assert set(EVENT_TYPES) <= set(structs)
    strings = [f"{cls.__name__}.{name}" for cls in structs
               for name, ann in vars(cls).get("__annotations__", {}).items()
               if isinstance(ann, str)]
    assert strings == []
