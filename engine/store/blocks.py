"""The compact storage format shared by SQLite and PostgreSQL: events in blocks.

A row holds a *block*: the msgpack bytes of consecutive events of one session,
their 16-byte hashes, and the highest schema version inside. A session's newest few
events sit in small uncompressed blocks (one per append); once ``SEAL_AT`` of
them pile up, the next append merges them into zlib-compressed blocks of up to
``BLOCK_MAX`` events in the same transaction. Compression across many events is
what makes a streamed delta cost tens of bytes instead of hundreds: the repeated
ids and keys compress away. Reading decodes a whole block with one msgspec call.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from engine.codec import from_stored, upcasting_active, upgrade
from engine.errors import EventDecodeError
from engine.events import SCHEMA_VERSION, AnyEvent, Event
from engine.store.chain import HASH_BYTES

SEAL_AT = 128  # uncompressed tail events that trigger a merge into compressed blocks
BLOCK_MAX = 512  # events per compressed block (bigger blocks barely compress better)
ZLIB_LEVEL = 3  # measured: level 6 is 2.5x slower to write for 5% fewer bytes

_RAW = b"\x00"
_ZLIB = b"\x01"


class _BlockOut(msgspec.Struct, array_like=True):
    maxv: int
    hashes: bytes
    events: list[msgspec.Raw]


class _BlockIn(msgspec.Struct, array_like=True):
    maxv: int
    hashes: bytes
    events: msgspec.Raw


_enc = msgspec.msgpack.Encoder()
_head_dec = msgspec.msgpack.Decoder(_BlockIn)
_typed_dec = msgspec.msgpack.Decoder(list[AnyEvent])
_raw_list_dec = msgspec.msgpack.Decoder(list[msgspec.Raw])
_any_dec = msgspec.msgpack.Decoder()


def encode(canon: Sequence[bytes], hashes: Sequence[bytes], maxv: int, *,
           compress: bool) -> bytes:
    body = _enc.encode(_BlockOut(maxv, b"".join(hashes), [msgspec.Raw(c) for c in canon]))
    if compress:
        return _ZLIB + zlib.compress(body, ZLIB_LEVEL)
    return _RAW + body


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


def sealed_rows(first: int, canon: Sequence[bytes], hashes: Sequence[bytes],
                times: Sequence[int], maxv: int) -> list[tuple[int, int, int, bytes]]:
    """(last seq, first seq, t_max, body) of the compressed blocks, of up to BLOCK_MAX
    events each, that hold the events from seq ``first`` on."""
    return [(first + i + len(canon[i:i + BLOCK_MAX]) - 1, first + i,
             max(times[i:i + BLOCK_MAX]),
             encode(canon[i:i + BLOCK_MAX], hashes[i:i + BLOCK_MAX], max(maxv, 1),
                    compress=True))
            for i in range(0, len(canon), BLOCK_MAX)]


def _open(body: bytes) -> _BlockIn:
    flag, rest = body[:1], memoryview(body)[1:]
    if flag == _ZLIB:
        data: bytes | memoryview = zlib.decompress(rest)
    elif flag == _RAW:
        data = rest
    else:
        raise ValueError(f"unknown block format {flag!r}")
    return _head_dec.decode(data)


def max_version(events: Sequence[Event]) -> int:
    return max(e.v for e in events)


def decode(body: bytes) -> list[AnyEvent]:
    """The block's events at the current schema version."""
    try:
        block = _open(body)
    except (ValueError, zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventDecodeError(f"unreadable block: {exc}") from None
    if block.maxv <= 1 and not upcasting_active():
        try:
            return _typed_dec.decode(block.events)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise EventDecodeError(f"undecodable event in block: {exc}") from None
    return _decode_evolving(block.events)


def _decode_evolving(events: msgspec.Raw) -> list[AnyEvent]:
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
_one_dec = msgspec.msgpack.Decoder(AnyEvent)


def decode_range(body: bytes, lo: int, hi: int) -> list[AnyEvent]:
    """Events with index lo..hi-1 of the block at the current schema version: only
    those are decoded (a partial read of a block of up to BLOCK_MAX events)."""
    hit = _last_opened[0] if _last_opened else None
    if hit is not None and hit[0] == body:
        _, maxv, raws = hit
    else:
        try:
            block = _open(body)
            raws = _raw_list_dec.decode(block.events)
        except (ValueError, zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise EventDecodeError(f"unreadable block: {exc}") from None
        maxv = block.maxv
        _last_opened[:] = [(body, maxv, raws)]
    part = raws[max(lo, 0):hi]
    if maxv <= 1 and not upcasting_active():
        try:
            return [_one_dec.decode(r) for r in part]
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


def split(body: bytes) -> tuple[list[bytes], list[bytes]]:
    """(msgpack bytes, hash) of each event, for merging blocks and verifying."""
    block = _open(body)
    canon = [bytes(r) for r in _raw_list_dec.decode(block.events)]
    h = block.hashes
    if len(h) != HASH_BYTES * len(canon):
        raise ValueError(f"block holds {len(canon)} events but {len(h)} hash bytes")
    return canon, [h[i:i + HASH_BYTES] for i in range(0, len(h), HASH_BYTES)]


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
    key = b"\x01" + event_id.encode()
    return key if len(key) != 16 else b"\x01" + key
