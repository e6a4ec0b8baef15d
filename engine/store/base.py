"""The store contract: append a batch with an expected version, read events back.

A store knows nothing of transition rules; the :class:`~engine.session.Session`
checks events before they reach it. What every backend guarantees:

- ``append(session, events, expected)`` is atomic. ``expected`` follows KurrentDB:
  an exact version, ``ANY``, ``NO_STREAM`` (the session holds no event yet) or
  ``STREAM_EXISTS``; a mismatch raises :class:`ConcurrencyError` naming both.
- Every event passes the door (:mod:`engine.store.door`) before anything is
  written: a value of the wrong type or out of its vocabulary, or one that some
  backend cannot hold, raises :class:`InvalidEvent`.
- Idempotent by event id: a batch whose events are all stored in this session
  (same content) returns the original seqs and positions and writes nothing; a
  batch of which only some are stored raises :class:`PartialDuplicate`; a stored
  id with different content raises :class:`EventIdConflict`; an id of another
  session raises :class:`DuplicateEventId`.
- Seqs are gapless per session. Every event also gets a global *position*, gapless
  across the store and assigned under the store's write lock at commit, so a
  reader of everything (``read_all``, ``subscribe``) never skips an event.
- Every stored event carries ``hash = H(prev || canonical bytes)`` (HMAC-SHA256
  with a key), truncated to 16 bytes; ``engine.store.verify`` checks the chain.
- Forks share their parent's prefix: a fork stores only its own events and reads
  the parent's first ``fork_seq`` events through the lineage. Its chain starts at
  the parent's hash at ``fork_seq``.

This module holds that contract as :class:`Store` (the verbs a user calls, all
abstract) and the types and id rules the pipeline and the recorders share. The
pipeline itself, written once, is :class:`engine.store.composed.ComposedStore`,
the one implementation, over a backend's recorder.
"""

from __future__ import annotations

import abc
import enum
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

import attrs

from engine.errors import (
    InvalidId,
    StoreError,
)
from engine.events import AnyEvent, Event
from engine.store.chain import Chain


class StreamState(enum.Enum):
    """Expected versions that are not a number (KurrentDB's stream states)."""

    ANY = "any"
    NO_STREAM = "no_stream"
    STREAM_EXISTS = "stream_exists"


ANY = StreamState.ANY
NO_STREAM = StreamState.NO_STREAM
STREAM_EXISTS = StreamState.STREAM_EXISTS
Expected = int | StreamState

SYNC = "sync"
BATCHED = "batched"

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
MAX_ID_LENGTH = 200
# One id of at most MAX_ID_LENGTH characters (check_id's shape, its length bound folded in).
_ID_CHARS = rf"[A-Za-z0-9][A-Za-z0-9._:@+=-]{{0,{MAX_ID_LENGTH - 1}}}"
# All of check_id's rules in one C-level match, for the per-event hot path.
_ID_OK = re.compile(rf"(?!.*\.\.){_ID_CHARS}").fullmatch
# _ID_OK over many ids joined by newlines (which no id can hold), for a batch, without
# the ".." lookahead (a backtracking scan of every id): the caller tests the joined
# ids for ".." once instead (a newline between two ids cannot make one).
_IDS_OK = re.compile(rf"(?:{_ID_CHARS}\n)*{_ID_CHARS}").fullmatch
_EVENT_ID = attrgetter("id")
_SESSION_ID = attrgetter("session_id")
_SEQ = attrgetter("seq")
_STR = {str}

_CHECKED_SESSIONS: set[str] = set()  # session ids that passed check_id (a cache)


def check_id(kind: str, value: str) -> str:
    """Ids become file names (JSONL) and SQL parameters: a small safe alphabet only."""
    if (value.__class__ is str and len(value) <= MAX_ID_LENGTH
            and _ID_RE.fullmatch(value) is not None and ".." not in value):
        return value
    if not isinstance(value, str):
        raise InvalidId(kind, repr(value), f"a {type(value).__name__}, not a string")
    if not value:
        raise InvalidId(kind, str(value), "empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidId(kind, value, f"longer than {MAX_ID_LENGTH} characters")
    if _ID_RE.fullmatch(value) is None:
        raise InvalidId(kind, value, "only letters, digits and . _ : @ + = - are allowed "
                                     "(no path separators, spaces, quotes or SQL syntax)")
    if ".." in value:
        raise InvalidId(kind, value, "'..' is not allowed")
    return value


MAX_SNAPSHOT_NAME = 400


def check_snapshot_name(name: str) -> str:
    """Snapshot names are free text (``withparts.v1.msg/<message id>``), the same rule
    on every store: 1 to MAX_SNAPSHOT_NAME characters, no control characters, valid
    Unicode. A store that makes file names of them encodes them (JSONL)."""
    if (name.__class__ is str and 0 < len(name) <= MAX_SNAPSHOT_NAME and name.isprintable()
            and (name.isascii() or _encodable(name))):
        return name
    if not isinstance(name, str) or not name:
        raise InvalidId("snapshot name", str(name), "empty")
    if len(name) > MAX_SNAPSHOT_NAME:
        raise InvalidId("snapshot name", name, f"longer than {MAX_SNAPSHOT_NAME} characters")
    if not name.isprintable():
        raise InvalidId("snapshot name", name, "control characters are not allowed")
    raise InvalidId("snapshot name", name, "not valid Unicode (a lone surrogate)")


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_chain(url: str, algorithm: str, fingerprint: str, chain: Chain) -> str | None:
    """Compare the store's recorded chain with the opener's key.

    A wrong key is refused at once; a keyed store opened without its key (or an
    unkeyed one with a key) can be read, and the returned reason refuses appends.
    """
    if algorithm == chain.algorithm:
        if fingerprint != chain.fingerprint():
            raise StoreError(f"{url}: the key does not match the one this store was created with")
        return None
    if chain.key is None:
        return (f"{url} chains hashes with a secret key ({algorithm}); open it with the key "
                "to append")
    return f"{url} was created without a key ({algorithm}); open it without one to append"


def newer_store(url: str, number: object, ours: int, what: str = "schema") -> StoreError:
    """A store whose number a newer release raised: refused as it is (the CLI's exit 2),
    never read as damage nor written at an older number."""
    return StoreError(f"{url} has {what} {number}, newer than {ours}")


@attrs.frozen
class SessionInfo:
    id: str
    created: int
    parent: str | None = None
    fork_seq: int | None = None


@attrs.frozen
class Appended:
    """What an append stored: one seq and one global position per event of the batch.

    ``retried`` is True when every event was already stored (nothing was written).
    """

    session_id: str
    seqs: tuple[int, ...]
    positions: tuple[int, ...]
    retried: bool = False

    @property
    def version(self) -> int | None:
        return self.seqs[-1] if self.seqs else None

    @property
    def present(self) -> int:
        """How many events of the batch were already stored (all, or none)."""
        return len(self.seqs) if self.retried else 0


class Record(NamedTuple):
    """An event with its global position (``read_all``, ``subscribe``)."""

    position: int
    event: AnyEvent


class Stored(NamedTuple):
    """One stored event as verification sees it: the bytes' builtins (before any
    upcasting) or why they cannot be read, and the stored hash."""

    seq: int
    hash: bytes
    obj: dict[str, Any] | None
    error: str | None = None
    position: int | None = None
    canon: bytes | None = None  # the exact stored canonical bytes, where the format keeps them
    # The event as stored, where the format decodes to events rather than builtins
    # (then ``obj`` is None): a packed sealed block.
    event: AnyEvent | None = None


class Span(NamedTuple):
    """A sealed block as verification sees it: seqs ``seq``..``last``, the chain hash
    of its last event as the block records it, and the stored bytes its block link
    covers (see :mod:`engine.store.blocks`). No per-event hashes are stored inside."""

    seq: int
    last: int
    head: bytes
    body: bytes
    row_first: int = 0  # the seqs its row claims (a block moved between rows differs)
    row_last: int = 0
    # In a deep walk, the block's events as stored when they decode typed (a packed
    # payload), handed over whole instead of as a Stored per event (verify.py).
    events: list[AnyEvent] | None = None


class Prepared(NamedTuple):
    """A batch ready to write: the stamped events, their canonical bytes and hashes."""

    events: list[Event]
    canon: list[bytes]
    hashes: list[bytes]
    first_seq: int

    @property
    def head(self) -> bytes:
        return self.hashes[-1]


class Stamped(list[Event]):
    """A batch a :class:`~engine.session.Session` stamped itself (``Session.record``):
    every id fresh from its own generator (well formed, distinct), its own session id,
    seqs consecutive from the expected version on, a commit time checked to be an
    int in range, the default actors. ``append`` then skips the checks of what the
    session wrote (the id rules, the seq and session stamping, the envelope in the
    short proof); the door still proves every other field and refuses what fails,
    and the id index still refuses an id stored already. Private to the engine: a
    batch from anywhere else is a plain list and is checked in full."""

    __slots__ = ()


class Admitted(list[Event]):
    """A batch whose canonical bytes the door already made, one per event, in
    ``canon`` (:func:`admitted`): ``append`` keeps them instead of proving each event
    a second time. The importer proves a whole plan before it writes any of it (a
    refused event must leave no session behind); its batches are these. Private to
    the engine, like :class:`Stamped`: the bytes must be the door's for exactly these
    events, with their seqs and session id as stored."""

    __slots__ = ("canon",)
    canon: list[bytes]


def admitted(events: list[Event], canon: list[bytes]) -> Admitted:
    """``events`` with the door's bytes of each (``admit(e)`` of exactly ``e``)."""
    batch = Admitted(events)
    batch.canon = canon
    return batch


class IdTaken(Exception):  # a signal between recorder and pipeline, never raised to users
    """Raised by a recorder's ``insert`` when its id index refused the batch
    (an id is stored already) and nothing was written: the pipeline classifies it."""


class Store(abc.ABC):
    """What a user of an event store calls: sessions, the append, reads through a
    session's fork lineage, the global feed, snapshots (the contract in the module
    doc).

    This is an interface, not a base for backends. Its one implementation is
    :class:`~engine.store.composed.ComposedStore`: the append pipeline and lineage
    reads, written once, over a backend's *recorder* (a plain object that keeps
    sessions and events in its layout) and verified by a *reader* over what the
    recorder selects. A new backend writes a recorder, never a ``Store``
    (docs/stores.md, "Writing a fifth backend").
    """

    url: str
    durability: str
    chain: Chain
    max_event_bytes: int

    # -- sessions
    @abc.abstractmethod
    def create_session(self, session_id: str, *, created: int, parent: str | None = None,
                       fork_seq: int | None = None) -> SessionInfo:
        """A new session; a fork (``parent``, ``fork_seq``) shares the parent's first
        ``fork_seq`` events and starts its chain at the parent's hash there."""

    @abc.abstractmethod
    def session_info(self, session_id: str) -> SessionInfo:
        """Raises UnknownSession."""

    @abc.abstractmethod
    def sessions(self) -> list[SessionInfo]:
        """Every session, by creation time."""

    # -- writing
    @abc.abstractmethod
    def append(self, session_id: str, events: Iterable[Event],
               expected_version: Expected = ANY) -> Appended:
        """Store events after the session's current version; all or nothing.

        Events may leave ``seq`` (0) and ``session_id`` ("") empty: the store fills
        them in. A given seq must be the next one. Returns seqs and positions.
        """

    @abc.abstractmethod
    def stored_seqs(self, session_id: str, events: Sequence[Event], *,
                    same_content: bool = True) -> list[int | None]:
        """Per event: the seq at which it is already in the session's history (an
        idempotent retry), or None when its id is new (or empty). Raises as the
        duplicate-id rule does (another session's id, a changed event under a stored
        id); ``same_content=False`` lets the stored event stand for any content under
        its id (see ``Session.append(keep_stored=True)``). ``Session.append`` uses it
        to drop retried events before its tables see the batch."""

    # -- reading
    @abc.abstractmethod
    def lineage(self, session_id: str) -> list[tuple[str, int | None]]:
        """[(session, last seq read from it)] from the root ancestor down to this session."""

    @abc.abstractmethod
    def version(self, session_id: str) -> int:
        """The session's last seq (its fork point when it has no own event), 0 if none."""

    @abc.abstractmethod
    def read(self, session_id: str, first: int = 1, last: int | None = None
             ) -> Iterator[AnyEvent]:
        """Events first..last (inclusive) of the session, through its fork lineage."""

    @abc.abstractmethod
    def contains(self, session_id: str, event_id: str) -> int | None:
        """The seq of ``event_id`` if it belongs to this session's history (lineage included)."""

    @abc.abstractmethod
    def find_event(self, event_id: str) -> tuple[str, int] | None:
        """(session id, seq) of the stored event with this id."""

    @abc.abstractmethod
    def seq_at_time(self, session_id: str, time_ms: int) -> int:
        """Length of the longest prefix whose events all have time <= time_ms."""

    @abc.abstractmethod
    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        """Own events of every session (or of one) with position > ``after``, by position."""

    @abc.abstractmethod
    def last_position(self) -> int:
        """The highest committed global position (0 for an empty store)."""

    @abc.abstractmethod
    def subscribe(self, after: int = 0, *, session_id: str | None = None,
                  idle_timeout: float | None = None, poll: float = 0.05,
                  stop: Callable[[], bool] | None = None) -> Iterator[Record]:
        """Every event with position > ``after``: the backlog, then new events as they
        commit, in position order without gaps. Ends after ``idle_timeout`` seconds
        without a new event, or when ``stop()`` is true; else runs forever."""

    # -- snapshots (caches of projection state; never the truth)
    @abc.abstractmethod
    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        """Keep a snapshot body under a name (``check_snapshot_name``) at a seq."""

    @abc.abstractmethod
    def latest_snapshot(self, session_id: str, name: str,
                        max_seq: int) -> tuple[int, bytes] | None:
        """The snapshot with the greatest seq <= max_seq."""

    @abc.abstractmethod
    def snapshots_at(self, session_id: str,
                     wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        """The snapshots stored at exactly these ``(name, seq)`` pairs, by pair; a pair
        with none stored is absent. One read where the backend can (SQL): a restore
        loads every message chunk of a state at once instead of one query each."""

    # -- the store as a whole
    @abc.abstractmethod
    def migrate(self) -> bool:
        """Bring a store of an older layout to this release's, as its first write would
        (``convlog migrate``); True when it changed anything. A store at today's layout,
        or a backend without older ones, is left as it is."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make every acknowledged append durable now (batched durability)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def follow(read: Callable[[int], Iterable[Record]], wait: Callable[[int, float], None], *,
           after: int, idle_timeout: float | None, poll: float,
           stop: Callable[[], bool] | None) -> Iterator[Record]:
    """The subscribe loop every store shares: ``read(last)`` gives the records after a
    position (the backlog, then what committed since), and ``wait(last, seconds)``
    blocks until more may have committed (a sleep, or a LISTEN/NOTIFY wakeup). Ends
    after ``idle_timeout`` seconds without a record, or when ``stop()`` is true."""
    last = after
    idle_since = time.monotonic()
    while True:
        got = False
        for rec in read(last):
            last = rec.position
            got = True
            yield rec
        if stop is not None and stop():
            return
        now = time.monotonic()
        if got:
            idle_since = now
        elif idle_timeout is not None and now - idle_since >= idle_timeout:
            return
        left = poll if idle_timeout is None else min(poll, idle_timeout - (now - idle_since))
        wait(last, max(left, 0.0))
