"""convlog's public face: ``import convlog`` and use it, without knowing the layout.

The code lives in two packages, kept apart on purpose: :mod:`engine` is the write
side (events, transition tables, sessions, stores) and never imports
:mod:`projections`, the read side (pure folds, time travel). This module only
re-exports what a user of both needs; importing it loads no optional SDK
(provider clients, psycopg) until a store or adapter that needs one is used.

Every name loads on first use (PEP 562, as :mod:`engine`'s and :mod:`projections`'
do): ``import convlog`` imports no store, session, door or projection, and
``convlog.Session`` imports what a session needs and nothing of the read side.
"""

from __future__ import annotations

import importlib

from engine.lazy import lazy_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers know it)
if TYPE_CHECKING:
    from engine import events
    from engine.aio import AsyncSession
    from engine.errors import (
        BadBatch,
        ConcurrencyError,
        ConvlogError,
        CorruptLog,
        DuplicateEventId,
        EventDecodeError,
        EventIdConflict,
        EventTooLarge,
        IllegalTransition,
        InvalidArgument,
        InvalidEvent,
        InvalidId,
        InvalidStateTransition,
        KeyRequired,
        NotRecorded,
        PartialDuplicate,
        PartValidationError,
        ReadOnlyStore,
        SessionClosed,
        SessionExists,
        StoreBusy,
        StoreError,
        StoreNotFound,
        StoreUnreadable,
        UnknownSchemaVersion,
        UnknownSession,
    )
    from engine.events import AnyEvent, Event
    from engine.session import PartRef, Session, StepClock, system_clock
    from engine.store import (
        DEFAULT_URL,
        JSONLStore,
        MemoryStore,
        SessionInfo,
        SQLiteStore,
        Store,
        open_store,
    )
    from projections import views
    from projections.qcli import ConversationFold, ConversationState, conversation_at, sendable
    from projections.timetravel import (
        Diff,
        Snapshotter,
        Timeline,
        at,
        at_time,
        diff,
        write_snapshots,
    )
    from projections.views import WithParts
    from projections.withparts import WithPartsProjection

# Where each public name lives: read from there on first use, then kept here.
_HOMES = {
    "engine.aio": ("AsyncSession",),
    "engine.errors": ("BadBatch", "ConcurrencyError", "ConvlogError", "CorruptLog",
                      "DuplicateEventId", "EventDecodeError", "EventIdConflict", "EventTooLarge",
                      "IllegalTransition", "InvalidArgument", "InvalidEvent", "InvalidId",
                      "InvalidStateTransition", "KeyRequired", "NotRecorded", "PartialDuplicate",
                      "PartValidationError", "ReadOnlyStore", "SessionClosed", "SessionExists",
                      "StoreBusy", "StoreError", "StoreNotFound", "StoreUnreadable",
                      "UnknownSchemaVersion", "UnknownSession"),
    "engine.events": ("AnyEvent", "Event"),
    "engine.session": ("PartRef", "Session", "StepClock", "system_clock"),
    "engine.store": ("DEFAULT_URL", "JSONLStore", "MemoryStore", "SessionInfo", "SQLiteStore",
                     "Store", "open_store"),
    "projections.qcli": ("ConversationFold", "ConversationState", "conversation_at", "sendable"),
    "projections.timetravel": ("Diff", "Snapshotter", "Timeline", "at", "at_time", "diff",
                               "write_snapshots"),
    "projections.views": ("WithParts",),
    "projections.withparts": ("WithPartsProjection",),
}
# The two modules this one re-exports as modules.
_MODULES = {"events": "engine.events", "views": "projections.views"}

__all__ = [
    "DEFAULT_URL",
    "AnyEvent",
    "AsyncSession",
    "BadBatch",
    "ConcurrencyError",
    "ConversationFold",
    "ConversationState",
    "ConvlogError",
    "CorruptLog",
    "Diff",
    "DuplicateEventId",
    "Event",
    "EventDecodeError",
    "EventIdConflict",
    "EventTooLarge",
    "IllegalTransition",
    "InvalidArgument",
    "InvalidEvent",
    "InvalidId",
    "InvalidStateTransition",
    "JSONLStore",
    "KeyRequired",
    "MemoryStore",
    "NotRecorded",
    "PartRef",
    "PartValidationError",
    "PartialDuplicate",
    "ReadOnlyStore",
    "SQLiteStore",
    "Session",
    "SessionClosed",
    "SessionExists",
    "SessionInfo",
    "Snapshotter",
    "StepClock",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreNotFound",
    "StoreUnreadable",
    "Timeline",
    "UnknownSchemaVersion",
    "UnknownSession",
    "WithParts",
    "WithPartsProjection",
    "at",
    "at_time",
    "conversation_at",
    "diff",
    "events",
    "open_store",
    "sendable",
    "system_clock",
    "views",
    "write_snapshots",
]


_name = lazy_names(__name__, globals(), _HOMES)


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        return _name(name)
    value = importlib.import_module(module)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
