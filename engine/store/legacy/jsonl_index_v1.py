"""The block index of a JSONL gzip member of store format 1: the msgpack array
``[1, first seq, event count, compressed length, hash of the last event, runs]``
in the member's ``CL`` subfield, with no block link (it starts with ``0x96``, never
today's ``0x02``). Read, never written; such a member is verified by recomputing
the hashes of its events."""

from __future__ import annotations

import msgspec

VERSION = 1

_dec = msgspec.msgpack.Decoder(tuple[int, int, int, int, bytes, list[tuple[int, int]]])


def index(subfield: bytes) -> tuple[int, int, int, int, bytes, list[tuple[int, int]]]:
    """(version, first seq, count, compressed length, last hash, runs) of a version 1
    index (the caller refuses any other version); msgspec's error when it is none."""
    return _dec.decode(subfield)
