"""The log's wire format: msgspec JSON (public, human-readable) and msgpack (storage).

Encoders and decoders are built once and reused. Decoding errors become
:class:`EventDecodeError` with the path of the offending field.

**Any JSON value a model can produce** is held: integers of any size and
strings with lone surrogates (half a UTF-16 pair, which Python and the OpenAI
SDKs keep) included. msgpack cannot write either natively, so the encoders here
fall back, only when the plain encode fails, to a copy in which each such value
is a msgpack extension (:data:`EXT_INT`, :data:`EXT_STR`, and :data:`EXT_MAP`
for an object with such a key); every decoder reads them back with
:func:`ext_hook` as the same Python value. Events that hold neither encode to the
very bytes they always did, so the chain's meaning is unchanged for existing
events. JSON holds integers of any size itself; a lone surrogate is written as
its ``\\uXXXX`` escape (valid JSON, read back by the stdlib parser).

Also here: the *canonical bytes* of an event (what the stores' hash chain covers)
and schema evolution. Every event carries ``v``; an upcaster registered for
``(type, v)`` turns the builtins of a version-``v`` event into version ``v + 1``.
Stored and incoming events are upcast to ``SCHEMA_VERSION`` on read and on raw
append; a version with no path to the current one is :class:`UnknownSchemaVersion`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from engine import events as _events
from engine.errors import EventDecodeError, UnknownSchemaVersion
from engine.events import AnyEvent, Event

_T_co = TypeVar("_T_co", covariant=True)

# --------------------------------------------------------------------------- values msgpack lacks

EXT_INT = 1  # an integer outside [-2**63, 2**64): its signed hexadecimal text
EXT_STR = 2  # a str holding a lone surrogate: its UTF-8 with surrogates passed
EXT_MAP = 3  # an object with such a key: msgpack [[key, value], ...] sorted by key
_UINT64_MAX = (1 << 64) - 1
_INT64_MIN = -(1 << 63)
# What a plain msgpack or JSON encode raises on a value of this kind.
UNENCODABLE = (OverflowError, UnicodeEncodeError)


def ext_hook(code: int, data: memoryview) -> Any:
    """The value an extension written by :func:`escaped` stands for."""
    if code == EXT_INT:
        return int(bytes(data), 16)
    if code == EXT_STR:
        return bytes(data).decode("utf-8", "surrogatepass")
    if code == EXT_MAP:
        pairs = msgspec.msgpack.decode(data, ext_hook=ext_hook)
        return {k: v for k, v in pairs}
    raise EventDecodeError(f"unknown msgpack extension {code}")


_BYTES = (bytes, bytearray, memoryview)


def _escape(value: Any) -> Any:
    cls = value.__class__
    if cls is str:
        if value.isascii():
            return value
        try:
            value.encode()
        except UnicodeEncodeError:
            return msgspec.msgpack.Ext(EXT_STR, value.encode("utf-8", "surrogatepass"))
        return value
    if cls is int:
        if _INT64_MIN <= value <= _UINT64_MAX:
            return value
        return msgspec.msgpack.Ext(EXT_INT, format(value, "x").encode())
    if cls is dict:
        out = {}
        plain = True
        for k, v in value.items():
            key = _escape(k)
            plain = plain and key.__class__ is not msgspec.msgpack.Ext
            out[k] = (key, _escape(v))
        if plain:
            return {k: v for k, (_, v) in out.items()}
        pairs = [[key, v] for _, (key, v) in sorted(out.items(), key=lambda kv: kv[0])]
        return msgspec.msgpack.Ext(EXT_MAP, _canon_enc.encode(pairs))
    if cls is list or cls is tuple:
        return [_escape(v) for v in value]
    if isinstance(value, msgspec.Struct):
        return _escape(msgspec.to_builtins(value, builtin_types=_BYTES))
    return value


def escaped(value: Any) -> Any:
    """``value`` (an event, a struct, builtins) as builtins that msgpack can write:
    each integer past 64 bits and each str with a lone surrogate an extension
    (:func:`ext_hook` reads them back). Encoding it gives the bytes encoding
    ``value`` would give, where that works."""
    return _escape(value)


_LONE = re.compile("[\ud800-\udfff]")


def json_text(obj: Any) -> bytes:
    """JSON of builtins whose strings may hold lone surrogates: each written as its
    ``\\uXXXX`` escape (the rest as msgspec writes it: compact, UTF-8)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_loads(data: bytes | str) -> Any:
    """Standard JSON, lone surrogate escapes included (msgspec refuses those)."""
    if not isinstance(data, bytes | str):  # a msgspec.Raw of a damaged block's line
        data = bytes(memoryview(data))
    return json.loads(data, parse_constant=_no_constant)


class _Decodes(Protocol[_T_co]):
    def decode(self, buf: Any, /) -> _T_co: ...


class OnFirstUse(Generic[_T_co]):
    """A typed decoder built by its first ``decode``: building one over the whole event
    catalog evaluates every event class's annotations (a tenth of ``convlog``'s start),
    which a command that decodes no event by itself (``show`` from snapshots) never needs.
    The first call replaces ``decode`` with the decoder's own, so later calls cost what
    a plain decoder's do. Every typed decoder a module would build at import is one of
    these (the stores' block and column decoders too)."""

    def __init__(self, make: Callable[[], _Decodes[_T_co]]) -> None:
        self._make = make

    def decode(self, data: Any) -> _T_co:
        decode: Callable[[Any], _T_co] = self._make().decode
        self.decode = decode  # type: ignore[method-assign,assignment]
        return decode(data)


_json_enc = msgspec.json.Encoder()
_json_dec = OnFirstUse(lambda: msgspec.json.Decoder(AnyEvent))
_json_list_dec = OnFirstUse(lambda: msgspec.json.Decoder(list[AnyEvent]))
_mp_enc = msgspec.msgpack.Encoder()
_mp_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(AnyEvent, ext_hook=ext_hook))
_mp_list_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(list[AnyEvent], ext_hook=ext_hook))
_any_mp_dec = msgspec.msgpack.Decoder(ext_hook=ext_hook)


def packb(obj: Any, encoder: msgspec.msgpack.Encoder = _mp_enc) -> bytes:
    """``encoder.encode(obj)``, escaping what msgpack lacks when the plain encode fails."""
    try:
        return encoder.encode(obj)
    except UNENCODABLE:
        return encoder.encode(_escape(obj))


def unpackb(data: bytes | memoryview) -> Any:
    """Untyped msgpack with the extensions of :func:`escaped` read back."""
    return _any_mp_dec.decode(data)


def typed_fallback(data: bytes | memoryview, type_: Any) -> Any:
    """Decode msgpack as ``type_`` when a typed decoder met an extension where a
    str or an object belongs (a lone surrogate in a text field, a key with one):
    untyped with the extensions read back, then converted (the same validation).
    Raises the ValidationError of the typed decode when that is not the cause."""
    try:
        return msgspec.convert(_any_mp_dec.decode(data), type_)
    except UnicodeEncodeError:  # msgspec's message quoting a wrong value that holds one
        raise msgspec.ValidationError("a value of the wrong type holding a lone surrogate"
                                      ) from None

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
    try:
        return _json_enc.encode(event)
    except UnicodeEncodeError:  # a lone surrogate: written as its escape
        return json_text(msgspec.to_builtins(event))


def encode_msgpack(event: Event) -> bytes:
    try:
        return _mp_enc.encode(event)
    except UNENCODABLE:
        return _mp_enc.encode(_escape(event))


def encode_msgpack_into(event: Event, buffer: bytearray) -> None:
    try:
        _mp_enc.encode_into(event, buffer, -1)
    except UNENCODABLE:
        _mp_enc.encode_into(_escape(event), buffer, -1)


def _json_fallback(data: bytes | str) -> Any:
    """JSON msgspec refused, read by the stdlib (lone surrogate escapes); None when
    the stdlib refuses it too."""
    try:
        obj = json_loads(data)
    except (ValueError, RecursionError):
        return None
    return obj


def decode_json(data: bytes | str, *, line: int | None = None) -> AnyEvent:
    """A public JSON event, upcast to the current schema when it is older."""
    if len(data) > MAX_EVENT_BYTES:
        raise EventDecodeError(f"event is {len(data)} bytes, over {MAX_EVENT_BYTES}", line=line)
    try:
        event: AnyEvent = _json_dec.decode(data)
    except msgspec.DecodeError as exc:
        obj = _json_fallback(data)  # a lone surrogate's escape, read by the stdlib
        if not isinstance(obj, dict):
            raise _wrap(exc, line) from None
        try:
            return from_stored(obj)
        except (EventDecodeError, UnknownSchemaVersion):
            raise _wrap(exc, line) from None
    except msgspec.ValidationError as exc:
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
    except msgspec.ValidationError as exc:
        try:
            event = typed_fallback(data, AnyEvent)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise _wrap(exc) from None
        return event
    except msgspec.DecodeError as exc:
        raise _wrap(exc) from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP) from None


def decode_msgpack_list(data: bytes) -> list[AnyEvent]:
    try:
        events: list[AnyEvent] = _mp_list_dec.decode(data)
        return events
    except msgspec.ValidationError as exc:
        try:
            events = typed_fallback(data, list[AnyEvent])
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise _wrap(exc) from None
        return events
    except msgspec.DecodeError as exc:
        raise _wrap(exc) from None
    except RecursionError:
        raise EventDecodeError(_TOO_DEEP) from None


def decode_json_list(data: bytes) -> list[AnyEvent]:
    try:
        events: list[AnyEvent] = _json_list_dec.decode(data)
        return events
    except msgspec.DecodeError as exc:
        obj = _json_fallback(data)
        if not isinstance(obj, list):
            raise _wrap(exc) from None
        try:
            return msgspec.convert(obj, list[AnyEvent])
        except msgspec.ValidationError as err:
            raise _wrap(err) from None
    except msgspec.ValidationError as exc:
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
    stored, before any upcasting) give the same bytes, whatever the dict order.
    A value msgpack lacks is its extension (:func:`escaped`)."""
    try:
        return _canon_enc.encode(event)
    except UNENCODABLE:
        return _canon_enc.encode(_escape(event))


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
    # (asked once per block a read decodes: a C-level scan of the catalog's versions)
    return bool(_UPCASTERS) or any(map((1).__ne__, _events.SCHEMA_VERSION.values()))


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
    except UnicodeEncodeError:  # msgspec quoting an unknown field that holds one
        raise EventDecodeError("a field the event does not have, or a value of the wrong "
                               "type, holds a lone surrogate") from None
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
    except msgspec.DecodeError:
        obj = _json_fallback(data)
    except (UnicodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return None
    cls = _events.EVENT_BY_TAG.get(obj["type"])
    if cls is None or obj.get("v", 1) == _current(cls):
        return None
    return obj
