"""The lines of a JSONL session's live tail: ``{"pos":..,"hash":..,"event":{..}}``.

An event holding a lone surrogate (engine.codec) has no exact JSON: the escape
``\\ud800`` is refused by msgspec's parser, and two halves of a pair in one str,
escaped, read back as one character. Its line holds the event's msgpack bytes
(engine.codec.encode_msgpack, exact) as a base64 JSON string instead of an object:
every reader parses the line, and those that look inside the event read those
bytes.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from engine.codec import decode_json, decode_msgpack, encode_msgpack, from_stored, unpackb, upgrade
from engine.events import AnyEvent, Event


class _LineOut(msgspec.Struct):
    pos: int
    hash: str
    event: Event


class LineIn(msgspec.Struct):
    pos: int
    hash: str
    event: msgspec.Raw


class Envelope(msgspec.Struct):  # unknown fields are ignored: just what the index needs
    id: str
    seq: int


_typed_event_dec = msgspec.json.Decoder(AnyEvent)
_line_enc = msgspec.json.Encoder()
_str_dec = msgspec.json.Decoder(str)
line_dec = msgspec.json.Decoder(LineIn)
_env_dec = msgspec.json.Decoder(Envelope)

_MSGPACK = "msgpack:"


def encode(pos: int, h: bytes, e: Event) -> bytes:
    """The tail line of event ``e`` at global position ``pos`` with chain hash ``h``."""
    try:
        return _line_enc.encode(_LineOut(pos, h.hex(), e)) + b"\n"
    except UnicodeEncodeError:
        text = _MSGPACK + base64.b64encode(encode_msgpack(e)).decode()
        return _line_enc.encode({"pos": pos, "hash": h.hex(), "event": text}) + b"\n"


def quoted(raw: msgspec.Raw) -> bool:
    """Whether a line's event is the msgpack form (a JSON string)."""
    return bytes(memoryview(raw)[:1]) == b'"'


def event_bytes(raw: msgspec.Raw) -> bytes:
    """The msgpack bytes of a line whose event is a string."""
    text = _str_dec.decode(raw)
    if not text.startswith(_MSGPACK):
        raise msgspec.DecodeError("the event is a string, not msgpack bytes")
    try:
        return base64.b64decode(text[len(_MSGPACK):], validate=True)
    except binascii.Error as exc:
        raise msgspec.DecodeError(f"the event's base64: {exc}") from None


def event_obj(raw: msgspec.Raw) -> Any:
    """The builtins of a line's event (either form)."""
    if quoted(raw):
        return unpackb(event_bytes(raw))
    return msgspec.json.decode(raw)


def envelope(raw: msgspec.Raw) -> Envelope:
    if quoted(raw):
        try:
            return msgspec.convert(event_obj(raw), Envelope)
        except msgspec.ValidationError as exc:
            raise msgspec.DecodeError(str(exc)) from None
    return _env_dec.decode(raw)


def typed_event(raw: msgspec.Raw) -> AnyEvent:
    """A line's event as stored (no upcasting)."""
    if quoted(raw):
        return decode_msgpack(event_bytes(raw))
    event: AnyEvent = _typed_event_dec.decode(raw)
    return event


def current_event(raw: msgspec.Raw) -> AnyEvent:
    """A line's event at the current schema version (a newer one raises)."""
    if quoted(raw):
        return upgrade(from_stored(unpackb(event_bytes(raw))))
    return upgrade(decode_json(raw))
