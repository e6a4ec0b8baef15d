"""Packed payloads in format 1, which today's code reads but no longer writes: built
from a format 2 payload by putting each bare string back among the bodies, where
format 1 kept it (checked against the bytes format 1 wrote: tests/fixtures/packed-v1)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from engine.store import packed


def columns_1(columns: list[Any]) -> list[Any]:
    """Format 2's columns (``packed._Block`` order) as format 1's."""
    kinds, codes, flags, bodies, text, lens = (columns[0], columns[2], columns[3],
                                               columns[9], columns[10], columns[11])
    merged: list[Any] = []
    rest = iter(bodies)
    at = 0
    strings = iter(lens)
    for code, f in zip(codes, flags, strict=True):
        if kinds[code][2]:  # a bare kind: its string
            n = next(strings)
            merged.append(text[at:at + n])
            at += n
        elif not f & packed.NO_BODY:
            merged.append(next(rest))
    return [*columns[:9], merged]


def as_format_1(blob: bytes) -> bytes:
    """A msgpack payload of today's format, rewritten in format 1."""
    assert blob[0] == packed.FORMAT
    return bytes((packed.FORMAT_1,)) + msgspec.msgpack.encode(
        columns_1(msgspec.msgpack.decode(blob[1:])))


def as_json_format_1(blob: bytes) -> bytes:
    """A JSON payload of today's format, rewritten in format 1."""
    obj = json.loads(blob)
    names = packed._Block.__struct_fields__
    cols = columns_1([obj[n] for n in names])
    return msgspec.json.encode({"format": packed.FORMAT_1, **dict(zip(names, cols, strict=False))})
