"""Sealed blocks of store format 2 (SQLite and PostgreSQL schema 2 and 3 wrote them):
first byte ``0x01``, then a zlib'd tail block (``[maxv, hashes, events]``): the
events' msgpack bytes with a 16-byte chain hash each. Read and verified as they were
written (today's tail block is the same array uncompressed), never written; a
session's blocks stay as they are until it is sealed again (they never are: sealed
blocks are final), so this reader lives as long as such stores do."""

from __future__ import annotations

import zlib

KIND: bytes = b"\x01"


def tail_bytes(body: bytes) -> bytes:
    """The tail-block array inside a format 2 sealed block."""
    return zlib.decompress(memoryview(body)[1:])
