"""A store composed over a narrow recorder: the way to add a backend.

:class:`Store` is the append pipeline (ids, the duplicate rule, the expected
version, the door, canonical bytes, the hash chain) and the reads over lineage;
:class:`~engine.store.composed.ComposedStore` wraps it around a backend's recorder.
The built-in recorders keep events in their own formats (blocks, packed payloads).
A new backend need not: it implements :class:`Recorder`, nine small methods over
rows of bytes it never has to understand, and :class:`RecordedStore` is the store
(``RecordedStore(recorder)``, as eventsourcing composes ``EventStore(mapper,
recorder)``): the same ComposedStore over :class:`Rows`, which turns rows into the
events a store reads. Verification is the same reader it is for every store
(:func:`engine.store.verify.verify` over what the recorder selects).

A recorder keeps, per event, a :class:`Row` (the session, seq, id, the event's
canonical bytes and its chain hash) at a global position it assigns, and a few
named values (session records and snapshots, as bytes). Everything it stores is
bytes the store made; it decodes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

import msgspec

from engine.codec import from_stored
from engine.errors import SessionExists, UnknownSession
from engine.events import AnyEvent, Event
from engine.store.base import Prepared, Record, SessionInfo, Stored
from engine.store.blocks import builtins
from engine.store.composed import ComposedStore


class Row(NamedTuple):
    """One stored event, as a recorder keeps it."""

    position: int  # the global position, from 1, without gaps (the recorder's)
    session_id: str
    seq: int
    event_id: str
    canon: bytes  # the event's canonical bytes: what the chain hash covers
    hash: bytes  # the chain hash after this event


class Recorder(Protocol):
    """What a backend implements. Every write happens inside ``lock()``."""

    def lock(self) -> AbstractContextManager[object]:
        """The write lock: one writer at a time, re-entrant within a thread."""

    def insert(self, rows: Sequence[Row]) -> int:
        """Store the rows (their ``position`` is 0) at the next global positions, all
        or none; returns the first position."""

    def select(self, session_id: str, first: int, last: int) -> Iterable[Row]:
        """The session's own rows with seq ``first..last``, by seq."""

    def select_after(self, position: int) -> Iterable[Row]:
        """Every row after a global position, by position (what is stored now)."""

    def head(self, session_id: str) -> Row | None:
        """The session's last own row, if any."""

    def find(self, event_id: str) -> Row | None:
        """The row of an event id, if stored."""

    def put(self, key: str, value: bytes) -> None:
        """Keep a named value (session records, snapshots), replacing any."""

    def get(self, key: str) -> bytes | None: ...

    def keys(self, prefix: str) -> list[str]:
        """The names kept that start with ``prefix``."""


class _Session(msgspec.Struct, array_like=True):
    created: int
    parent: str | None
    fork_seq: int | None
    genesis: bytes


_enc = msgspec.msgpack.Encoder()
_session_dec = msgspec.msgpack.Decoder(_Session)
_SESSION = "session/"
_SNAPSHOT = "snapshot/"


def _decode(row: Row) -> AnyEvent:
    return from_stored(builtins(row.canon))  # (upcast when the catalog has moved on)


class RecordedStore(ComposedStore):
    """The store of a :class:`Recorder`: ``RecordedStore(MyRecorder(), url="my://")``."""

    recorder: Rows

    def __init__(self, recorder: Recorder, *, url: str = "recorded://",
                 key: bytes | None = None, max_event_bytes: int | None = None) -> None:
        super().__init__(Rows(recorder), url=url, key=key, max_event_bytes=max_event_bytes)


class Rows:
    """A :class:`Recorder`'s rows as the recorder a :class:`ComposedStore` wraps:
    session records and snapshots as named values, events decoded from their bytes."""

    def __init__(self, rows: Recorder) -> None:
        self.rows = rows
        self._lock = rows.lock()

    def lock(self) -> AbstractContextManager[object]:
        return self._lock

    # -- sessions
    def create(self, info: SessionInfo, genesis: bytes) -> None:
        with self._lock:
            if self.rows.get(_SESSION + info.id) is not None:
                raise SessionExists(info.id)
            self.rows.put(_SESSION + info.id, _enc.encode(
                _Session(info.created, info.parent, info.fork_seq, genesis)))

    def _session(self, session_id: str) -> _Session:
        found = self.rows.get(_SESSION + session_id)
        if found is None:
            raise UnknownSession(session_id)
        return _session_dec.decode(found)

    def info(self, session_id: str) -> SessionInfo:
        s = self._session(session_id)
        return SessionInfo(session_id, s.created, s.parent, s.fork_seq)

    def sessions(self) -> list[SessionInfo]:
        found = [self.info(k[len(_SESSION):]) for k in self.rows.keys(_SESSION)]
        return sorted(found, key=lambda s: (s.created, s.id))

    # -- the write side
    def head(self, session_id: str) -> tuple[int, bytes]:
        s = self._session(session_id)
        last = self.rows.head(session_id)
        return (s.fork_seq or 0, s.genesis) if last is None else (last.seq, last.hash)

    def stored_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]:
        found = {}
        for e in events:
            row = self.rows.find(e.id)
            if row is not None:
                found[e.id] = (row.session_id, row.seq, row.position)
        return found

    def insert(self, session_id: str, batch: Prepared) -> int:
        return self.rows.insert([
            Row(0, session_id, e.seq, e.id, c, h)
            for e, c, h in zip(batch.events, batch.canon, batch.hashes, strict=True)])

    # -- reads
    def version(self, session_id: str) -> int:
        last = self.rows.head(session_id)
        return 0 if last is None else last.seq

    def select(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        return map(_decode, self.rows.select(session_id, first, last))

    def find(self, event_id: str) -> tuple[str, int] | None:
        row = self.rows.find(event_id)
        return None if row is None else (row.session_id, row.seq)

    def select_all(self, after: int, session_id: str | None,
                   limit: int | None) -> Iterator[Record]:
        count = 0
        for row in self.rows.select_after(after):
            if limit is not None and count >= limit:
                return
            if session_id is None or row.session_id == session_id:
                count += 1
                yield Record(row.position, _decode(row))

    def last_position(self) -> int:
        rows = list(self.rows.select_after(0))
        return rows[-1].position if rows else 0

    # -- verification reads the rows as stored (engine.store.verify)
    def stored(self, session_id: str) -> Iterator[Stored]:
        for row in self.rows.select(session_id, 0, 1 << 62):
            try:
                obj = builtins(row.canon)
            except (msgspec.DecodeError, ValueError) as exc:
                yield Stored(row.seq, row.hash, None, f"unreadable event: {exc}", row.position)
                continue
            yield Stored(row.seq, row.hash, obj, None, row.position, row.canon)

    # -- snapshots: named values
    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        with self._lock:
            self.rows.put(f"{_SNAPSHOT}{session_id}/{seq:020d}/{name}", data)

    def latest_snapshot(self, session_id: str, name: str,
                        max_seq: int) -> tuple[int, bytes] | None:
        prefix = f"{_SNAPSHOT}{session_id}/"
        best: tuple[int, bytes] | None = None
        for key in self.rows.keys(prefix):
            seq_text, _, key_name = key[len(prefix):].partition("/")
            seq = int(seq_text)
            if key_name == name and seq <= max_seq and (best is None or seq > best[0]):
                value = self.rows.get(key)
                if value is not None:
                    best = (seq, value)
        return best
