"""convlog's write side: events, transition tables, the lifecycle check, sessions and stores.

Nothing in this package imports :mod:`projections`.

The names below load on first use (PEP 562): importing a submodule runs this file
first, and the ``convlog`` command (:mod:`engine.launch`) must be able to catch a
Ctrl-C from its first line on, before the engine's imports begin.
"""

from __future__ import annotations

from engine.lazy import lazy_names

__version__ = "0.1.0"  # the one definition: pyproject.toml reads it at build time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers know it)
if TYPE_CHECKING:
    from engine.errors import (
        ConcurrencyError,
        ConvlogError,
        DuplicateEventId,
        EventDecodeError,
        IllegalTransition,
        PartValidationError,
        SessionExists,
        StoreError,
        UnknownSession,
    )
    from engine.events import AnyEvent, Event
    from engine.session import PartRef, Session, StepClock, system_clock
    from engine.store import MemoryStore, SQLiteStore, Store, open_store

_HOMES = {
    "engine.errors": ("ConcurrencyError", "ConvlogError", "DuplicateEventId",
                      "EventDecodeError", "IllegalTransition", "PartValidationError",
                      "SessionExists", "StoreError", "UnknownSession"),
    "engine.events": ("AnyEvent", "Event"),
    "engine.session": ("PartRef", "Session", "StepClock", "system_clock"),
    "engine.store": ("MemoryStore", "SQLiteStore", "Store", "open_store"),
}

__all__ = [
    "AnyEvent",
    "ConcurrencyError",
    "ConvlogError",
    "DuplicateEventId",
    "Event",
    "EventDecodeError",
    "IllegalTransition",
    "MemoryStore",
    "PartRef",
    "PartValidationError",
    "SQLiteStore",
    "Session",
    "SessionExists",
    "StepClock",
    "Store",
    "StoreError",
    "UnknownSession",
    "open_store",
    "system_clock",
]


__getattr__ = lazy_names(__name__, globals(), _HOMES)
