"""The log's wire format: msgspec JSON (public, human-readable) and msgpack (storage).

Encoders and decoders are built once and reused. Decoding errors become
:class:`EventDecodeError` with the path of the offending field.

Also here: the *canonical bytes* of an event (what the stores' hash chain covers)
and schema evolution. Every event carries ``v``; an upcaster registered for
``(type, v)`` turns the builtins of a version-``v`` event into version ``v + 1``.
Stored and incoming events are upcast to ``SCHEMA_VERSION`` on read and on raw
append; a version with no path to the current one is :class:`UnknownSchemaVersion`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from engine import events as _events
from engine.errors import EventDecodeError, UnknownSchemaVersion
from engine.events import AnyEvent, Event

_json_enc = msgspec.json.Encoder()
_json_dec = msgspec.json.Decoder(AnyEvent)
_json_list_dec = msgspec.json.Decoder(list[AnyEvent])
_mp_enc = msgspec.msgpack.Encoder()
_mp_dec = msgspec.msgpack.Decoder(AnyEvent)
_mp_list_dec = msgspec.msgpack.Decoder(list[AnyEvent])

_PATH_RE = re.compile(r"at `(\$[^`]*)`")
_FIELD_RE = re.compile(r"(?:missing required|unknown) field `([^`]*)`")

# Upper bound on one encoded event: larger input is refused before decoding.
MAX_EVENT_BYTES = 16 * 1024 * 1024
# Input nested past the decoder's stack: refused like any undecodable input (the
# store's door refuses far less: engine.store.door.MAX_DEPTH).
_TOO_DEEP = "JSON nested too deeply to decode"


def _wrap(exc: Exception, line: int | None = None) -> EventDecodeError:
    text = str(exc)
    match = _PATH_RE.search(text)
    path = match.group(1) if match else None
    field = _FIELD_RE.search(text)
    if field is not None:  # a missing or unknown field: the path names the field itself
        path = f"{path or '$'}.{field.group(1)}"
    return EventDecodeError(text, path=path, line=line)


def encode_json(event: Event) -> bytes:
    return _json_enc.encode(event)


def encode_msgpack(event: Event) -> bytes:
    return _mp_enc.encode(event)


def encode_msgpack_into(event: Event, buffer: bytearray) -> None:
    _mp_enc.encode_into(event, buffer, -1)


def decode_json(data: bytes | str, *, line: int | None = None) -> AnyEvent:
    """A public JSON event, upcast to the current schema when it is older."""
    if len(data) > MAX_EVENT_BYTES:
        raise EventDecodeError(f"event is {len(data)} bytes, over {MAX_EVENT_BYTES}", line=line)
    try:
        event: AnyEvent = _json_dec.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        # An old shape fails the typed decode: try its upcasters before giving up.
        old = _old_builtins(data)
        if old is None:
            raise _wrap(exc, line) from None
        return from_stored(old)
    except UnicodeError as exc:
        raise EventDecodeError(f"invalid UTF-8: {exc}", line=line) from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP, line=line) from None
    # Older versions are upcast here; a newer one is left for the writer to refuse
    # (Session.append names the batch position).
    return upgrade(event) if event.v < _current(type(event)) else event


def decode_msgpack(data: bytes) -> AnyEvent:
    try:
        event: AnyEvent = _mp_dec.decode(data)
        return event
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP) from None


def decode_msgpack_list(data: bytes) -> list[AnyEvent]:
    try:
        return _mp_list_dec.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP) from None


def decode_json_list(data: bytes) -> list[AnyEvent]:
    try:
        return _json_list_dec.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _wrap(exc) from None
    except UnicodeError as exc:
        raise EventDecodeError(f"invalid UTF-8: {exc}") from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP) from None


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


# --------------------------------------------------------------------------- canonical bytes

_canon_enc = msgspec.msgpack.Encoder(order="sorted")
canonical_encoder = _canon_enc  # for batch loops that encode without a call per event


def canonical(event: Event | dict[str, Any]) -> bytes:
    """Deterministic bytes of the full event (envelope included): msgpack with every
    map's keys sorted and default fields omitted. An event and its builtins (as
    stored, before any upcasting) give the same bytes, whatever the dict order."""
    return _canon_enc.encode(event)


# --------------------------------------------------------------------------- schema evolution

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(event_type: str, version: int, fn: Upcaster) -> Upcaster:
    """Register ``fn`` to turn a ``event_type`` event of ``version`` into ``version + 1``.

    ``fn`` gets and returns the event's builtins (``type`` and the envelope included);
    the result's ``v`` is set to ``version + 1`` for it. Returns ``fn`` (usable as a
    decorator through ``functools.partial``).
    """
    _UPCASTERS[(event_type, version)] = fn
    return fn


def unregister_upcaster(event_type: str, version: int) -> None:
    _UPCASTERS.pop((event_type, version), None)


def _current(cls: type[Event]) -> int:
    return _events.SCHEMA_VERSION.get(cls, 1)


def upcasting_active() -> bool:
    """False while every type is at version 1 and no upcaster exists: stored events
    then decode straight into the catalog types (the fast path)."""
    return bool(_UPCASTERS) or any(v != 1 for v in _events.SCHEMA_VERSION.values())


def upcast(obj: dict[str, Any]) -> dict[str, Any]:
    """Builtins of any known version -> builtins of the current version."""
    tag = obj.get("type")
    cls = _events.EVENT_BY_TAG.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise EventDecodeError(f"unknown event type {tag!r}", path="$.type")
    version = obj.get("v", 1)
    current = _current(cls)
    if not isinstance(version, int) or version < 1:
        raise EventDecodeError(f"invalid schema version {version!r}", path="$.v")
    event_id = str(obj.get("id", ""))
    if version > current:
        raise UnknownSchemaVersion(tag, version, current, event_id)  # type: ignore[arg-type]
    while version < current:
        fn = _UPCASTERS.get((tag, version))  # type: ignore[arg-type]
        if fn is None:
            raise UnknownSchemaVersion(tag, version, current, event_id)  # type: ignore[arg-type]
        obj = dict(fn(dict(obj)))
        version += 1
        obj["v"] = version
    if version == 1:
        obj.pop("v", None)  # the default: omitted, as the encoder writes it
    return obj


def from_stored(obj: dict[str, Any]) -> AnyEvent:
    """Builtins of a stored (maybe old) event -> the current catalog type."""
    new = upcast(obj)
    cls = _events.EVENT_BY_TAG[new["type"]]
    try:
        event: Any = msgspec.convert(new, cls)
    except msgspec.ValidationError as exc:
        raise _wrap(exc) from None
    return event  # type: ignore[no-any-return]


def upgrade(event: Event) -> AnyEvent:
    """``event`` at the current schema version (itself when it already is)."""
    if event.v == _current(type(event)):
        return event  # type: ignore[return-value]
    return from_stored(to_builtins(event))


def _old_builtins(data: bytes | str) -> dict[str, Any] | None:
    """The builtins of JSON that an upcaster may read: a map whose ``v`` is old."""
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return None
    cls = _events.EVENT_BY_TAG.get(obj["type"])
    if cls is None or obj.get("v", 1) == _current(cls):
        return None
    return obj
