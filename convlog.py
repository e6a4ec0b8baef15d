"""convlog's public face: ``import convlog`` and use it, without knowing the layout.

The code lives in two packages, kept apart on purpose: :mod:`engine` is the write
side (events, transition tables, sessions, stores) and never imports
:mod:`projections`, the read side (pure folds, time travel). This module only
re-exports what a user of both needs; importing it loads no optional SDK
(provider clients, psycopg) until a store or adapter that needs one is used.
"""

from __future__ import annotations

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
