"""The sealed part of a JSONL session: ``sessions/<id>.blocks``, gzip members end to end.

Each member is an ordinary gzip member (RFC 1952), so ``zcat``/``zgrep`` read the
file: its content is one JSON object, the :func:`engine.store.packed.pack_json`
columns of up to ``SEAL_AT`` consecutive events, then a newline. What the store
needs without decompressing sits in the member's header, in an ``extra`` subfield
``CL`` that gzip tools skip, protected by the header CRC (``FHCRC``):

    [1, first seq, event count, compressed length, hash of the last event (16 bytes),
     global positions as runs [[start, length], ...]]

The compressed length finds the next member without inflating this one; gzip's
own CRC-32 and length trailer catch a torn or damaged body. Only the last event's
hash is kept: the chain is the same (``hash_n = H(hash_{n-1} || canonical_n)``),
recomputed through the block when it is verified.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from engine.events import Event
from engine.store import packed
from engine.store.chain import HASH_BYTES

# The live tail is sealed whole once it holds SEAL_AT events or SEAL_BYTES bytes (so
# small sessions of long messages are compressed too), in blocks of up to SEAL_AT.
SEAL_AT = 256
SEAL_BYTES = 64 * 1024
ZLIB_LEVEL = 3
_INDEX_VERSION = 1
_HEAD = b"\x1f\x8b\x08\x06\x00\x00\x00\x00\x00\xff"  # gzip, deflate, FEXTRA|FHCRC, OS unknown
_SUBFIELD = b"CL"


class BlockRef(NamedTuple):
    """Where one sealed block is and what it holds."""

    first_seq: int
    size: int  # events in the block
    offset: int  # of the member in the file
    length: int  # of the whole member
    head: bytes  # the hash of its last event
    positions: list[int]

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.size - 1


class BadMember(Exception):
    """A member that cannot be read: torn (cut short) or damaged."""

    def __init__(self, offset: int, why: str, *, torn: bool = False) -> None:
        super().__init__(f"block at byte {offset}: {why}" if offset >= 0 else why)
        self.offset = offset
        self.torn = torn


def _runs(positions: Sequence[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for p in positions:
        if out and out[-1][0] + out[-1][1] == p:
            out[-1][1] += 1
        else:
            out.append([p, 1])
    return out


def encode(events: Sequence[Event], session_id: str, head: bytes,
           positions: Sequence[int]) -> bytes:
    """One gzip member holding ``events`` (consecutive, of ``session_id``)."""
    first = events[0].seq
    body = packed.pack_json(events, session_id, first) + b"\n"
    comp = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15)
    deflated = comp.compress(body) + comp.flush()
    index = msgspec.msgpack.encode([_INDEX_VERSION, first, len(events), len(deflated), head,
                                    _runs(positions)])
    extra = _SUBFIELD + struct.pack("<H", len(index)) + index
    if len(extra) > 0xFFFF:
        raise ValueError("block index too large for a gzip extra field")
    header = _HEAD + struct.pack("<H", len(extra)) + extra
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    trailer = struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF)
    return header + deflated + trailer


_index_dec = msgspec.msgpack.Decoder(tuple[int, int, int, int, bytes, list[tuple[int, int]]])


def scan(data: bytes, offset: int, next_seq: int) -> tuple[list[BlockRef], BadMember | None]:
    """The members of ``data`` from ``offset`` (the first must start at ``next_seq``),
    and the first that cannot be read, if any (it and what follows are not listed).
    Bodies are not inflated here (see :func:`payload`)."""
    refs: list[BlockRef] = []
    end = len(data)
    while offset < end:
        try:
            ref = _member(data, offset, next_seq)
        except BadMember as bad:
            return refs, bad
        refs.append(ref)
        offset += ref.length
        next_seq = ref.last_seq + 1
    return refs, None


def _member(data: bytes, at: int, next_seq: int) -> BlockRef:
    end = len(data)
    fixed = at + len(_HEAD) + 2
    if fixed > end:
        raise BadMember(at, "cut short in its header", torn=True)
    if data[at:at + len(_HEAD)] != _HEAD:
        raise BadMember(at, "not a convlog gzip member")
    (xlen,) = struct.unpack_from("<H", data, fixed - 2)
    hcrc_at = fixed + xlen
    if hcrc_at + 2 > end:
        raise BadMember(at, "cut short in its header", torn=True)
    (hcrc,) = struct.unpack_from("<H", data, hcrc_at)
    if zlib.crc32(data[at:hcrc_at]) & 0xFFFF != hcrc:
        raise BadMember(at, "header checksum mismatch")
    extra = data[fixed:hcrc_at]
    if extra[:2] != _SUBFIELD or struct.unpack_from("<H", extra, 2)[0] != xlen - 4:
        raise BadMember(at, "no block index in its header")
    try:
        version, first, count, deflate_len, head, runs = _index_dec.decode(extra[4:])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadMember(at, f"unreadable block index: {exc}") from None
    if (version != _INDEX_VERSION or first != next_seq or count < 1 or deflate_len < 0
            or len(head) != HASH_BYTES or any(n < 1 for _, n in runs)
            or sum(n for _, n in runs) != count):
        raise BadMember(at, f"block index does not fit (seq {first}, expected {next_seq})")
    positions = [p for start, n in runs for p in range(start, start + n)]
    length = hcrc_at + 2 - at + deflate_len + 8
    if at + length > end:
        raise BadMember(at, "cut short in its body", torn=True)
    return BlockRef(first, count, at, length, head, positions)


def payload(member: bytes) -> bytes:
    """The JSON payload of one member (its CRC-32 and length checked)."""
    (xlen,) = struct.unpack_from("<H", member, len(_HEAD))
    start = len(_HEAD) + 2 + xlen + 2
    try:
        d = zlib.decompressobj(-15)
        body = d.decompress(member[start:len(member) - 8])
        if not d.eof or d.unused_data:
            raise ValueError("the compressed body does not end where its index says")
        crc, size = struct.unpack_from("<II", member, len(member) - 8)
    except (zlib.error, ValueError, struct.error) as exc:
        raise BadMember(-1, f"undecompressable: {exc}") from None
    if zlib.crc32(body) != crc or len(body) & 0xFFFFFFFF != size:
        raise BadMember(-1, "CRC-32 mismatch")
    return body
