"""The sealed part of a JSONL session: ``sessions/<id>.blocks``, gzip members end to end.

Each member is an ordinary gzip member (RFC 1952), so ``zcat``/``zgrep`` read the
file: its content is one JSON object, the :func:`engine.store.packed.pack_json`
columns of up to ``SEAL_AT`` consecutive events, then a newline. What the store
needs without decompressing sits in the member's header, in an ``extra`` subfield
``CL`` that gzip tools skip, protected by the header CRC (``FHCRC``). Two versions of that subfield:

- version 2 (written since store format 2): ``0x02 | block link (16 bytes) | index``
  with ``index`` the msgpack array ``[first seq, event count, compressed length, hash
  of the last event (16 bytes), global positions as runs [[start, length], ...]]``;
- version 1 (store format 1, still read by the legacy room,
  :mod:`engine.store.legacy.jsonl_index_v1`): the msgpack array ``[1, first seq,
  ...]`` (the same fields, no link). It starts with ``0x96``, never ``0x02``.

The compressed length finds the next member without inflating this one; gzip's
own CRC-32 and length trailer catch a torn or damaged body. Only the last event's
hash is kept: the chain is the same (``hash_n = H(hash_{n-1} || canonical_n)``).
The *block link* is ``H(hash before the block || tag || session id || index ||
compressed body and trailer)`` with the chain's H (an HMAC on a keyed store), as
the sealed blocks of SQLite and PostgreSQL have (:mod:`engine.store.blocks`): it
covers every byte of the member but the fixed gzip header (compared byte for byte),
the header CRC and the link itself, so the chain walk checks a block with one
digest over its stored bytes, without inflating it. A version 1 member is checked
by recomputing the hashes of its events.

This module is the JSONL store's member codec as it stands: it satisfies
:class:`engine.store.codec_protocol.MemberCodec`, and the recorder, its tail reader,
sealer and verification reader call it only through the ``codec`` they hold
(``JSONLStore(dir, codec=mine)`` swaps it), never by name.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgspec

from engine.events import AnyEvent, Event
from engine.store import packed
from engine.store.chain import HASH_BYTES

# The live tail is sealed whole once it holds SEAL_AT events or SEAL_BYTES bytes (so
# small sessions of long messages are compressed too), in blocks of up to SEAL_AT.
SEAL_AT = 256
SEAL_BYTES = 64 * 1024
ZLIB_LEVEL = 3
_INDEX_V2 = b"\x02"
_LINK_TAG = b"convlog jsonl block v2\x00"  # never the start of an event's canonical bytes
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
    runs: list[tuple[int, int]]  # the positions as (first, count) runs
    link: bytes  # the block link (version 2), b"" for a version 1 member

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


Link = Callable[[bytes, bytes], bytes]


def encode(events: Sequence[Event], session_id: str, head: bytes,
           positions: Sequence[int], *, link: Link, prev: bytes) -> bytes:
    """One gzip member (index version 2) holding ``events`` (consecutive, of
    ``session_id``); ``prev`` is the chain hash before them, ``link`` the chain's H."""
    first = events[0].seq
    body = packed.pack_json(events, session_id, first) + b"\n"
    comp = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15)
    deflated = comp.compress(body) + comp.flush()
    index = msgspec.msgpack.encode([first, len(events), len(deflated), head, _runs(positions)])
    trailer = struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF)
    block_link = link(prev, link_input(session_id, index, deflated + trailer))
    sub = _INDEX_V2 + block_link + index
    extra = _SUBFIELD + struct.pack("<H", len(sub)) + sub
    if len(extra) > 0xFFFF:
        raise ValueError("block index too large for a gzip extra field")
    header = _HEAD + struct.pack("<H", len(extra)) + extra
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    return header + deflated + trailer


def link_input(session_id: str, index: bytes | memoryview,
               rest: bytes | memoryview) -> bytes:
    """What a version 2 member's block link covers (after the chain hash before it)."""
    return b"".join((_LINK_TAG, session_id.encode(), b"\x00", index, rest))


def link_holds(link: Link, session_id: str, prev: bytes, member: bytes) -> bool:
    """Whether a version 2 member's stored block link is the one its bytes and
    ``prev`` make (the member as :func:`scan` found it: its header is sound)."""
    view = memoryview(member)
    (xlen,) = struct.unpack_from("<H", member, len(_HEAD))
    sub_at = len(_HEAD) + 2 + 4  # after XLEN, the subfield id and its length
    index_at = sub_at + 1 + HASH_BYTES
    body_at = len(_HEAD) + 2 + xlen + 2
    if member[sub_at:sub_at + 1] != _INDEX_V2 or index_at > body_at - 2:
        return False
    stored = member[sub_at + 1:index_at]
    return link(prev, link_input(session_id, view[index_at:body_at - 2], view[body_at:])) == stored


_index_v2_dec = msgspec.msgpack.Decoder(tuple[int, int, int, bytes, list[tuple[int, int]]])


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
    if (xlen < 5 or extra[:2] != _SUBFIELD
            or struct.unpack_from("<H", extra, 2)[0] != xlen - 4):
        raise BadMember(at, "no block index in its header")
    link = b""
    known = True
    try:
        if extra[4:5] == _INDEX_V2:
            link = extra[5:5 + HASH_BYTES]
            known = len(link) == HASH_BYTES
            first, count, deflate_len, head, runs = _index_v2_dec.decode(
                extra[5 + HASH_BYTES:])
        else:  # a version 1 index (the first byte of its msgpack array is 0x96)
            from engine.store.legacy import jsonl_index_v1  # noqa: PLC0415 - old stores only
            version, first, count, deflate_len, head, runs = jsonl_index_v1.index(extra[4:])
            known = version == jsonl_index_v1.VERSION
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadMember(at, f"unreadable block index: {exc}") from None
    if (not known
            or first != next_seq or count < 1 or deflate_len < 0
            or len(head) != HASH_BYTES or any(n < 1 for _, n in runs)
            or sum(n for _, n in runs) != count):
        raise BadMember(at, f"block index does not fit (seq {first}, expected {next_seq})")
    positions = [p for start, n in runs for p in range(start, start + n)]
    length = hcrc_at + 2 - at + deflate_len + 8
    if at + length > end:
        raise BadMember(at, "cut short in its body", torn=True)
    return BlockRef(first, count, at, length, head, positions, runs, link)


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


# Decoding a payload: the packed columns of the member's JSON object
# (:func:`engine.store.packed.pack_json`), numbered from the member's first seq.

def decode(body: bytes, session_id: str, first_seq: int) -> list[AnyEvent]:
    """Every event of a member's payload (:func:`payload`), as stored (typed)."""
    return packed.unpack_json(body, session_id, first_seq)


def decode_range(body: bytes, session_id: str, first_seq: int, lo: int,
                 hi: int) -> list[AnyEvent]:
    """The events with seq ``lo..hi`` (inclusive) of a member's payload."""
    return packed.unpack_range(body, session_id, first_seq, lo, hi, json=True)


def builtins(body: bytes, session_id: str, first_seq: int) -> list[dict[str, Any]]:
    """Each event of a member's payload as builtins, as written (upcasters, verify)."""
    return packed.unpack_builtins(body, session_id, first_seq, json=True)
