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
"""

from __future__ import annotations

import abc
import enum
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from operator import attrgetter
from typing import Any, NamedTuple

import attrs
import msgspec

from engine.codec import MAX_EVENT_BYTES, canonical
from engine.errors import (
    BadBatch,
    ConcurrencyError,
    DuplicateEventId,
    EventIdConflict,
    EventTooLarge,
    InvalidEvent,
    InvalidId,
    PartialDuplicate,
    StoreError,
)
from engine.events import AnyEvent, Event
from engine.store.chain import GENESIS, Chain


def _load_door() -> None:
    """Bind :func:`admit` and :func:`admit_all` to the door's own functions, on the first
    write: the door compiles its checks from the event catalog at import (tens of ms),
    which a read command never needs. After the first call a write pays nothing."""
    global admit, admit_all
    from engine.store import door  # noqa: PLC0415 - see the docstring

    admit, admit_all = door.admit, door.admit_all


def _first_admit(event: Event) -> bytes:
    _load_door()
    return admit(event)


def _first_admit_all(events: Iterable[Event], *, stamped: bool = False) -> list[bytes]:
    _load_door()
    return admit_all(events, stamped=stamped)


admit: Callable[[Event], bytes] = _first_admit
admit_all: Callable[..., list[bytes]] = _first_admit_all


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
    """Raised by a recorder's :meth:`Store._insert` when its id index refused the batch
    (an id is stored already) and nothing was written: the pipeline classifies it."""


class Store(abc.ABC):
    """The event store: one append pipeline over a backend's recorder.

    The pipeline, written once here, is what :meth:`append` runs: id checks, the
    duplicate-id rule (:meth:`_match`), the expected version, the door and the
    canonical bytes (:func:`engine.store.door.admit`), the hash chain
    (:meth:`_prepare`), in the one loop :meth:`_record`. A backend is a
    *recorder*: it keeps sessions, implements the write hooks that loop calls
    (``_write_lock``, :meth:`_write_head`, :meth:`_stored_ids`, :meth:`_insert`)
    and selects events back (the ``_own_*`` methods, over a session's own events
    only).
    """

    url: str
    durability: str = SYNC
    chain: Chain = Chain(None)
    max_event_bytes: int = MAX_EVENT_BYTES
    # Why appends are refused (a keyed store opened without its key), else None.
    _refuse: str | None = None

    def _configure(self, url: str, *, durability: str, key: bytes | None,
                   max_event_bytes: int | None, durabilities: tuple[str, ...] = (SYNC, BATCHED),
                   ) -> None:
        """The constructor preamble every backend shares."""
        self.url = url
        if durability not in durabilities:
            raise StoreError(f"unknown durability {durability!r}; use sync or batched")
        self.durability = durability
        self.chain = Chain(key)
        if max_event_bytes is not None:
            self.max_event_bytes = max_event_bytes

    # -- sessions
    def create_session(
        self, session_id: str, *, created: int, parent: str | None = None,
        fork_seq: int | None = None,
    ) -> SessionInfo:
        """A new session; a fork (``parent``, ``fork_seq``) shares the parent's first
        ``fork_seq`` events and starts its chain at the parent's hash there."""
        check_id("session", session_id)
        if parent is not None:
            self.session_info(parent)
        # The parent's prefix up to the fork point never changes: no lock needed.
        genesis = self._genesis(parent, fork_seq)
        info = SessionInfo(session_id, created, parent, fork_seq)
        self._create_session(info, genesis)
        return info

    @abc.abstractmethod
    def _create_session(self, info: SessionInfo, genesis: bytes) -> None:
        """Record the new session and where its chain starts; SessionExists if taken."""

    @abc.abstractmethod
    def session_info(self, session_id: str) -> SessionInfo:
        """Raises UnknownSession."""

    @abc.abstractmethod
    def sessions(self) -> list[SessionInfo]: ...

    # -- events
    def _own_version(self, session_id: str) -> int:
        """Highest own seq stored for the session, 0 when none."""
        return self._head(session_id)[0]

    @abc.abstractmethod
    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]: ...

    @abc.abstractmethod
    def find_event(self, event_id: str) -> tuple[str, int] | None:
        """(session id, seq) of the stored event with this id."""

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        """Smallest own seq >= first whose time is after time_ms (a scan; block stores
        skip blocks by their time bound)."""
        for e in self._own_read(session_id, first, 1 << 62):
            if e.time > time_ms:
                return e.seq
        return None

    @abc.abstractmethod
    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        """Own events of every session (or of one) with position > ``after``, by position."""

    @abc.abstractmethod
    def last_position(self) -> int:
        """The highest committed global position (0 for an empty store)."""

    @abc.abstractmethod
    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        """The session's own stored events, undecoded, in storage order (for verify)."""

    def _own_units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        """What verification walks: per event a :class:`Stored`; a block store also
        gives a :class:`Span` per sealed block (followed, when ``deep``, by its events
        with an empty stored hash, or carrying them whole in ``Span.events``)."""
        return self._own_stored(session_id)

    def _link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        """Whether a sealed block's link matches its bytes after chain hash ``prev``."""
        raise NotImplementedError("this store has no sealed blocks")

    def _verify_ids(self, ids: dict[int, str]) -> str | None:
        """What is wrong with the store's event id index, given every event's id by
        global position (a deep verify of the whole store), or None."""
        return None

    def _span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        """The chain hashes of a sealed block's events, recomputed from ``prev``."""
        raise NotImplementedError("this store has no sealed blocks")

    def _own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        """(first seq, first position, count) ranges of the session's own events, or
        None when the positions come with each :class:`Stored` instead."""
        return None

    @abc.abstractmethod
    def _head(self, session_id: str) -> tuple[int, bytes]:
        """(own version, hash of the last own event) as the store's session record says."""

    # True where the head record is written in the same transaction as the events it
    # counts (the SQL stores, whose reads stop at it): a head behind the log then hides
    # stored events and is damage. JSONL writes its head file after the lines, so a
    # crash in between leaves a head behind, and its reads follow the lines anyway.
    _head_with_events = False

    def _recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        """The head as recorded apart from the events (verify compares the log to it)."""
        return self._head(session_id)

    def _write_state_problem(self, session_id: str) -> str | None:
        """What is wrong with the bookkeeping the next append of the session relies on
        beyond the events and the head (SQLite's seal mark), or None."""
        return None

    def _recorded_genesis(self, session_id: str) -> bytes | None:
        """Where the session's chain starts, where a store records it apart from the
        events (verify compares it to the hash the lineage reaches), else None."""
        return None

    # -- snapshots (caches of projection state; never the truth)
    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._put_snapshot(session_id, check_snapshot_name(name), seq, data)

    def latest_snapshot(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        """The snapshot with the greatest seq <= max_seq."""
        return self._latest_snapshot(session_id, check_snapshot_name(name), max_seq)

    def snapshots_at(self, session_id: str,
                     wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        """The snapshots stored at exactly these ``(name, seq)`` pairs, by pair; a pair
        with none stored is absent. One read where the backend can (SQL): a restore
        loads every message chunk of a state at once instead of one query each."""
        return self._snapshots_at(session_id, [(check_snapshot_name(n), s) for n, s in wanted])

    def _snapshots_at(self, session_id: str,
                      wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        found = {}
        for name, seq in wanted:
            hit = self._latest_snapshot(session_id, name, seq)
            if hit is not None and hit[0] == seq:
                found[name, seq] = hit[1]
        return found

    @abc.abstractmethod
    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None: ...

    @abc.abstractmethod
    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None: ...

    def migrate(self) -> bool:
        """Bring a store of an older layout to this release's, as its first write would
        (``convlog migrate``); True when it changed anything. A store at today's layout,
        or a backend without older ones, is left as it is."""
        return False

    def flush(self) -> None:  # noqa: B027 - sync stores have nothing buffered
        """Make every acknowledged append durable now (batched durability)."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Flush and release resources."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ appending

    def append(self, session_id: str, events: Iterable[Event],
               expected_version: Expected = ANY) -> Appended:
        """Store events after the session's current version; all or nothing.

        Events may leave ``seq`` (0) and ``session_id`` ("") empty: the store fills
        them in. A given seq must be the next one. Returns seqs and positions.
        """
        if self._refuse:
            raise StoreError(self._refuse)
        if session_id not in _CHECKED_SESSIONS:
            check_id("session", session_id)
            if len(_CHECKED_SESSIONS) < 100_000:
                _CHECKED_SESSIONS.add(session_id)
        if events.__class__ is Stamped and events and expected_version.__class__ is int:
            # The session's own stamp (see Stamped): nothing of it to check here.
            try:
                return self._record(session_id, events, expected_version)
            except IdTaken:
                return self._taken(session_id, events)
        batch = events if type(events) is list or events.__class__ is Admitted else list(events)
        if expected_version.__class__ is not int and (isinstance(expected_version, bool) or
                                                      not isinstance(expected_version,
                                                                     int | StreamState)):
            raise TypeError(f"expected_version must be an int or a StreamState, "
                            f"not {expected_version!r}")
        if len(batch) == 1:  # the common case: no set of ids to build
            e = batch[0]
            check_id("event", e.id)
            if e.session_id and e.session_id != session_id:
                raise BadBatch(f"event {e.id} has session {e.session_id}, not {session_id}")
            try:
                return self._record(session_id, batch, expected_version)
            except IdTaken:
                return self._taken(session_id, batch)
        # The whole batch at once (one join, one match, two sets) when it is well formed;
        # the loop below only runs to name what is wrong with one that is not.
        eids = list(map(_EVENT_ID, batch))
        try:
            joined = "\n".join(eids)
            # (The count: an id holding a newline would otherwise pass as two.)
            fine = (_IDS_OK(joined) is not None and ".." not in joined
                    and joined.count("\n") == len(eids) - 1
                    and set(map(type, eids)) == _STR
                    and len(set(eids)) == len(eids)
                    and set(map(_SESSION_ID, batch)) <= {"", session_id})
        except TypeError:  # an id that is not a str
            fine = False
        if fine:
            try:
                return self._record(session_id, batch, expected_version)
            except IdTaken:
                return self._taken(session_id, batch)
        ids: set[str] = set()
        ok = _ID_OK
        for e in batch:
            eid = e.id
            if eid.__class__ is not str or ok(eid) is None:
                check_id("event", eid)  # raises, naming the broken rule
            if eid in ids:
                raise DuplicateEventId(eid, "another event of the same batch")
            ids.add(eid)
            if e.session_id and e.session_id != session_id:
                raise BadBatch(f"event {eid} has session {e.session_id}, not {session_id}")
        if not batch:
            self._check_expected(session_id, expected_version, self.version(session_id))
            return Appended(session_id, (), ())
        try:
            return self._record(session_id, batch, expected_version)
        except IdTaken:
            return self._taken(session_id, batch)

    # -- the pipeline over the recorder's write hooks

    def _taken(self, session_id: str, events: Sequence[Event]) -> Appended:
        """The recorder's id index refused the insert (:class:`IdTaken`, nothing was
        written): classify the batch against what is stored now."""
        retried = self._classify(session_id, events, self._stored_ids(session_id, events))
        if retried is not None:
            return retried
        raise StoreError("id index conflict without a stored id")

    def _record(self, session_id: str, events: Sequence[Event], expected: Expected) -> Appended:
        """The write loop, atomically, under the recorder's write lock: the session's
        head, the ids already stored (a retry returns the original result), the
        decision (:meth:`_decide`: expected version, prepared batch), the insert; or
        raise and store nothing. A recorder that can do all of it in one round trip
        overrides this coarser hook and still decides through :meth:`_decide`
        (PostgreSQL)."""
        with self._write_lock:
            actual, head = self._write_head(session_id)
            found = self._early_ids(session_id, events)
            if found:
                retried = self._classify(session_id, events, found)
                if retried is not None:
                    return retried
            batch = self._decide(
                session_id, events, expected, actual=actual, head=head,
                stored=(lambda: found) if found is not None
                else (lambda: self._stored_ids(session_id, events)))
            if isinstance(batch, Appended):  # a retry of a batch that did land
                return batch
            pos0 = self._insert(session_id, batch)
        if len(batch.events) == 1:  # the hot path, without a call
            return Appended(session_id, (batch.first_seq,), (pos0,))
        return self._appended(session_id, batch, pos0)

    @staticmethod
    def _appended(session_id: str, batch: Prepared, pos0: int) -> Appended:
        """What an insert of ``batch`` at positions from ``pos0`` on stored."""
        n = len(batch.events)
        if n == 1:
            return Appended(session_id, (batch.first_seq,), (pos0,))
        first = batch.first_seq
        return Appended(session_id, tuple(range(first, first + n)), tuple(range(pos0, pos0 + n)))

    # The recorder's write hooks, called by _record in this order.

    # The write lock (and the write transaction, where there is one), a reusable
    # context manager set by the recorder: every hook below runs inside it. Leaving
    # it with an exception or without an insert leaves nothing written.
    _write_lock: AbstractContextManager[object]

    @abc.abstractmethod
    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        """(the session's version, fork point included; hash of its last event, or
        where its chain starts) as the next append sees it; UnknownSession."""

    @abc.abstractmethod
    def _stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        """id -> (session, seq, position) of the batch's events already stored."""

    def _early_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]] | None:
        """The stored ids looked up before deciding, or None to look them up only
        when the decision fails (a recorder whose id index refuses a stored id at
        insert, raising :class:`IdTaken`)."""
        return self._stored_ids(session_id, events)

    @abc.abstractmethod
    def _insert(self, session_id: str, batch: Prepared) -> int:
        """Write the prepared batch after the session's head; returns the global
        position of its first event (the batch's positions are consecutive)."""

    # Helpers for backends: called with the store's write lock held.

    @staticmethod
    def _check_expected(session_id: str, expected: Expected, actual: int) -> None:
        if expected is ANY:
            return
        if expected is NO_STREAM:
            if actual != 0:
                raise ConcurrencyError(session_id, "no_stream", actual)
        elif expected is STREAM_EXISTS:
            if actual == 0:
                raise ConcurrencyError(session_id, "stream_exists", actual)
        elif isinstance(expected, int) and expected != actual:
            raise ConcurrencyError(session_id, expected, actual)

    def _decide(self, session_id: str, events: Sequence[Event], expected: Expected, *,
                actual: int, head: bytes,
                stored: Callable[[], dict[str, tuple[str, int, int]]] | None
                ) -> Prepared | Appended:
        """With the write lock held, against the session's (version, head hash): check
        the expected version and prepare the batch. A batch that fails either is a
        retry when it is stored already (``stored()`` looks its ids up): then its
        original result, which the recorder returns without writing. ``stored=None``:
        the head may be stale (a cache), so a failure is raised as it is."""
        try:
            if expected is not ANY:
                self._check_expected(session_id, expected, actual)
            return self._prepare(session_id, events, actual, head)
        except (ConcurrencyError, BadBatch) as exc:
            if isinstance(exc, InvalidEvent) or stored is None:
                raise
            retried = self._classify(session_id, events, stored())
            if retried is not None:
                return retried
            raise

    def _classify(self, session_id: str, events: Sequence[Event],
                  found: dict[str, tuple[str, int, int]]) -> Appended | None:
        """``found``: id -> (session, seq, position) of the batch's stored ids.

        None when no id is stored; the original result for an exact retry; raises
        for a changed event under a stored id (:meth:`_match`) and for a batch that
        is partly stored.
        """
        if not found:
            return None
        for e in events:
            where = found.get(e.id)
            if where is not None:
                self._match(session_id, e, where[0], where[1])
        if len(found) == len(events):
            return Appended(session_id, tuple(found[e.id][1] for e in events),
                            tuple(found[e.id][2] for e in events), retried=True)
        raise PartialDuplicate(session_id, [e.id for e in events if e.id in found],
                               [e.id for e in events if e.id not in found])

    def _match(self, session_id: str, event: Event, where: str, seq: int, *,
               same_content: bool = True) -> int:
        """The duplicate-id rule, the one place it is decided: ``event``'s id is stored
        at ``where`` seq ``seq``. In this session's history (its fork lineage
        included) with the same content it is a retry: returns the seq. Under another
        session it is :class:`DuplicateEventId`; with different content,
        :class:`EventIdConflict`. The content compared is the canonical bytes,
        without what the log stamps (seq, session) and the envelope fields the writer
        left empty (time, actor), which the first append filled in."""
        if where != session_id and not any(
                sid == where and (limit is None or seq <= limit)
                for sid, limit in self.lineage(session_id)):
            raise DuplicateEventId(event.id, f"session {where} seq {seq}")
        if not same_content:
            return seq
        stored = next(iter(self._own_read(where, seq, seq)), None)
        if stored is None:
            raise StoreError(f"event {event.id} is indexed at session {where} seq {seq} "
                             "but not stored there (run convlog verify)")
        given = msgspec.structs.replace(
            event, seq=stored.seq, session_id=stored.session_id,
            time=event.time or stored.time, actor=event.actor or stored.actor)
        if admit(given) != canonical(stored):
            raise EventIdConflict(event.id, where, seq, _first_difference(given, stored))
        return seq

    def stored_seqs(self, session_id: str, events: Sequence[Event], *,
                    same_content: bool = True) -> list[int | None]:
        """Per event: the seq at which it is already in the session's history (an
        idempotent retry), or None when its id is new (or empty). Raises as
        :meth:`_match` does; ``same_content=False`` lets the stored event stand
        for any content under its id (see ``Session.append(keep_stored=True)``).
        ``Session.append`` uses it to drop retried events before its tables see
        the batch."""
        out: list[int | None] = []
        for e in events:
            hit = self.find_event(e.id) if e.id else None
            out.append(None if hit is None else self._match(
                session_id, e, hit[0], hit[1], same_content=same_content))
        return out

    def _prepare(self, session_id: str, events: Sequence[Event], actual: int,
                 prev_hash: bytes) -> Prepared:
        """Stamp seqs and session, encode canonical bytes, check sizes, chain hashes."""
        limit = self.max_event_bytes
        seq = actual + 1
        if len(events) == 1:  # the common case, without the loop's bookkeeping
            e = events[0]
            if e.seq != seq or e.session_id != session_id:
                if e.seq not in (0, seq):
                    raise BadBatch(f"event {e.id} has seq {e.seq}; the next seq of session "
                                   f"{session_id} is {seq}")
                e = msgspec.structs.replace(e, seq=seq, session_id=session_id)
            data = admit(e)
            if len(data) > limit:
                raise EventTooLarge(e.id, len(data), limit)
            return Prepared([e], [data], [self.chain.link(prev_hash, data)], seq)
        stamped = events.__class__ is Stamped and events[0].seq == seq
        # (A stamped batch is never changed below: no copy.)
        out = events if stamped and isinstance(events, list) else list(events)
        restamp = not stamped and (list(map(_SEQ, out)) != list(range(seq, seq + len(out)))
                                   or set(map(_SESSION_ID, out)) != {session_id})
        if restamp:
            for i, e in enumerate(out, start=seq):  # stamp what is missing, refuse the rest
                if e.seq != i or e.session_id != session_id:
                    if e.seq not in (0, i):
                        raise BadBatch(f"event {e.id} has seq {e.seq}; the next seq of "
                                       f"session {session_id} is {i}")
                    out[i - seq] = msgspec.structs.replace(e, seq=i, session_id=session_id)
        # Whole-batch passes: encode every event, then chain them in one loop.
        canon = events.canon if (  # the door's own bytes of exactly these events
            events.__class__ is Admitted and not restamp
            and len(events.canon) == len(out)) else admit_all(out, stamped=stamped)
        if max(map(len, canon)) > limit:
            e, data = next((e, d) for e, d in zip(out, canon, strict=True) if len(d) > limit)
            raise EventTooLarge(e.id, len(data), limit)
        hashes = self.chain.links(prev_hash, canon)
        return Prepared(out, canon, hashes, actual + 1)

    def _genesis(self, parent: str | None, fork_seq: int | None) -> bytes:
        """Where a new session's chain starts: the parent's hash at the fork point."""
        if parent is None or not fork_seq:
            return GENESIS
        for sid, limit in self.lineage(parent):
            if limit is None or fork_seq <= limit:  # the session that owns seq fork_seq
                found = self._hash_at(sid, fork_seq)
                if found is not None:
                    return found
                break
        raise StoreError(f"fork point {fork_seq} of session {parent} is not stored")

    def _hash_at(self, session_id: str, seq: int) -> bytes | None:
        """The stored hash of one own event (backends with an index override this)."""
        for st in self._own_stored(session_id):
            if st.seq == seq:
                return st.hash
        return None

    # ------------------------------------------------------------------ shared reading logic

    def lineage(self, session_id: str) -> list[tuple[str, int | None]]:
        """[(session, last seq read from it)] from the root ancestor down to this session."""
        chain: list[tuple[str, int | None]] = []
        info = self.session_info(session_id)
        limit: int | None = None
        while True:
            chain.append((info.id, limit))
            if info.parent is None:
                break
            limit = info.fork_seq if limit is None else min(limit, info.fork_seq or 0)
            info = self.session_info(info.parent)
        chain.reverse()
        return chain

    def version(self, session_id: str) -> int:
        info = self.session_info(session_id)
        own = self._own_version(session_id)
        return max(own, info.fork_seq or 0)

    def read(self, session_id: str, first: int = 1, last: int | None = None) -> Iterator[AnyEvent]:
        """Events first..last (inclusive) of the session, through its fork lineage."""
        start = first
        end = last if last is not None else 1 << 62
        for sid, limit in self.lineage(session_id):
            stop = end if limit is None else min(limit, end)
            if start <= stop:
                yield from self._own_read(sid, start, stop)
            if limit is not None:
                start = max(start, limit + 1)

    def contains(self, session_id: str, event_id: str) -> int | None:
        """The seq of ``event_id`` if it belongs to this session's history (lineage included)."""
        found = self.find_event(event_id)
        if found is None:
            return None
        where, seq = found
        for sid, limit in self.lineage(session_id):
            if sid == where and (limit is None or seq <= limit):
                return seq
        return None

    def seq_at_time(self, session_id: str, time_ms: int) -> int:
        """Length of the longest prefix whose events all have time <= time_ms."""
        first = 1
        for sid, limit in self.lineage(session_id):
            after = self._own_seq_after_time(sid, time_ms, first)
            if after is not None and (limit is None or after <= limit):
                return after - 1
            if limit is not None:
                first = limit + 1
        return self.version(session_id)

    def subscribe(self, after: int = 0, *, session_id: str | None = None,
                  idle_timeout: float | None = None, poll: float = 0.05,
                  stop: Callable[[], bool] | None = None) -> Iterator[Record]:
        """Every event with position > ``after``: the backlog, then new events as they
        commit, in position order without gaps. Ends after ``idle_timeout`` seconds
        without a new event, or when ``stop()`` is true; else runs forever.

        This base version polls ``read_all``; PostgreSQL waits on LISTEN/NOTIFY.
        """
        return follow(lambda last: self.read_all(last, session_id=session_id), self._wait,
                      after=after, idle_timeout=idle_timeout, poll=poll, stop=stop)

    def _wait(self, position: int, timeout: float) -> None:
        """Block until something may have been committed after ``position``."""
        time.sleep(timeout)


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


def _first_difference(given: Event, stored: Event) -> str:
    """The first top-level field whose value differs (for the conflict's message)."""
    a: dict[str, Any] = msgspec.to_builtins(given)
    b: dict[str, Any] = msgspec.to_builtins(stored)
    return next((name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)), "")
