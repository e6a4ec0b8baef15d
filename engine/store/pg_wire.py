"""Arrays for PostgreSQL in its binary wire format, so event bodies never travel as hex.

An append sends its blocks, ids and bounds as arrays. psycopg's generic list
adaptation costs about 11 µs per list per call, and the text literals the store
built instead carried every byte of a body as two hex digits. These arrays are
packed once, here, in PostgreSQL's binary array format (``array_send``): a
header (dimensions, null flag, element type, length, lower bound), then each
element as a 4-byte length and its bytes. Each is a ``bytes`` subclass whose
dumper psycopg sends as is, with format code 1 (binary) and the array's type oid.

:func:`use_binary` registers the dumpers on one connection; a connection without
them would send these values as plain ``bytea`` and the server would refuse the
call, so a missed registration fails loudly rather than falling back to text.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from psycopg import abc, adapt, pq

BYTEA, INT4, INT8 = 17, 23, 20
BYTEA_ARRAY, INT4_ARRAY, INT8_ARRAY = 1001, 1007, 1016


class ByteaArray(bytes):
    """A ``bytea[]`` parameter, already in the binary wire format."""


class Int4Array(bytes):
    """An ``integer[]`` parameter, already in the binary wire format."""


class Int8Array(bytes):
    """A ``bigint[]`` parameter, already in the binary wire format."""


def _header(elem_oid: int, n: int) -> bytes:
    if n == 0:  # an empty array has no dimension
        return struct.pack(">iiI", 0, 0, elem_oid)
    return struct.pack(">iiIii", 1, 0, elem_oid, n, 1)


def bytea_array(values: Sequence[bytes]) -> ByteaArray:
    parts = [_header(BYTEA, len(values))]
    pack = struct.Struct(">i").pack
    for v in values:
        parts.append(pack(len(v)))
        parts.append(v)
    return ByteaArray(b"".join(parts))


def int4_array(values: Sequence[int]) -> Int4Array:
    n = len(values)
    flat = [x for v in values for x in (4, v)]
    return Int4Array(_header(INT4, n) + struct.pack(f">{2 * n}i", *flat))


def int8_array(values: Sequence[int]) -> Int8Array:
    n = len(values)
    flat = [x for v in values for x in (8, v)]
    return Int8Array(_header(INT8, n) + struct.pack(">" + "iq" * n, *flat))


class _PackedDumper(adapt.Dumper):
    """Sends a packed array's bytes unchanged, as binary."""

    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


class _ByteaArrayDumper(_PackedDumper):
    oid = BYTEA_ARRAY


class _Int4ArrayDumper(_PackedDumper):
    oid = INT4_ARRAY


class _Int8ArrayDumper(_PackedDumper):
    oid = INT8_ARRAY


def use_binary(context: abc.AdaptContext) -> None:
    """Register the packed arrays' dumpers on a connection (or cursor)."""
    for cls, dumper in ((ByteaArray, _ByteaArrayDumper), (Int4Array, _Int4ArrayDumper),
                        (Int8Array, _Int8ArrayDumper)):
        context.adapters.register_dumper(cls, dumper)
