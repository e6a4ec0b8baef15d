"""The log's wire format: msgspec JSON (public, human-readable) and msgpack (storage).

Encoders and decoders are built once and reused. Decoding errors become
:class:`EventDecodeError` with the path of the offending field.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from engine.errors import EventDecodeError
from engine.events import AnyEvent, Event

_json_enc = msgspec.json.Encoder()
_json_dec = msgspec.json.Decoder(AnyEvent)
_json_list_dec = msgspec.json.Decoder(list[AnyEvent])
_mp_enc = msgspec.msgpack.Encoder()
_mp_dec = msgspec.msgpack.Decoder(AnyEvent)
_mp_list_dec = msgspec.msgpack.Decoder(list[AnyEvent])

_PATH_RE = re.compile(r"at `(\$[^`]*)`")

# Upper bound on one encoded event: larger input is refused before decoding.
MAX_EVENT_BYTES = 16 * 1024 * 1024


def _wrap(exc: Exception, line: int | None = None) -> EventDecodeError:
    text = str(exc)
    match = _PATH_RE.search(text)
    return EventDecodeError(text, path=match.group(1) if match else None, line=line)


def encode_json(event: Event) -> bytes:
    return _json_enc.encode(event)


def encode_msgpack(event: Event) -> bytes:
    return _mp_enc.encode(event)


def encode_msgpack_into(event: Event, buffer: bytearray) -> None:
    _mp_enc.encode_into(event, buffer, -1)


def decode_json(data: bytes | str, *, line: int | None = None) -> AnyEvent:
    if len(data) > MAX_EVENT_BYTES:
        raise EventDecodeError(f"event is {len(data)} bytes, over {MAX_EVENT_BYTES}", line=line)
    try:
        event: AnyEvent = _json_dec.decode(data)
        return event
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc, line) from None
    except UnicodeDecodeError as exc:
        raise EventDecodeError(f"invalid UTF-8: {exc}", line=line) from None


def decode_msgpack(data: bytes) -> AnyEvent:
    try:
        event: AnyEvent = _mp_dec.decode(data)
        return event
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None


def decode_msgpack_list(data: bytes) -> list[AnyEvent]:
    try:
        return _mp_list_dec.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None


def decode_json_list(data: bytes) -> list[AnyEvent]:
    try:
        return _json_list_dec.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None


def to_builtins(event: Event) -> dict[str, Any]:
    out = msgspec.to_builtins(event)
    assert isinstance(out, dict)
    return out


def from_builtins(obj: Any) -> AnyEvent:
    try:
        event: AnyEvent = msgspec.convert(obj, AnyEvent)
        return event
    except msgspec.ValidationError as exc:
        raise _wrap(exc) from None
