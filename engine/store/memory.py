"""``memory://``: a process-local store, for tests, benchmarks and embedding.

``MemoryStore`` is the shared pipeline (:class:`~engine.store.composed.ComposedStore`)
over :class:`MemoryRecorder`, which keeps the decoded events themselves, so reads cost
nothing; the pipeline still assigns positions and chains hashes, so it passes the same
contract as the durable stores. Durability options are accepted and mean nothing here.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from operator import attrgetter

import msgspec

from engine.errors import SessionExists, UnknownSession
from engine.events import AnyEvent, Event
from engine.store.base import Prepared, Record, SessionInfo, Stored
from engine.store.chain import HASH_BYTES
from engine.store.composed import ComposedStore

_ID = attrgetter("id")


# Not an event id (ids are strs); see MemoryRecorder._ids.
_HASHES_INLINE = -1


class _Own:
    """One session's own events with their hashes and positions."""

    __slots__ = ("base", "events", "genesis", "hashes", "info", "run_index", "run_pos")

    def __init__(self, info: SessionInfo, genesis: bytes) -> None:
        self.info = info
        self.base = info.fork_seq or 0  # own seqs start after it
        self.genesis = genesis
        self.events: list[AnyEvent] = []
        # The events' chain hashes end to end, HASH_BYTES each: one buffer the garbage
        # collector never walks, not a bytes object per event in a list it walks.
        self.hashes = bytearray()
        # Runs of own events at consecutive global positions (a session appended alone
        # is one run): each run's first index in ``events`` and its position.
        self.run_index: list[int] = []
        self.run_pos: list[int] = []

    def positions(self) -> Iterator[int]:
        """The global position of each own event, in order."""
        ends = [*self.run_index[1:], len(self.events)] if self.run_index else []
        for first, pos, end in zip(self.run_index, self.run_pos, ends, strict=True):
            yield from range(pos, pos + end - first)


class MemoryStore(ComposedStore):
    """``memory://``: the pipeline over a :class:`MemoryRecorder`."""

    recorder: MemoryRecorder

    def __init__(self, url: str = "memory://", *, key: bytes | None = None,
                 durability: str = "sync", max_event_bytes: int | None = None) -> None:
        # Any durability is accepted: it means nothing in memory.
        super().__init__(MemoryRecorder(), url=url, durability=durability, key=key,
                         max_event_bytes=max_event_bytes, durabilities=(durability,))


class MemoryRecorder:
    """Sessions, events, positions and snapshots in dicts and lists."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sessions: dict[str, SessionInfo] = {}
        self._own: dict[str, _Own] = {}
        # Plain ints and strs only, no tuple per event: the garbage collector never
        # has to look at them (a streamed session holds millions).
        # Event id -> position. The one key that is not a str (an int, at position 0,
        # which no event has) makes the dict keep each key's hash in its table: a probe
        # that meets another key then compares hashes without reading that key's
        # string, which in a large index is a cache miss (a fresh id's lookup probes a
        # few). An int, not a str subclass: that would be an object the collector
        # tracks, which makes it track the dict and walk all its keys and values in
        # every full collection.
        self._ids: dict[str | int, int] = {_HASHES_INLINE: 0}
        self._count = 0  # events stored: the last position
        # The global log as runs, not a record per event: a run is one session's
        # consecutive own events at consecutive positions (batches of one session in a
        # row extend the same run). Per run: its first position (ascending), session,
        # and the index of its first event in that session's own list.
        self._run_pos: list[int] = []
        self._run_sid: list[str] = []
        self._run_index: list[int] = []
        self._snapshots: dict[tuple[str, str], list[tuple[int, bytes]]] = {}

    def lock(self) -> threading.RLock:
        return self._lock

    def create(self, info: SessionInfo, genesis: bytes) -> None:
        with self._lock:
            if info.id in self._sessions:
                raise SessionExists(info.id)
            self._sessions[info.id] = info
            self._own[info.id] = _Own(info, genesis)

    def info(self, session_id: str) -> SessionInfo:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSession(session_id) from None

    def sessions(self) -> list[SessionInfo]:
        return sorted(self._sessions.values(), key=lambda s: (s.created, s.id))

    def version(self, session_id: str) -> int:
        own = self._own[session_id].events
        return own[-1].seq if own else 0

    def head(self, session_id: str) -> tuple[int, bytes]:
        own = self._own.get(session_id)
        if own is None:
            raise UnknownSession(session_id)
        if own.events:
            return own.events[-1].seq, bytes(own.hashes[-HASH_BYTES:])
        return own.base, own.genesis

    def _where(self, pos: int) -> tuple[str, int, int]:
        """(session, seq, position) of the event stored at ``pos``."""
        r = bisect.bisect_right(self._run_pos, pos) - 1
        sid = self._run_sid[r]
        return sid, self._own[sid].events[self._run_index[r] + pos - self._run_pos[r]].seq, pos

    def stored_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]:
        ids = self._ids
        if len(events) == 1:  # the common case: one dict lookup, no comprehension
            hit = ids.get(events[0].id)
            return {events[0].id: self._where(hit)} if hit else {}
        if ids.keys().isdisjoint(map(_ID, events)):  # new ids: one C-level pass
            return {}
        return {e.id: self._where(ids[e.id]) for e in events if ids.get(e.id)}

    def insert(self, session_id: str, batch: Prepared) -> int:
        own = self._own[session_id]
        stored, ids = own.events, self._ids
        first_index = len(stored)
        pos0 = self._count + 1
        stored.extend(batch.events)  # type: ignore[arg-type]
        own.hashes += b"".join(batch.hashes)
        n = len(batch.events)
        self._count += n
        if n == 1:  # the common case (a command, a streamed delta)
            ids[batch.events[0].id] = pos0
        else:
            ids.update(zip(map(_ID, batch.events), range(pos0, pos0 + n), strict=True))
        # A new run unless the batch continues the last one (no other session between).
        run_sid = self._run_sid
        if not (run_sid and run_sid[-1] == session_id
                and self._run_index[-1] + pos0 - self._run_pos[-1] == first_index):
            self._run_pos.append(pos0)
            run_sid.append(session_id)
            self._run_index.append(first_index)
        if not (own.run_pos and own.run_pos[-1] + first_index - own.run_index[-1] == pos0):
            own.run_pos.append(pos0)
            own.run_index.append(first_index)
        return pos0

    def select(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        own = self._own[session_id].events
        if not own:
            return iter(())
        base = own[0].seq  # a fork's own events start after its fork point
        lo = max(first - base, 0)
        hi = max(last - base + 1, 0)
        return iter(own[lo:hi])

    def find(self, event_id: str) -> tuple[str, int] | None:
        found = self._ids.get(event_id)
        return self._where(found)[:2] if found else None

    def select_all(self, after: int, session_id: str | None,
                   limit: int | None) -> Iterator[Record]:
        end = self._count  # what is stored now; later appends are not read
        count = 0
        pos = max(after + 1, 1)
        starts, sids, firsts = self._run_pos, self._run_sid, self._run_index
        r = bisect.bisect_right(starts, pos) - 1
        while pos <= end:
            last = min(starts[r + 1] - 1, end) if r + 1 < len(starts) else end
            sid = sids[r]
            if session_id is None or sid == session_id:
                events, shift = self._own[sid].events, firsts[r] - starts[r]
                for p in range(pos, last + 1):
                    yield Record(p, events[shift + p])
                    count += 1
                    if limit is not None and count >= limit:
                        return
            pos = last + 1
            r += 1

    def last_position(self) -> int:
        return self._count

    def stored(self, session_id: str) -> Iterator[Stored]:
        own = self._own[session_id]
        hashes = own.hashes
        ends = range(HASH_BYTES, len(hashes) + 1, HASH_BYTES)
        for e, end, pos in zip(own.events, ends, own.positions(), strict=True):
            h = bytes(hashes[end - HASH_BYTES:end])
            obj = msgspec.to_builtins(e)
            yield Stored(e.seq, h, obj, None, pos)

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        snaps = self._snapshots.setdefault((session_id, name), [])
        i = bisect.bisect_left(snaps, seq, key=lambda s: s[0])
        if i < len(snaps) and snaps[i][0] == seq:
            snaps[i] = (seq, data)
        else:
            snaps.insert(i, (seq, data))

    def latest_snapshot(self, session_id: str, name: str,
                        max_seq: int) -> tuple[int, bytes] | None:
        snaps = self._snapshots.get((session_id, name), [])
        i = bisect.bisect_right(snaps, max_seq, key=lambda s: s[0])
        return snaps[i - 1] if i else None
