"""convlog's write side: events, transition tables, the lifecycle check, sessions and stores.

Nothing in this package imports :mod:`projections`.
"""

from engine import logging as _logging
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

_logging.default_to_stderr()
