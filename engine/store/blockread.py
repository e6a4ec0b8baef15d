"""Reading events back from block storage: shared by the SQLite and PostgreSQL stores.

Both keep a session's events in blocks (engine.store.blocks) plus a position log;
only their SQL differs. Each backend supplies the four small queries below and
this class does the decoding, the position order and the integrity walk once.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import ClassVar

from engine.errors import StoreError, UnknownSession
from engine.events import AnyEvent
from engine.store import blocks
from engine.store.base import Record, Store, Stored


class BlockReader(Store):
    # Highest seq a backend's integer columns hold ("to the end" in range queries).
    SEQ_MAX: ClassVar[int] = 1 << 62
    # Session id <-> small integer key, cached both ways (rows store the key only).
    _sids: dict[str, int]
    _names: dict[int, str]

    @abc.abstractmethod
    def _query_sid(self, session_id: str) -> int | None:
        """The integer key of a session id, or None when there is no such session."""

    @abc.abstractmethod
    def _query_name(self, sid: int) -> str:
        """The session id of an integer key that rows refer to."""

    def _sid(self, session_id: str) -> int:
        sid = self._sids.get(session_id)
        if sid is None:
            found = self._query_sid(session_id)
            if found is None:
                raise UnknownSession(session_id)
            sid = self._sids[session_id] = found
            self._names[sid] = session_id
        return sid

    def _name(self, sid: int) -> str:
        name = self._names.get(sid)
        if name is None:
            name = self._names[sid] = self._query_name(sid)
            self._sids[name] = sid
        return name

    @abc.abstractmethod
    def _block_rows(self, sid: int, first: int, last: int) -> Iterator[tuple[int, int, bytes]]:
        """(first seq, last seq, body) of the blocks that hold seqs first..last, in order."""

    @abc.abstractmethod
    def _log_page(self, after: int, sid: int | None, page: int) -> list[tuple[int, int, int]]:
        """Up to ``page`` (position, sid, seq) rows after ``after``, in position order."""

    @abc.abstractmethod
    def _positions(self, sid: int) -> dict[int, int]:
        """seq -> global position of the session's own events."""

    @abc.abstractmethod
    def _bodies_after_time(self, sid: int, first: int, time_ms: int) -> list[bytes]:
        """Bodies of blocks holding a seq >= first with an event later than time_ms."""

    def _blocks(self, sid: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """(first seq, body) of the blocks that hold seqs first..last, in order."""
        for first_seq, _, body in self._block_rows(sid, first, last):
            yield first_seq, body

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        last = min(last, self.SEQ_MAX)
        for first_seq, last_seq, body in self._block_rows(self._sid(session_id), first, last):
            if last_seq < first:
                continue  # already read, before a merge replaced its block
            if first <= first_seq and last_seq <= last:
                yield from blocks.decode(body)  # whole blocks: one msgspec call each
            else:  # decode only the events asked for
                yield from blocks.decode_range(body, first - first_seq, last - first_seq + 1)
            # A merge committed between two page queries returns a block that overlaps
            # the ones already read: go on after the last seq yielded.
            first = last_seq + 1

    def _own_seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        for body in self._bodies_after_time(self._sid(session_id), first, time_ms):
            for e in blocks.decode(body):
                if e.seq >= first and e.time > time_ms:
                    return e.seq
        return None

    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        only = None if session_id is None else self._sid(session_id)
        cache: dict[int, tuple[int, list[AnyEvent]]] = {}  # sid -> last decoded block
        count = 0
        while True:
            page = 4096 if limit is None else min(4096, limit - count)
            rows = self._log_page(after, only, page)
            for position, sid, seq in rows:
                hit = cache.get(sid)
                if hit is None or not hit[0] <= seq < hit[0] + len(hit[1]):
                    blk = next(self._blocks(sid, seq, seq), None)
                    if blk is None:
                        raise StoreError(f"position {position} has no stored event")
                    hit = cache[sid] = (blk[0], blocks.decode(blk[1]))
                yield Record(position, hit[1][seq - hit[0]])
                after = position
            count += len(rows)
            if len(rows) < page or (limit is not None and count >= limit):
                return

    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        sid = self._sid(session_id)
        positions = self._positions(sid)
        for first_seq, body in self._blocks(sid, 0, self.SEQ_MAX):
            try:
                canon, hashes = blocks.split(body)
            except Exception as exc:
                yield Stored(first_seq, b"", None, f"unreadable block: {exc}")
                continue
            for i, (c, h) in enumerate(zip(canon, hashes, strict=True)):
                seq = first_seq + i
                try:
                    obj = blocks.builtins(c)
                except Exception as exc:
                    yield Stored(seq, h, None, f"undecodable event: {exc}", positions.get(seq))
                    continue
                yield Stored(seq, h, obj, None, positions.get(seq))

    def _hash_at(self, session_id: str, seq: int) -> bytes | None:
        for first_seq, body in self._blocks(self._sid(session_id), seq, seq):
            return blocks.split(body)[1][seq - first_seq]
        return None
