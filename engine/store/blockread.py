"""Reading events back from block storage: shared by the SQLite and PostgreSQL recorders.

Both keep a session's events in blocks (engine.store.blocks) plus a position log;
only their SQL differs. Each backend supplies the small queries below;
:class:`BlockReader` (the reading half of a recorder) does the decoding and the
position order once, and :class:`BlockVerifier` (the verification reader over what
such a recorder selects) the integrity walk. Neither is a store: the store composed
over them is :class:`engine.store.sql.SQLStore`.

The position log is read as *ranges* ``(first position, session, first seq,
count)``: SQLite stores it that way (a streamed session's appends extend one
row), PostgreSQL still stores a row per event and hands them over as ranges of 1.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import ClassVar, TypeVar

from engine.errors import CorruptLog, StoreError, UnknownSession
from engine.events import AnyEvent
from engine.store import blocks
from engine.store.base import Record, Span, Stored
from engine.store.chain import GENESIS, Chain
from engine.store.codec_protocol import BlockCodec

T = TypeVar("T")

# (position, sid, seq, count): ``count`` events at consecutive positions and seqs.
Range = tuple[int, int, int, int]


class BlockReader(abc.ABC):
    """The reading half of a block recorder, over the backend's small queries."""

    # Highest seq a backend's integer columns hold ("to the end" in range queries).
    SEQ_MAX: ClassVar[int] = 1 << 62
    # The block codec every read and write goes through (engine.store.codec_protocol);
    # a recorder built with another one sets its own.
    codec: BlockCodec = blocks
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
    def _log_ranges(self, after: int, sid: int | None, page: int) -> list[Range]:
        """Up to ``page`` position ranges holding positions after ``after`` (of one
        session, or all), in position order; the first may start at or before
        ``after`` (the reader skips what it has seen)."""

    @abc.abstractmethod
    def _position_ranges(self, sid: int) -> list[Range]:
        """The position ranges of the session's own events (any order)."""

    @abc.abstractmethod
    def _bodies_after_time(self, sid: int, first: int, time_ms: int) -> list[bytes]:
        """Bodies of blocks holding a seq >= first with an event later than time_ms."""

    def _blocks(self, sid: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """(first seq, body) of the blocks that hold seqs first..last, in order; a
        missing seq is CorruptLog. (The rows start at the first block ending at or
        after ``first``, which is the next one when the block holding ``first`` is
        gone; a reader that indexes a block by seq minus its first seq would return
        the next block's events at the missing seqs.)"""
        for first_seq, last_seq, body in self._block_rows(sid, first, last):
            if last_seq < first:
                continue  # already read, before a merge replaced its block
            if first_seq > first:
                raise CorruptLog(self._name(sid), first, f"seq {first} is missing (the next "
                                 f"stored block starts at seq {first_seq})")
            yield first_seq, body
            first = last_seq + 1

    def select(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        return chain.from_iterable(self._own_blocks(session_id, first, last, self.codec.decode))

    def _own_blocks(self, session_id: str, first: int, last: int,
                    whole: Callable[[bytes, str], Sequence[T]],
                    part: Callable[[bytes, int, int, str], Sequence[T | AnyEvent]] | None
                    = None) -> Iterator[Sequence[T | AnyEvent]]:
        """The events first..last, a block's at a time (a reader chains them: no
        generator step per event); ``whole`` decodes each block read whole, ``part``
        the events of a block cut by ``first`` or ``last`` (the codec's decode_range
        when not given)."""
        cut = self.codec.decode_range if part is None else part
        last = min(last, self.SEQ_MAX)
        for first_seq, last_seq, body in self._block_rows(self._sid(session_id), first, last):
            if last_seq < first:
                continue  # already read, before a merge replaced its block
            if first_seq > first:  # a block is missing: never fold past the hole
                raise CorruptLog(session_id, first, f"seq {first} is missing (the next "
                                 f"stored block starts at seq {first_seq})")
            if first <= first_seq and last_seq <= last:
                yield whole(body, session_id)  # whole blocks: one call each
            else:  # decode only the events asked for
                yield cut(body, first - first_seq, last - first_seq + 1, session_id)
            # A merge committed between two page queries returns a block that overlaps
            # the ones already read: go on after the last seq yielded.
            first = last_seq + 1

    def seq_after_time(self, session_id: str, time_ms: int, first: int) -> int | None:
        decode = self.codec.decode
        for body in self._bodies_after_time(self._sid(session_id), first, time_ms):
            for e in decode(body, session_id):
                if e.seq >= first and e.time > time_ms:
                    return e.seq
        return None

    def select_all(self, after: int, session_id: str | None,
                   limit: int | None) -> Iterator[Record]:
        only = None if session_id is None else self._sid(session_id)
        cache: dict[int, tuple[int, list[AnyEvent]]] = {}  # sid -> last decoded block
        decode = self.codec.decode
        count = 0
        while True:
            ranges = self._log_ranges(after, only, 256)
            for position, sid, seq, n in ranges:
                # The range holding ``after`` may start before it: skip what was seen.
                for i in range(max(0, after - position + 1), n):
                    s = seq + i
                    hit = cache.get(sid)
                    if hit is None or not hit[0] <= s < hit[0] + len(hit[1]):
                        blk = next(self._blocks(sid, s, s), None)
                        if blk is None:
                            raise CorruptLog(self._name(sid), s, f"position {position + i} "
                                             "has no stored event")
                        hit = cache[sid] = (blk[0], decode(blk[1], self._name(sid)))
                        if not 0 <= s - hit[0] < len(hit[1]):  # fewer events than its seqs
                            raise CorruptLog(self._name(sid), s, f"the block from seq {hit[0]} "
                                             f"holds {len(hit[1])} events, not seq {s}")
                    yield Record(position + i, hit[1][s - hit[0]])
                    after = position + i
                    count += 1
                    if limit is not None and count >= limit:
                        return
            if len(ranges) < 256:
                return


class BlockVerifier:
    """The verification reader of a :class:`BlockReader` recorder: the integrity walk
    over the block rows and position ranges it selects (``engine.store.verify``
    calls it). A backend adds the checks of its own indexes (its ids, its head rows)."""

    def __init__(self, recorder: BlockReader, chain: Chain) -> None:
        self.recorder = recorder
        self.chain = chain
        self.codec = recorder.codec  # reads the blocks as its recorder wrote them

    def stored(self, session_id: str) -> Iterator[Stored]:
        for unit in self.units(session_id, deep=True):
            if isinstance(unit, Stored):
                yield unit
            elif unit.events is not None:  # a packed block's events, handed over whole
                canon = self.codec.canonical_all(unit.events)
                for i, (c, e) in enumerate(zip(canon, unit.events, strict=True)):
                    yield Stored(unit.seq + i, b"", None, None, canon=c, event=e)

    def units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        """Per event a :class:`Stored` from blocks that keep per-event hashes; per
        sealed block a :class:`Span` (then, when ``deep``, its events, without a
        stored hash: verification recomputes them and compares the span's last; a
        packed block's typed events come whole, in the span's ``events``)."""
        recorder, codec = self.recorder, self.codec
        sid = recorder._sid(session_id)
        for first_seq, last_seq, body in recorder._block_rows(sid, 0, recorder.SEQ_MAX):
            if codec.is_sealed(body):
                try:
                    head = codec.sealed_head(body)
                except ValueError as exc:
                    yield Stored(first_seq, b"", None, f"unreadable block: {exc}")
                    return
                span = Span(head.first, head.first + head.n - 1, head.last_hash, body,
                            row_first=first_seq, row_last=last_seq)
                if deep:  # a packed block's events whole; else one Stored each, below
                    try:
                        typed = codec.typed_events(body, session_id)
                    except Exception:
                        typed = None  # reported below, where every format reports it
                    if typed is not None:
                        yield span._replace(events=typed)
                        continue
                yield span
                if deep:
                    try:
                        events = codec.stored_events(body, session_id)
                    except Exception as exc:
                        yield Stored(head.first, b"", None, f"unreadable block: {exc}")
                        return
                    for i, (canon, obj, event) in enumerate(events):
                        yield Stored(head.first + i, b"", obj, None, canon=canon, event=event)
                continue
            try:
                raws, hashes = codec.split(body)
            except Exception as exc:
                yield Stored(first_seq, b"", None, f"unreadable block: {exc}")
                continue
            if first_seq + len(raws) - 1 != last_seq:  # reads seek by the row's last seq
                yield Stored(first_seq, b"", None, f"the block of {len(raws)} event(s) from "
                             f"seq {first_seq} is stored as ending at seq {last_seq}")
                return
            yield from _stored(codec, first_seq, raws, hashes)

    def link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        return self.codec.link_holds(self.chain.link, session_id, prev, span.body)

    def span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        # One batch digest loop over the block's canonical bytes (every verify walks
        # every sealed block this way: it is most of a `verify --fast`).
        return self.chain.links(prev, self.codec.canonical_events(span.body, session_id))

    def own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        recorder = self.recorder
        return [(seq, pos, n) for pos, _, seq, n in
                recorder._position_ranges(recorder._sid(session_id))]


def _stored(codec: BlockCodec, first: int, canon: list[bytes],
            hashes: list[bytes] | None) -> Iterator[Stored]:
    for i, c in enumerate(canon):
        seq = first + i
        h = hashes[i] if hashes is not None else b""
        try:
            obj = codec.builtins(c)
        except Exception as exc:
            yield Stored(seq, h, None, f"undecodable event: {exc}")
            continue
        yield Stored(seq, h, obj, None)


def hash_in_block(link: blocks.Link, body: bytes, first_seq: int, seq: int,  # noqa: PLR0917
                  before: Callable[[int], bytes], session_id: str,
                  codec: BlockCodec = blocks) -> bytes:
    """The chain hash of event ``seq`` in a block starting at ``first_seq``. A sealed
    block keeps only its last: one inside is recomputed from the hash before the
    block (``before(first_seq)``) over the events' canonical bytes."""
    if not codec.is_sealed(body):
        return codec.split(body)[1][seq - first_seq]
    head = codec.sealed_head(body)
    if seq == head.first + head.n - 1:
        return head.last_hash
    return links_inside(link, before(head.first), body, session_id, codec)[seq - head.first]


def links_inside(link: blocks.Link, prev: bytes, body: bytes, session_id: str,
                 codec: BlockCodec = blocks) -> list[bytes]:
    """The chain hashes of a sealed block's events, from the hash before it, over the
    events' canonical bytes (the stored bytes keep struct field order)."""
    out = []
    for canon, _, _ in codec.stored_events(body, session_id):
        prev = link(prev, canon)
        out.append(prev)
    return out


def expand(ranges: list[Range]) -> dict[int, int]:
    """seq -> position of some ranges (tests and small sessions)."""
    return {seq + i: pos + i for pos, _, seq, n in ranges for i in range(n)}


def hash_before(link: blocks.Link, block_at: Callable[[int, int], tuple[int, bytes] | None],
                fork_of: Callable[[int], tuple[int | None, int, str]], sid: int,
                seq: int, *, codec: BlockCodec = blocks) -> bytes:
    """The chain hash of seq - 1 of session key ``sid`` (GENESIS before a root's first
    event, the parent's hash at the fork point before a fork's), over a backend's raw
    queries: ``block_at(sid, seq)`` is (first seq, body) of the block holding ``seq``,
    ``fork_of(sid)`` the (parent key, fork seq, session id) of a session. Writers call it when
    they seal, inside their write transaction."""
    while True:
        parent, fork_seq, name = fork_of(sid)
        if seq - 1 > fork_seq:
            break
        if parent is None or seq - 1 <= 0:
            return GENESIS
        sid = parent
    found = block_at(sid, seq - 1)
    if found is None:
        raise StoreError(f"seq {seq - 1} of session key {sid} is not stored")
    first, body = found
    return hash_in_block(link, body, first, seq - 1,
                         lambda s: hash_before(link, block_at, fork_of, sid, s, codec=codec), name,
                         codec)
