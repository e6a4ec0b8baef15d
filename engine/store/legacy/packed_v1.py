"""Packed payloads of format 1: today's columns but ``text`` and ``lens``; a bare
kind's string sat among the ``bodies``, in event order. Read, never written: each is
upcast to today's columns (:class:`engine.store.columns.Block`) as it is opened."""

from __future__ import annotations

from itertools import compress
from typing import Any, Final

import msgspec

from engine.codec import ext_hook
from engine.errors import EventDecodeError
from engine.store.columns import NO_BODY, Block, Leading, bare_table


class JsonLeading(Leading[Any, list[int]], tag_field="format", tag=1, array_like=False):
    """A format 1 JSON payload (``format`` 1, no ``text`` or ``lens``)."""


_dec = msgspec.msgpack.Decoder(Leading[Any, bytes], ext_hook=ext_hook)
_json_dec = msgspec.json.Decoder(JsonLeading)


def columns(raw: bytes | memoryview) -> Block:
    """The columns of a format 1 msgpack payload (after its format byte), as today's."""
    return upcast(_dec.decode(raw))


def json_columns(raw: bytes, today: msgspec.ValidationError) -> Block:
    """The columns of a format 1 JSON payload, as today's; ``today``, the error of
    reading it as today's columns, when it is not format 1 either."""
    try:
        j = _json_dec.decode(raw)
    except msgspec.ValidationError:
        raise today from None
    return upcast(Leading(j.kinds, j.refs, bytes(j.codes), bytes(j.flags), j.times, j.ids,
                          j.actors, j.refidx, j.vs, j.bodies))


def upcast(old: Leading[Any, bytes]) -> Block:
    """A format 1 payload's columns as today's: each bare kind's string moved from
    ``bodies`` to ``text`` and ``lens``. What format 1 could hold in a bare kind's
    place but a string (no writer did: its events were typed) is refused here.
    Without a loop per event: a byte per event says whether it has a body (0: none)
    and whether it is of a bare kind, and those with a body select from the bodies."""
    codes, flags = old.codes, old.flags[:len(old.codes)]  # (lengths: packed._checked)
    codes = codes[:len(flags)]
    big = int.from_bytes
    bare = codes.translate(bare_table(tuple(old.kinds)))  # 1 for a bare kind
    has = flags.translate(_HAS_BODY)  # 2 for an event with a body
    marks = (big(bare, "big") | big(has, "big")).to_bytes(len(codes), "big")
    if marks.find(1) >= 0:  # a bare kind flagged NO_BODY
        kind = old.kinds[codes[marks.find(1)]][0]
        raise EventDecodeError(f"packed block: a {kind} without its string")
    picks = marks.replace(b"\x00", b"")  # per body: 3 for a bare kind's, 2 for a map
    if len(picks) != len(old.bodies):
        raise EventDecodeError("packed block: bodies that do not match its events")
    strings = list(compress(old.bodies, picks.translate(_BARE_PICK)))
    try:
        text = "".join(strings)
    except TypeError:
        kind = next(type(x).__name__ for x in strings if type(x) is not str)
        raise EventDecodeError(f"packed block: a bare body is a {kind}") from None
    return Block(old.kinds, old.refs, old.codes, old.flags, old.times, old.ids, old.actors,
                 old.refidx, old.vs, list(compress(old.bodies, picks.translate(_MAP_PICK))),
                 text, list(map(len, strings)))


_HAS_BODY: Final = bytes(0 if i & NO_BODY else 2 for i in range(256))
_BARE_PICK: Final = bytes(1 if i == 3 else 0 for i in range(256))
_MAP_PICK: Final = bytes(1 if i == 2 else 0 for i in range(256))
