"""The compact storage format shared by SQLite and PostgreSQL: events in blocks.

A row holds a *block* of consecutive events of one session. Two kinds:

- a **tail block** (first byte ``0x00``): the msgpack bytes of the events of one
  append, their 16-byte chain hashes and the highest schema version inside,
  uncompressed. A session's newest events sit in these.
- a **sealed block** (first byte ``0x03``, format 3): once ``SEAL_AT`` tail events
  pile up, the next append merges them into sealed blocks in the same transaction::

      0x03 | link (16) | first seq (8) | count (4) | maxv (2) | kind (2)
           | last hash (16) | payload

  The payload is the events, zlib-compressed (``kind`` names the codec). A sealed
  block keeps **no per-event hash**: only the chain hash of its last event (where
  the next block and the session head continue) and its *block link*
  ``H(hash before the block || tag || session id || bytes after the link)``, with
  the chain's H (SHA-256-128, or HMAC under the store's key). Verifying a sealed
  block is one digest over its stored bytes; the per-event hashes inside are
  recomputed from the events only by a deep check.

Format 2 stores (``0x01``: a zlib'd tail block, per-event hashes kept) stay
readable: their sealed blocks are read and verified as they were written, by the
legacy room (:mod:`engine.store.legacy.blocks_v2`); this module writes and reads
today's two kinds only.
Compression across many events is what makes a streamed delta cost tens of bytes
instead of hundreds. Reading decodes a whole block with one msgspec call.
"""

from __future__ import annotations

import operator
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, cast

import msgspec

from engine.codec import (
    UNENCODABLE,
    OnFirstUse,
    canonical,
    canonical_encoder,
    ext_hook,
    from_stored,
    packb,
    typed_fallback,
    upcasting_active,
    upgrade,
)
from engine.errors import EventDecodeError
from engine.events import SCHEMA_VERSION, AnyEvent, Event
from engine.store import packed, packed_range
from engine.store.chain import HASH_BYTES
from engine.store.runs import Run

SEAL_AT = 128  # uncompressed tail events that trigger a merge into compressed blocks
BLOCK_MAX = 1024  # events per sealed block (see _write_blocks in sqlite.py for the measure)
ZLIB_LEVEL = 3  # measured: level 6 is 2.5x slower to write for 5% fewer bytes

TAIL = b"\x00"  # the first byte of an uncompressed tail block
_SEALED = b"\x03"
_SEALED_BYTE = _SEALED[0]
_HEAD = struct.Struct(">QIHH")  # first seq, count, maxv, payload kind
_LINK_AT = 1
_CONTENT_AT = _LINK_AT + HASH_BYTES  # where the bytes the block link covers begin
_LAST_AT = _CONTENT_AT + _HEAD.size
_PAYLOAD_AT = _LAST_AT + HASH_BYTES
KIND_MSGPACK = 0  # zlib(msgpack array of the events as stored)
KIND_PACKED = 1  # zlib(engine.store.packed payload): columns, ids and times predicted
_LINK_TAG = b"convlog block v3\x00"  # never the start of an event's canonical bytes


class _BlockOut(msgspec.Struct, array_like=True):
    maxv: int
    hashes: bytes
    events: list[msgspec.Raw]


class _BlockIn(msgspec.Struct, array_like=True):
    maxv: int
    hashes: bytes
    events: msgspec.Raw


_enc = msgspec.msgpack.Encoder()
_head_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(_BlockIn))
# ext_hook: integers past 64 bits and lone surrogates (engine.codec.escaped). The typed
# decoders are built on first use: building one evaluates every event class's
# annotations, which a read from stored snapshots never needs.
_typed_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(list[AnyEvent], ext_hook=ext_hook))
_raw_list_dec = msgspec.msgpack.Decoder(list[msgspec.Raw])
_any_dec = msgspec.msgpack.Decoder(ext_hook=ext_hook)


def encode(canon: Sequence[bytes], hashes: Sequence[bytes], maxv: int) -> bytes:
    """A tail block: the events' stored bytes and chain hashes, uncompressed."""
    return TAIL + _enc.encode(_BlockOut(maxv, b"".join(hashes), [msgspec.Raw(c) for c in canon]))


def join_tail(rows: Iterable[tuple[int, bytes]]) -> tuple[list[bytes], list[bytes], list[int]]:
    """The events of a session's uncompressed tail, from its (t_max, body) rows in seq
    order: their stored bytes, hashes and a time bound each (the block's t_max: an
    upper bound is all a merged block's t_max needs)."""
    canon: list[bytes] = []
    hashes: list[bytes] = []
    times: list[int] = []
    for t_max, body in rows:
        c, h = split(bytes(body))
        canon += c
        hashes += h
        times += [t_max] * len(c)
    return canon, hashes, times


Link = Callable[[bytes, bytes], bytes]


def link_input(session_id: str, content: bytes | memoryview) -> bytes:
    return _LINK_TAG + session_id.encode() + b"\x00" + content


def seal(link: Link, session_id: str, prev: bytes, *, first: int, canon: Sequence[bytes],
         last_hash: bytes, maxv: int) -> bytes:
    """A sealed block of the events stored as ``canon`` (their msgpack bytes) from seq
    ``first`` on, whose chain hash before them is ``prev`` and after them
    ``last_hash``. The payload is packed (:mod:`engine.store.packed`) when every event
    decodes, at the current schema, back to exactly its stored bytes; else it keeps
    the stored bytes themselves."""
    kind, data = KIND_MSGPACK, b""
    if maxv <= 1 and not upcasting_active():
        try:
            events = _typed_dec.decode(_enc.encode([msgspec.Raw(c) for c in canon]))
            if all(map(bytes.__eq__, (packb(e, _enc) for e in events), canon)):
                kind, data = KIND_PACKED, packed.pack(events, session_id, first)
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
            pass  # an old or foreign shape: kept as stored
    if kind == KIND_MSGPACK:
        data = _enc.encode([msgspec.Raw(c) for c in canon])
    payload = zlib.compress(data, ZLIB_LEVEL)
    content = _HEAD.pack(first, len(canon), max(maxv, 1), kind) + last_hash + payload
    return _SEALED + link(prev, link_input(session_id, content)) + content


def sealed_rows(link: Link, session_id: str, prev: bytes, *, first: int,
                canon: Sequence[bytes], hashes: Sequence[bytes], times: Sequence[int],
                maxv: int) -> list[tuple[int, int, int, bytes]]:
    """(last seq, first seq, t_max, body) of the sealed blocks, of up to BLOCK_MAX
    events each, that hold the events from seq ``first`` on; ``prev`` is the chain
    hash before seq ``first``, ``hashes`` the events' own."""
    rows = []
    for i in range(0, len(canon), BLOCK_MAX):
        part = canon[i:i + BLOCK_MAX]
        last = hashes[i + len(part) - 1]
        rows.append((first + i + len(part) - 1, first + i, max(times[i:i + BLOCK_MAX]),
                     seal(link, session_id, prev, first=first + i, canon=part,
                          last_hash=last, maxv=maxv)))
        prev = last
    return rows


def is_sealed(body: bytes) -> bool:
    """A format 3 sealed block (no per-event hashes; a block link)."""
    return body[:1] == _SEALED


class Sealed(NamedTuple):
    """The header of a sealed block, read without decompressing it."""

    first: int
    n: int  # events
    maxv: int
    kind: int
    last_hash: bytes
    link: bytes


def sealed_head(body: bytes) -> Sealed:
    if len(body) < _PAYLOAD_AT or body[0] != _SEALED_BYTE:
        raise ValueError("not a sealed block, or one cut short")
    first, count, maxv, kind = _HEAD.unpack_from(body, _CONTENT_AT)
    return Sealed(first, count, maxv, kind, body[_LAST_AT:_PAYLOAD_AT],
                  body[_LINK_AT:_CONTENT_AT])


def link_holds(link: Link, session_id: str, prev: bytes, body: bytes) -> bool:
    """Whether the sealed block's stored link is the one its bytes and ``prev`` make."""
    view = memoryview(body)
    return link(prev, link_input(session_id, view[_CONTENT_AT:])) == body[_LINK_AT:_CONTENT_AT]


def last_hash(body: bytes) -> bytes:
    """The chain hash of a block's last event (any format)."""
    if body[:1] == _SEALED:
        return sealed_head(body).last_hash
    return split(body)[1][-1]


def _sealed_events(body: bytes, session_id: str) -> list[AnyEvent] | None:
    """The events of a packed sealed block as stored (no upcasting), else None."""
    head = sealed_head(body)
    if head.kind != KIND_PACKED:
        return None
    events = packed.unpack(_payload(body), session_id, head.first)
    if len(events) != head.n:
        raise EventDecodeError(f"the block holds {len(events)} events, its header {head.n}")
    return events


# zlib's first output buffer for a sealed payload: a packed block of BLOCK_MAX streamed
# events is about 25 KiB, so the default (16 KiB) is grown and copied for most.
_PAYLOAD_BUFFER = 1 << 16


def _payload(body: bytes) -> bytes:
    try:
        return zlib.decompress(memoryview(body)[_PAYLOAD_AT:], bufsize=_PAYLOAD_BUFFER)
    except zlib.error as exc:
        raise EventDecodeError(f"unreadable block: {exc}") from None


def _packed_for_reading(body: bytes, session_id: str) -> list[AnyEvent] | None:
    """A packed sealed block's events for a read (a damaged header is EventDecodeError);
    None for every other block format."""
    if body[:1] != _SEALED:
        return None
    try:
        return _sealed_events(body, session_id)
    except ValueError as exc:
        raise EventDecodeError(f"unreadable block: {exc}") from None


def _current(events: list[AnyEvent]) -> list[AnyEvent]:
    if not upcasting_active():
        return events
    current = SCHEMA_VERSION
    return [upgrade(e) if e.v != current.get(type(e), 1) else e for e in events]


def stored_events(body: bytes, session_id: str
                  ) -> list[tuple[bytes, dict[str, Any] | None, AnyEvent | None]]:
    """(canonical bytes, builtins, event) of each event of a block as stored, for
    verification (the chain covers the canonical bytes): a packed block gives the
    decoded events (no builtins), any other the builtins (no event)."""
    if body[:1] == _SEALED and sealed_head(body).kind == KIND_PACKED:
        events = _sealed_events(body, session_id) or []
        return [(c, None, e) for c, e in zip(canonical_all(events), events, strict=True)]
    out: list[tuple[bytes, dict[str, Any] | None, AnyEvent | None]] = []
    for raw in raw_events(body):
        obj = builtins(raw)
        out.append((canonical(obj), obj, None))
    return out


def typed_events(body: bytes, session_id: str) -> list[AnyEvent] | None:
    """The events of a packed sealed block as stored (no upcasting), for a deep
    verify; None for every other block format. Damage raises."""
    if body[:1] != _SEALED or sealed_head(body).kind != KIND_PACKED:
        return None
    return _sealed_events(body, session_id)


def canonical_events(body: bytes, session_id: str) -> list[bytes]:
    """The canonical bytes of each event of a sealed block, which the chain covers:
    what :func:`stored_events` gives, without the builtins. A packed block's events
    are encoded in one call and cut apart by one decode (a list's encoding is its
    items' encodings in a row), instead of one encode per event."""
    if body[:1] == _SEALED and sealed_head(body).kind == KIND_PACKED:
        return canonical_all(_sealed_events(body, session_id) or [])
    return [c for c, _, _ in stored_events(body, session_id)]


def canonical_all(events: list[AnyEvent]) -> list[bytes]:
    """Each event's :func:`engine.codec.canonical` bytes: the list encoded in one call
    and cut apart by one decode (a list's encoding is its items' encodings in a row).
    The Raw slices are buffers, which the chain's ``prev + canon`` and hashlib take as
    they are: no copy into bytes per event. A value msgpack lacks (escaped by
    ``canonical``) sends the list event by event."""
    try:
        return cast("list[bytes]", _raw_list_dec.decode(canonical_encoder.encode(events)))
    except UNENCODABLE:
        return [canonical(e) for e in events]


def current(event: AnyEvent) -> AnyEvent:
    """An event as stored, at the current schema version."""
    return _current([event])[0]


def _open(body: bytes) -> tuple[int, bytes | memoryview]:
    """(maxv, the msgpack array of the block's events as stored)."""
    flag = body[:1]
    if flag == _SEALED:
        head = sealed_head(body)
        if head.kind != KIND_MSGPACK:
            raise ValueError(f"payload kind {head.kind} is not msgpack")
        return head.maxv, zlib.decompress(memoryview(body)[_PAYLOAD_AT:])
    block = _head_dec.decode(_unsealed(body))
    return block.maxv, block.events


def max_version(events: Sequence[Event]) -> int:
    return max(e.v for e in events)


def decode(body: bytes, session_id: str = "") -> list[AnyEvent]:
    """The block's events at the current schema version (``session_id``: the block's
    session, which a packed payload does not repeat)."""
    unpacked = _packed_for_reading(body, session_id)
    if unpacked is not None:
        return _current(unpacked)
    try:
        maxv, events = _open(body)
    except (ValueError, zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventDecodeError(f"unreadable block: {exc}") from None
    if maxv <= 1 and not upcasting_active():
        try:
            try:
                return _typed_dec.decode(events)
            except msgspec.ValidationError:  # a lone surrogate where a str belongs?
                typed: list[AnyEvent] = typed_fallback(events, list[AnyEvent])
                return typed
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise EventDecodeError(f"undecodable event in block: {exc}") from None
    return _decode_evolving(events)


def _packed_head(body: bytes) -> Sealed | None:
    """The header of a packed sealed block for a read that may give runs; None for any
    other block format, or while a catalog upcasts (events are then read one by one).
    A damaged header is EventDecodeError."""
    if body[:1] != _SEALED or upcasting_active():
        return None
    try:
        head = sealed_head(body)
    except ValueError as exc:
        raise EventDecodeError(f"unreadable block: {exc}") from None
    return head if head.kind == KIND_PACKED else None


def decode_runs(body: bytes, session_id: str = "", *, ids: bool = True
                ) -> list[AnyEvent | Run]:
    """The block's events as :func:`decode` gives them, except that in a packed sealed
    block each stretch of deltas to one part is one :class:`Run` (a bulk replay:
    ``SQLStore.read_runs``); with ``ids=False`` its events may come without their
    ids (``packed.unpack_runs``). Every other block format, or an upcasting catalog,
    gives events only."""
    head = _packed_head(body)
    if head is not None:
        items = packed.unpack_runs(_payload(body), session_id, head.first, ids=ids)
        end = items[-1].seq if items else head.first - 1
        if end != head.first + head.n - 1:
            raise EventDecodeError(f"the block holds {end - head.first + 1} events, "
                                   f"its header {head.n}")
        return items
    return list(decode(body, session_id))


def decode_runs_range(body: bytes, lo: int, hi: int, session_id: str = "") -> list[AnyEvent | Run]:
    """Events with index lo..hi-1 of the block as :func:`decode_runs` gives them, runs
    cut at both ends; a packed block is decoded only up to ``hi`` (``at(seq)`` reads
    the start of a block after its snapshot). Other formats: :func:`decode_range`."""
    head = _packed_head(body)
    if head is not None:
        lo, hi = max(lo, 0), min(hi, head.n)
        if lo >= hi:
            return []
        items = packed_range.unpack_runs_range(_payload(body), session_id, head.first,
                                               head.first + lo, head.first + hi - 1)
        if not items or items[-1].seq != head.first + hi - 1:
            raise EventDecodeError(f"the block holds fewer events than its header's "
                                   f"{head.n}")
        return items
    return list(decode_range(body, lo, hi, session_id))


def decode_events_range(body: bytes, lo: int, hi: int, session_id: str = "") -> list[AnyEvent]:
    """What :func:`decode_range` gives, but of a packed sealed block only the bodies of
    ``lo..hi-1`` are decoded (``packed_range``), where ``decode_range`` decodes the
    block whole: a read of one event in the middle of a block (the viewer's event under
    the slider) costs a fraction of the block's decode."""
    head = _packed_head(body)
    if head is None:
        return decode_range(body, lo, hi, session_id)
    lo, hi = max(lo, 0), min(hi, head.n)
    if lo >= hi:
        return []
    events = packed_range.unpack_events_range(_payload(body), session_id, head.first,
                                              head.first + lo, head.first + hi - 1)
    if len(events) != hi - lo:
        raise EventDecodeError(f"the block holds fewer events than its header's {head.n}")
    return _current(events)


def _decode_evolving(events: bytes | memoryview) -> list[AnyEvent]:
    try:
        typed = _typed_dec.decode(events)
    except msgspec.ValidationError:  # an old shape: upcast from builtins
        raws: list[dict[str, Any]] = _any_dec.decode(events)
        return [from_stored(obj) for obj in raws]
    except msgspec.DecodeError as exc:
        raise EventDecodeError(f"undecodable event in block: {exc}") from None
    current = SCHEMA_VERSION
    return [upgrade(e) if e.v != current.get(type(e), 1) else e for e in typed]


# The last block opened for a partial read, as (body, maxv, raw events): at(seq) and
# short range reads hit the same block repeatedly. Keyed by the stored bytes
# themselves, so it can never answer for other bytes (a swap of the tuple is atomic).
_last_opened: list[tuple[bytes, int, list[msgspec.Raw]]] = []
_one_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(AnyEvent, ext_hook=ext_hook))


def _one(raw: msgspec.Raw) -> AnyEvent:
    try:
        event: AnyEvent = _one_dec.decode(raw)
        return event
    except msgspec.ValidationError:  # a lone surrogate where a str belongs?
        event = typed_fallback(raw, AnyEvent)
        return event


def decode_range(body: bytes, lo: int, hi: int, session_id: str = "") -> list[AnyEvent]:
    """Events with index lo..hi-1 of the block at the current schema version: only
    those are decoded (a partial read of a block of up to BLOCK_MAX events; a packed
    one is decoded whole, and kept for the next call, by the packed codec)."""
    unpacked = _packed_for_reading(body, session_id)
    if unpacked is not None:
        return _current(unpacked[max(lo, 0):hi])
    hit = _last_opened[0] if _last_opened else None
    if hit is not None and hit[0] == body:
        _, maxv, raws = hit
    else:
        try:
            maxv, events = _open(body)
            raws = _raw_list_dec.decode(events)
        except (ValueError, zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise EventDecodeError(f"unreadable block: {exc}") from None
        _last_opened[:] = [(body, maxv, raws)]
    part = raws[max(lo, 0):hi]
    if maxv <= 1 and not upcasting_active():
        try:
            return [_one(r) for r in part]
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise EventDecodeError(f"undecodable event in block: {exc}") from None
    out: list[AnyEvent] = []
    current = SCHEMA_VERSION
    for r in part:
        try:
            e = _one_dec.decode(r)
        except msgspec.ValidationError:  # an old shape: upcast from builtins
            out.append(from_stored(_any_dec.decode(r)))
            continue
        except msgspec.DecodeError as exc:
            raise EventDecodeError(f"undecodable event in block: {exc}") from None
        out.append(upgrade(e) if e.v != current.get(type(e), 1) else e)
    return out


def raw_events(body: bytes, session_id: str = "") -> list[bytes]:
    """The stored msgpack bytes of each event of a block (any format; a packed one
    gives back exactly the bytes it was sealed from)."""
    if body[:1] == _SEALED:
        events = _sealed_events(body, session_id)
        if events is not None:
            return [packb(e, _enc) for e in events]
    return [bytes(r) for r in _raw_list_dec.decode(_open(body)[1])]


def split(body: bytes) -> tuple[list[bytes], list[bytes]]:
    """(msgpack bytes, hash) of each event of a block that keeps per-event hashes (a
    tail block or a format 2 sealed one), for merging blocks and verifying."""
    if body[:1] == _SEALED:
        raise ValueError("a sealed block keeps no per-event hashes")
    block = _head_dec.decode(_unsealed(body))
    canon = [bytes(r) for r in _raw_list_dec.decode(block.events)]
    h = block.hashes
    if len(h) != HASH_BYTES * len(canon):
        raise ValueError(f"block holds {len(canon)} events but {len(h)} hash bytes")
    return canon, [h[i:i + HASH_BYTES] for i in range(0, len(h), HASH_BYTES)]


def _unsealed(body: bytes) -> bytes | memoryview:
    """The array of a block that keeps per-event hashes: a tail block, or a format 2
    sealed block (read by the legacy room)."""
    flag = body[:1]
    if flag == TAIL:
        return memoryview(body)[1:]
    if flag == b"\x01":
        from engine.store.legacy import blocks_v2  # noqa: PLC0415 - old stores only
        return blocks_v2.tail_bytes(body)
    raise ValueError(f"unknown block format {flag!r}")


def builtins(canon: bytes) -> dict[str, Any]:
    obj = _any_dec.decode(canon)
    if not isinstance(obj, dict):
        raise ValueError("an event must be a map")
    return obj


def id_key(event_id: str) -> bytes:
    """The index key of an event id: 16 bytes for a canonical lowercase UUID, else
    ``0x01`` + UTF-8 (never 16 bytes long, so the two kinds cannot collide)."""
    if len(event_id) == 36 and event_id[8] == event_id[13] == event_id[18] == event_id[23] == "-":
        h = event_id.replace("-", "")
        if h == h.lower():
            try:
                return bytes.fromhex(h)
            except ValueError:
                pass
    key = b"\x01" + event_id.encode("utf-8", "surrogatepass")  # never stored: no hit
    return key if len(key) != 16 else b"\x01" + key


_LOW_BITS = struct.Struct(">8xq")  # a 16-byte id key's low 64 bits, SQLite's signed int


def low_keys(event_ids: list[str | None]) -> list[int] | None:
    """The run key (the low 64 bits of :func:`id_key`, signed) of each id, when every
    one is a canonical lowercase UUID; else None (the caller then looks at them one
    by one). Checked for the whole list at once: each is 36 characters with its
    dashes in place, the whole is lowercase, and its hex digits (``bytes.fromhex``
    refuses anything else, and whitespace would leave fewer) are 16 bytes per id."""
    n = len(event_ids)
    if not n or None in event_ids or set(map(len, event_ids)) != {36}:  # type: ignore[arg-type]
        return None
    joined = "".join(event_ids)  # type: ignore[arg-type]
    dashes = "-" * n
    if (joined[8::36] != dashes or joined[13::36] != dashes or joined[18::36] != dashes
            or joined[23::36] != dashes or joined != joined.lower()):
        return None
    try:
        raw = bytes.fromhex(joined.replace("-", ""))
    except ValueError:
        return None
    if len(raw) != 16 * n:
        return None
    return list(map(operator.itemgetter(0), _LOW_BITS.iter_unpack(raw)))
