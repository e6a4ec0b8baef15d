"""The columns of a packed payload (:mod:`engine.store.packed`), declared once.

One generic Struct serves every reader of the layout: ``Body`` is what a body is
decoded to (``Any``: builtins, for a whole decode; ``msgspec.Raw``: left as its
msgpack bytes, for a partial read that decodes only the bodies it needs), and
``Codes`` how the per-event byte columns are held (``bytes`` in msgpack; a list of
numbers in the JSON flavour, which has no bytes). The columns before ``text`` are
format 1's whole layout (``Leading``); format 2 added ``text`` and ``lens``. The
JSON flavour is the same columns as a named object whose first key is ``format``
(the Struct's tag: msgspec writes it first, as the format has always been written).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Generic, TypeVar

import msgspec

Length = Annotated[int, msgspec.Meta(ge=0)]  # checked as msgspec decodes the column

# A kind as written: (tag, default actor, bare field or "", 2/1/0: the kind has a
# message and a part id / a message id / neither). Self-describing, so old payloads
# decode to builtins whatever the catalog has become (``packed.unpack_builtins``).
KindRow = tuple[str, str, str, int]

# Per-event flag bits (one byte per event; 0 is the common case of a streamed delta).
ID_STORED: Final = 1  # the id is in ``ids`` (the prediction missed)
ACTOR_STORED: Final = 2  # the actor is in ``actors`` (not the kind's default)
MSG_NEW: Final = 4  # message_id is ``refs[next ref index]``, not the previous one
PART_NEW: Final = 8  # part_id likewise
V_STORED: Final = 16  # v is in ``vs`` (not 1)
NO_BODY: Final = 32  # the kind's fields are all defaults: no entry in ``bodies``
TIME_ABS: Final = 64  # ``times`` holds the time itself (the delta overflows 64 bits)
_ALL_FLAGS: Final = 127

Body = TypeVar("Body")
Codes = TypeVar("Codes")


class Leading(msgspec.Struct, Generic[Body, Codes], array_like=True,
              forbid_unknown_fields=True):
    """The columns every format has (format 1 had only these)."""

    kinds: list[KindRow]
    refs: list[str]  # distinct message/part ids, in order of first use
    codes: Codes  # per event: index into kinds
    flags: Codes  # per event: the flag bits (packed.ID_STORED ...)
    times: list[int]  # per event: time minus the previous event's (the first: from 0)
    ids: list[Any]  # ids the prediction missed: str, or 16 bytes of a lowercase UUID
    actors: list[str]  # actors that are not the kind's default
    refidx: list[int]  # per MSG_NEW / PART_NEW flag, in event order: index into refs
    vs: list[int]  # schema versions other than 1
    bodies: list[Body]  # per event of a kind that is not bare, without NO_BODY: its map


class Columns(Leading[Body, Codes]):
    """Today's layout (format 2)."""

    text: str  # the strings of the events of bare kinds, joined in event order
    lens: list[Length]  # per event of a bare kind: its string's length in characters


class Block(Columns[Any, bytes]):
    """A payload's columns, bodies decoded."""


# Time steps a bulk read may sum without a check: with each step within this bound,
# no sum of fewer than 2**20 of them leaves a signed 64-bit int (the steps as stored
# are absolute times near 1.8e12 at most once a block, deltas after that).
NEAR: Final = (1 << 63) >> 20


class NearBlock(Block):
    """A payload's columns as :class:`Block`, with every time step within ``NEAR``
    (checked by msgspec as it decodes: a bulk read then needs no pass of its own over
    the times to know that its running sums stay in 64 bits)."""

    times: list[Annotated[int, msgspec.Meta(ge=-NEAR, le=NEAR)]]


class LazyBlock(Columns[msgspec.Raw, bytes]):
    """A payload's columns, each body left as its msgpack bytes."""


class JsonBlock(Columns[Any, list[int]], tag_field="format", tag=2, array_like=False):
    """The JSON flavour: the same columns, named, ids always as text (JSON cannot tell
    bytes from text). For files a person may ``zcat``: the streamed text reads as
    prose."""


def bare_table(kinds: tuple[KindRow, ...]) -> bytes:
    """A ``bytes.translate`` table: 1 for the code of a bare kind, else 0. Built per
    block from its few kinds (no cache: the kinds column lists a block's kinds in
    order of first use, so most blocks of a session have a table of their own, and a
    cache of them missed on nearly every block of a fresh replay)."""
    table = bytearray(256)
    for code, row in enumerate(kinds[:256]):
        if row[2]:
            table[code] = 1
    return bytes(table)
