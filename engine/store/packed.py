"""A compact, lossless codec for a run of consecutive events of one session.

A stored event is mostly envelope: a 36-character id, the session id, seq, time,
actor, message and part ids, around a 12-character delta. Within a run of one
session almost all of it is predictable, so :func:`pack` writes only what a
reader cannot predict, in columns (like values next to each other compress best):

- ``session_id`` and ``seq`` are implied (the caller passes them back);
- the id is predicted by replaying :class:`engine.ids.EventIds` (the engine's
  generator: the event time is its clock, the counter and the low 48 bits count);
  a flag says the prediction held, otherwise the id is stored (16 bytes for a
  canonical lowercase UUID, the exact string for anything else);
- ``time`` is a signed delta from the previous event;
- ``actor`` is omitted when it is the type's default actor *as written in the
  payload's kind table* (so a later change of a default never changes old bytes);
- ``message_id`` / ``part_id`` are "same as the previous event's", or an index
  into the block's table of distinct values;
- the type is a small index into the block's kind table, which names each kind by
  its tag: codes are local to a payload, so adding event types never changes the
  meaning of old payloads;
- a kind whose only other field is one required string (the deltas: a *bare* kind)
  stores that string in ``text``, where the block's bare strings are joined, and its
  length in characters in ``lens``: a run of deltas is then one slice of ``text``
  for a bulk reader, with no string per delta to build; every other kind stores a
  msgpack map of its non-default fields in ``bodies``, decoded through the catalog
  type (so it is validated exactly like an ordinary event);
- ``v`` is stored only when it is not 1.

The result is uncompressed; the caller compresses it (zlib). ``unpack(pack(evs))``
equals ``evs`` event for event, with identical :func:`engine.codec.canonical` bytes.
Any damaged input raises :class:`EventDecodeError`.

Layout: one format byte (``FORMAT``), then a msgpack array (``_Block``). The JSON
flavour (:func:`pack_json`) is one JSON object with the same columns, named.
Format 1 (``FORMAT_1``), written before, kept each bare string in ``bodies``; it is
still read by the legacy room (``engine.store.legacy.packed_v1``), its columns upcast
to today's on opening. The columns are declared once, in :mod:`engine.store.columns`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, islice
from typing import Any, Final

import msgspec
from msgspec import NODEFAULT

from engine.codec import OnFirstUse, ext_hook, packb, typed_fallback
from engine.errors import EventDecodeError
from engine.events import EVENT_BY_TAG, EVENT_TYPES, AnyEvent, Event, tag_of
from engine.store.columns import (
    ACTOR_STORED,
    ID_STORED,
    MSG_NEW,
    NEAR,
    NO_BODY,
    PART_NEW,
    TIME_ABS,
    V_STORED,
    Block,
    JsonBlock,
    KindRow,
    NearBlock,
    bare_table,
)
from engine.store.freeform import keys_are_strings
from engine.store.runs import RUN_KINDS, Run

# The layout's names that readers of this codec use through it (engine.store.columns
# declares them).
__all__ = ["ACTOR_STORED", "FORMAT", "FORMAT_1", "ID_STORED", "MSG_NEW", "NO_BODY", "PART_NEW",
           "TIME_ABS", "V_STORED", "KindRow", "bare_table", "check_columns", "check_keys",
           "cut_spans", "pack", "pack_json", "unpack", "unpack_builtins", "unpack_json",
           "unpack_range", "unpack_runs"]

FORMAT: Final = 2
FORMAT_1: Final = 1  # bare strings among the bodies (read, never written)

_INT64: Final = range(-(1 << 63), 1 << 63)
_MSGPACK_INT: Final = (-(1 << 63), (1 << 64) - 1)  # what an encoder can write

_LOW48: Final = (1 << 48) - 1
_HEX3: Final = [f"{n:03x}" for n in range(0x1000)]
_UUID_LOWER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_ENVELOPE: Final = frozenset({"type", "id", "session_id", "seq", "time", "actor", "v",
                              "message_id", "part_id"})


# The layout, declared once (engine.store.columns); these names are the codec's own.
_Block = Block
_JsonBlock = JsonBlock
assert JsonBlock.__struct_config__.tag == FORMAT


_enc = msgspec.msgpack.Encoder()
# ext_hook: integers past 64 bits and lone surrogates (engine.codec.escaped).
# The typed decoders are built on first use (a read from stored snapshots needs none).
_block_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(_Block, ext_hook=ext_hook))
_near_block_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(NearBlock, ext_hook=ext_hook))
_json_enc = msgspec.json.Encoder()
_json_block_dec = OnFirstUse(lambda: msgspec.json.Decoder(_JsonBlock))
_any_dec = msgspec.msgpack.Decoder(ext_hook=ext_hook)


# --------------------------------------------------------------------------- kinds


class _Kind:
    """What the codec knows about one event class (derived from the catalog)."""

    __slots__ = ("bare", "blank", "cls", "default_actor", "has_msg", "has_part", "make",
                 "shape", "tag")

    def __init__(self, cls: type[Event]) -> None:
        self.cls = cls
        self.tag = tag_of(cls)
        self.default_actor = cls.default_actor
        names = cls.__struct_fields__
        self.has_msg = "message_id" in names
        self.has_part = "part_id" in names
        self.shape = 2 if self.has_part else 1 if self.has_msg else 0
        defaults = cls.__struct_defaults__
        # As msgspec.structs.fields reads them (the last fields have defaults), but
        # without evaluating every annotation of the class and its bases: that took
        # most of a kind's first use in a fresh process (a compile per annotation).
        body = [(name, default) for name, default in zip(
            names, (NODEFAULT,) * (len(names) - len(defaults)) + defaults, strict=True)
            if name not in _ENVELOPE]
        bare = ""
        if len(body) == 1 and body[0][1] is NODEFAULT and _declared(cls, body[0][0]) is str:
            bare = body[0][0]
        self.bare = bare
        self.make = _maker(cls, bare) if bare else None
        self.blank = _blank(cls, self.shape)


# The declared type of each (class that declares it, field name): evaluated once.
_DECLARED: dict[tuple[type, str], Any] = {}


def _declared(cls: type[Event], name: str) -> Any:
    """The declared type of ``cls``'s field ``name``, as ``msgspec.structs.fields`` gives
    it, evaluating that one annotation only (events are declared with postponed
    annotations: strings from the catalog's source, never from data)."""
    for klass in cls.__mro__:
        annotations = vars(klass).get("__annotations__")
        if annotations and name in annotations:
            break
    else:
        raise KeyError(name)
    key = (klass, name)
    found = _DECLARED.get(key, _DECLARED)
    if found is _DECLARED:
        found = annotations[name]
        if isinstance(found, str):
            found = eval(found, vars(sys.modules[klass.__module__]), dict(vars(klass)))
        _DECLARED[key] = found
    return found


def _blank(cls: type[Event], shape: int) -> Event | None:
    """The event of ``cls`` whose fields are all defaults (a NO_BODY event's), with
    empty ids: a bulk read fills in the envelope and the ids by ``structs.replace``,
    which is what the typed conversion of the same map gives, in a tenth of its time.
    None when the kind has a required field besides its ids (such an event cannot
    be NO_BODY: the conversion refuses it)."""
    ids = ({"message_id": "", "part_id": ""} if shape == 2
           else {"message_id": ""} if shape == 1 else {})
    plain = {"session_id": str, "actor": str, "seq": int, "time": int, "v": int,
             **dict.fromkeys(ids, str)}
    try:
        plain_types = all(_declared(cls, name) is t for name, t in plain.items())
    except KeyError:  # (not a field of the class)
        return None
    if not plain_types:
        return None  # a constrained field: only the conversion checks its value
    try:
        return msgspec.convert(ids, cls)
    except msgspec.ValidationError:
        return None


def _maker(cls: type[Event], bare: str) -> Callable[..., Event]:
    """A constructor taking the envelope and the bare value positionally: a keyword
    call with literal names is much cheaper than building a dict per event. The
    source is built from the class's own field names (never from payload bytes)."""
    names = set(cls.__struct_fields__)
    refs = "".join(f", {n}={n}" for n in ("message_id", "part_id") if n in names)
    args = ", ".join(n for n in ("message_id", "part_id") if n in names)
    src = (f"def make(id, session_id, seq, time, actor, v, {args}{', ' if args else ''}value):\n"
           f"    return cls(id=id, session_id=session_id, seq=seq, time=time, actor=actor, "
           f"v=v{refs}, {bare}=value)\n")
    scope: dict[str, Any] = {"cls": cls}
    exec(compile(src, f"<packed maker {tag_of(cls)}>", "exec"), scope)
    fn: Callable[..., Event] = scope["make"]
    return fn


class _Kinds(dict[type[Event], _Kind]):
    """Each catalog class's :class:`_Kind`, made when first asked for: a read meets
    a few of the catalog's kinds, and making one evaluates its class's annotations
    (all of them took a fifth of ``convlog show``'s imports)."""

    def __missing__(self, cls: type[Event]) -> _Kind:
        if cls not in _CATALOG:
            raise KeyError(cls)
        kind = self[cls] = _Kind(cls)
        return kind

    def get(self, cls: type[Event], default: Any = None) -> Any:
        try:
            return self[cls]
        except KeyError:
            return default


_CATALOG: Final = frozenset(EVENT_TYPES)
_KINDS: Final = _Kinds()


# --------------------------------------------------------------------------- ids


class _IdGuess:
    """Replays :class:`engine.ids.EventIds` with each event's time as its clock.

    The id is assembled from cached pieces (a format spec per event costs more than
    the rest of the event): ``head`` is the time's bits above the low 12 formatted
    (8 hex, a dash, 1 hex), ``tail`` the middle group and the counting bits above
    the low 12. ``unpack`` inlines the same steps in its loop; the two must stay in
    step (the round-trip tests hold them)."""

    __slots__ = ("cnt", "head", "head_key", "hi", "lo", "ms", "tail", "tail_key")

    def __init__(self) -> None:
        self.ms = -1
        self.cnt = 0
        self.hi = 0
        self.lo = 0
        self.head_key = self.tail_key = -1
        self.head = self.tail = ""

    def next(self, now: int) -> str:
        if now > self.ms:
            self.ms = now
            self.cnt = 0
        else:
            self.cnt += 1
            if self.cnt > 0xFFF:  # the generator borrows the next millisecond
                self.ms += 1
                self.cnt = 0
        lo = self.lo = (self.lo + 1) & _LOW48
        if not lo:
            self.hi = (self.hi + 1) & 0x3FFF
            self.tail_key = -1
        return self.text()

    def text(self) -> str:
        t = self.ms & _LOW48
        if t >> 12 != self.head_key:
            self.head_key = t >> 12
            self.head = _head(t)
        lo = self.lo
        if lo >> 12 != self.tail_key:
            self.tail_key = lo >> 12
            self.tail = _tail(self.hi, lo)
        return f"{self.head}{_HEX3[t & 0xFFF]}-7{_HEX3[self.cnt]}{self.tail}{_HEX3[lo & 0xFFF]}"

    def resync(self, actual: str) -> None:
        """Continue from an id the prediction missed, when it is one of ours."""
        if len(actual) == 36 and actual[14] == "7" and actual[19] in "89ab" \
                and _UUID_LOWER.match(actual):
            self.ms = int(actual[0:8] + actual[9:13], 16)
            self.cnt = int(actual[15:18], 16)
            self.hi = int(actual[19:23], 16) & 0x3FFF
            self.lo = int(actual[24:36], 16)
            self.tail_key = -1


def _head(t: int) -> str:
    return f"{t >> 16:08x}-{(t >> 12) & 0xF:x}"


def _tail(hi: int, lo: int) -> str:
    return f"-{hi | 0x8000:04x}-{lo >> 12:09x}"


def _id_value(event_id: str) -> str | bytes:
    if len(event_id) == 36 and _UUID_LOWER.match(event_id):
        return bytes.fromhex(event_id.replace("-", ""))
    return event_id


def _id_text(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is not bytes or len(value) != 16:
        raise EventDecodeError(f"packed block: a stored id {value!r}")
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --------------------------------------------------------------------------- pack


def pack(events: Sequence[Event], session_id: str, first_seq: int) -> bytes:
    """The packed bytes of consecutive events of ``session_id`` numbered from
    ``first_seq`` (uncompressed). Raises ValueError when they are not that run."""
    b = _columns(events, session_id, first_seq)
    b.ids = [_id_value(i) for i in b.ids]
    return bytes((FORMAT,)) + packb(b, _enc)


def pack_json(events: Sequence[Event], session_id: str, first_seq: int) -> bytes:
    """:func:`pack` as one JSON object (the same columns, named; see ``_JsonBlock``)."""
    b = _columns(events, session_id, first_seq)
    try:
        return _json_enc.encode(_JsonBlock(b.kinds, b.refs, list(b.codes),
                                           list(b.flags), b.times, b.ids, b.actors, b.refidx,
                                           b.vs, b.bodies, b.text, b.lens))
    except UnicodeEncodeError:
        pass
    # A lone surrogate: JSON has no exact form for every str Python holds (two
    # halves of a pair written by two deltas, joined, would read back as one
    # character), so the block is its msgpack payload, in base64 (_PackedJson).
    packed_bytes = bytes((FORMAT,)) + packb(b, _enc)
    return _json_enc.encode(_PackedJson(base64.b64encode(packed_bytes).decode()))


class _PackedJson(msgspec.Struct, forbid_unknown_fields=True):
    """A JSON block that holds a lone surrogate: :func:`pack`'s bytes in base64."""

    packed: str


_packed_json_dec = OnFirstUse(lambda: msgspec.json.Decoder(_PackedJson))


def _columns(events: Sequence[Event], session_id: str, first_seq: int) -> _Block:
    kinds: list[KindRow] = []
    kind_index: dict[type[Event], int] = {}
    refs: list[str] = []
    ref_index: dict[str, int] = {}
    codes = bytearray()
    flags = bytearray()
    times: list[int] = []
    ids: list[Any] = []
    actors: list[str] = []
    refidx: list[int] = []
    vs: list[int] = []
    bodies: list[Any] = []
    texts: list[str] = []
    lens: list[int] = []
    guess = _IdGuess()
    prev_time = 0
    prev_msg: str | None = None
    prev_part: str | None = None
    seq = first_seq
    for e in events:
        cls = type(e)
        kind = _KINDS.get(cls)
        if kind is None:
            raise ValueError(f"not a catalog event: {cls.__name__}")
        if e.session_id != session_id or e.seq != seq:
            raise ValueError(f"event {e.id!r} is {e.session_id}#{e.seq}, "
                             f"expected {session_id}#{seq}")
        t = e.time
        if type(t) is not int:
            raise ValueError(f"event {e.id!r}: time {t!r} is not an int")
        seq += 1
        code = kind_index.get(cls)
        if code is None:
            code = kind_index[cls] = len(kinds)
            if code > 255:
                raise ValueError("more than 256 event kinds in one block")
            kinds.append((kind.tag, kind.default_actor, kind.bare, kind.shape))
        codes.append(code)
        f = 0
        if t - prev_time in _INT64:
            times.append(t - prev_time)
        else:
            f |= TIME_ABS
            times.append(t)
        prev_time = t
        if guess.next(t) != e.id:
            f |= ID_STORED
            ids.append(e.id)
            guess.resync(e.id)
        if e.actor != kind.default_actor:
            f |= ACTOR_STORED
            actors.append(e.actor)
        if kind.has_msg:
            m: str = e.message_id  # type: ignore[attr-defined]
            if m != prev_msg:
                f |= MSG_NEW
                refidx.append(_ref(m, refs, ref_index))
                prev_msg = m
        if kind.has_part:
            p: str = e.part_id  # type: ignore[attr-defined]
            if p != prev_part:
                f |= PART_NEW
                refidx.append(_ref(p, refs, ref_index))
                prev_part = p
        if e.v != 1:
            f |= V_STORED
            vs.append(e.v)
        if kind.bare:
            value = getattr(e, kind.bare)
            if type(value) is not str:
                raise ValueError(f"event {e.id!r}: its {kind.bare} is not a str")
            texts.append(value)
            lens.append(len(value))
        elif body := _body(e):
            bodies.append(body)
        else:
            f |= NO_BODY
        flags.append(f)
    return _Block(kinds, refs, bytes(codes), bytes(flags), times, ids, actors, refidx, vs,
                  bodies, "".join(texts), lens)


def _ref(value: str, refs: list[str], index: dict[str, int]) -> int:
    i = index.get(value)
    if i is None:
        if type(value) is not str:
            raise ValueError(f"a message or part id must be a str, not {value!r}")
        i = index[value] = len(refs)
        refs.append(value)
    return i


def _body(e: Event) -> dict[str, Any]:
    """The event's non-envelope fields exactly as its msgpack encoding has them."""
    obj: dict[str, Any] = _any_dec.decode(packb(e, _enc))
    for key in _ENVELOPE:
        obj.pop(key, None)
    return obj


# --------------------------------------------------------------------------- unpack

# The last payload unpacked whole: at(seq) and short range reads hit one block
# repeatedly. Keyed by the bytes themselves (and how they were read), so it never
# answers for other input; events are immutable, so sharing them is safe.
_last: list[tuple[bytes, str, int, bool, list[AnyEvent]]] = []


def unpack(data: bytes | bytearray | memoryview, session_id: str,
           first_seq: int) -> list[AnyEvent]:
    """The events of a :func:`pack` payload, numbered from ``first_seq``."""
    return list(_cached(bytes(data), session_id, first_seq, json=False))


def unpack_json(data: bytes | bytearray | memoryview, session_id: str,
                first_seq: int) -> list[AnyEvent]:
    """The events of a :func:`pack_json` payload, numbered from ``first_seq``."""
    return list(_cached(bytes(data), session_id, first_seq, json=True))


def unpack_range(data: bytes | bytearray | memoryview, session_id: str, first_seq: int,
                 lo: int, hi: int, *, json: bool = False) -> list[AnyEvent]:
    """Events with seq ``lo..hi`` (inclusive) of a payload. The whole payload is
    decoded (its predictions run from its start) and kept for the next call."""
    out = _cached(bytes(data), session_id, first_seq, json=json)
    return out[max(lo - first_seq, 0):max(hi - first_seq + 1, 0)]


def _cached(raw: bytes, session_id: str, first_seq: int, *, json: bool) -> list[AnyEvent]:
    hit = _last[0] if _last else None
    if hit is not None and hit[0] == raw and hit[1] == session_id and hit[2] == first_seq \
            and hit[3] == json:
        return hit[4]
    block = _open_json(raw) if json else _open(raw)
    out: list[AnyEvent] = _decoded(block, session_id, first_seq, runs=False)
    _last[:] = [(raw, session_id, first_seq, json, out)]
    return out


def unpack_runs(data: bytes | bytearray | memoryview, session_id: str,
                first_seq: int, *, ids: bool = True) -> list[AnyEvent | Run]:
    """The events of a :func:`pack` payload, numbered from ``first_seq``, with each
    stretch of consecutive deltas of one kind to one part (``engine.store.runs``)
    given as one :class:`Run`: no event object, no id text, one slice of the
    block's text. Every
    other event is exactly what :func:`unpack` gives, but that with ``ids=False``
    (for a fold that never reads an event's id) an event may come without its id
    (``""``): none is predicted or formatted, a stored one is only checked. Either
    way it refuses exactly what :func:`unpack` refuses."""
    raw = bytes(data)
    try:
        if not ids:
            block, near = _open_near(raw)
            return _bulk(block, session_id, first_seq, near=near)
        return _decoded(_open(raw), session_id, first_seq, runs=True)
    except _NotRuns:  # time steps whose sums may leave int64: event by event
        return _decoded(_open(raw), session_id, first_seq, runs=False)


class _NotRuns(Exception):
    """The payload cannot be read in runs (its events still can, one by one)."""


def _decoded(block: _Block, session_id: str, first_seq: int, *, runs: bool,
             cut: tuple[int, int] | None = None, start: _State | None = None) -> list[Any]:
    table = _kind_table(block)
    try:
        spans = _run_spans(block, table, None if cut is None else cut[1]) if runs else []
        if cut is not None:
            spans = cut_spans(spans, *cut)
        return _rows(block, table, session_id, first_seq, spans, cut, start)
    except (EventDecodeError, _NotRuns):
        raise
    except _DAMAGE as exc:
        raise EventDecodeError(f"packed block: {type(exc).__name__}: {exc}") from None


def _unpack(raw: bytes, session_id: str, first_seq: int) -> list[AnyEvent]:
    """A real decode, past the one-block cache (benchmarks)."""
    _last.clear()
    return _cached(raw, session_id, first_seq, json=False)


_DAMAGE = (IndexError, StopIteration, TypeError, ValueError, OverflowError, RecursionError,
           msgspec.ValidationError)


def _open(raw: bytes, *, sums: bool = True) -> _Block:
    """The payload's columns, checked (``sums=False``: but that ``lens`` adds up to
    the length of ``text``, which the caller checks as it reads). Format 1 is read
    by the legacy room, its columns upcast to today's."""
    fmt = raw[0] if raw else -1
    try:
        if fmt == FORMAT:
            try:
                block = _block_dec.decode(memoryview(raw)[1:])
            except msgspec.ValidationError:  # a lone surrogate in the text column?
                block = typed_fallback(memoryview(raw)[1:], _Block)
        elif fmt == FORMAT_1:
            from engine.store.legacy import packed_v1  # noqa: PLC0415 - old stores only
            block = packed_v1.columns(memoryview(raw)[1:])
        else:
            head = raw[:1].hex() or "empty"
            raise EventDecodeError(f"packed block: unknown format {head}")
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError) as exc:
        raise EventDecodeError(f"packed block: {exc}") from None
    return _checked(block, sums=sums)


def _open_near(raw: bytes) -> tuple[_Block, bool]:
    """:func:`_open` with ``sums=False``, and whether every time step is within
    ``NEAR`` (checked by msgspec as it decodes: no pass over the times). Anything the
    bounded decode refuses (a far step, a lone surrogate, damage) is read, or refused,
    by :func:`_open` itself."""
    if raw and raw[0] == FORMAT:
        try:
            block: _Block = _near_block_dec.decode(memoryview(raw)[1:])
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
            pass
        else:
            return _checked(block, sums=False), True
    return _open(raw, sums=False), False


def _open_json(raw: bytes) -> _Block:
    try:
        try:
            j = _json_block_dec.decode(raw)
        except msgspec.ValidationError as exc:
            return _open_other_json(raw, exc)
        block = _Block(j.kinds, j.refs, bytes(j.codes), bytes(j.flags), j.times, j.ids,
                       j.actors, j.refidx, j.vs, j.bodies, j.text, j.lens)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError) as exc:
        raise EventDecodeError(f"packed block: {exc}") from None
    return _checked(block)


def _open_other_json(raw: bytes, exc: msgspec.ValidationError) -> _Block:
    """A JSON payload that is not today's columns: a lone surrogate's base64 msgpack
    (``_PackedJson``), else format 1 (the legacy room); ``exc`` when it is neither."""
    try:
        inner = _packed_json_dec.decode(raw)
    except msgspec.ValidationError:
        from engine.store.legacy import packed_v1  # noqa: PLC0415 - old stores only
        block = packed_v1.json_columns(raw, exc)
        return _checked(block)
    try:
        return _open(base64.b64decode(inner.packed, validate=True))
    except binascii.Error as err:
        raise ValueError(f"base64: {err}") from None


def _checked(block: _Block, *, sums: bool = True) -> _Block:
    check_columns(block.kinds, block.codes, block.flags, block.times, block.text, block.lens,
                  sums=sums)
    check_keys(block.bodies)
    return block


def check_columns(kinds: list[KindRow], codes: bytes, flags: bytes, times: list[int],  # noqa: PLR0917
                  text: str, lens: list[int], *, sums: bool = True) -> None:
    """The checks of a payload's columns that the readers then rely on: one code,
    flag byte and time step per event, no unknown flag, and in ``lens`` one length
    for each event of a bare kind (and for no other) that (``sums``) add up to the
    length of ``text``, so the readers slice ``text`` without a check per event.
    (msgspec has checked that no length is negative.)"""
    n = len(codes)
    if len(flags) != n or len(times) != n:
        raise EventDecodeError("packed block: columns of different lengths")
    if not flags.isascii():  # _ALL_FLAGS is 127: a flag byte of 128 or more is not one
        raise EventDecodeError(f"packed block: unknown flags {max(flags):#x}")
    bare = codes.translate(bare_table(tuple(kinds))).count(1)
    if bare != len(lens):
        raise EventDecodeError(f"packed block: {len(lens)} string lengths for {bare} "
                               "events of bare kinds")
    if sums and sum(lens) != len(text):
        _cut_wrong()


def check_keys(bodies: list[Any]) -> list[Any]:
    """``bodies``, refused if a map key anywhere inside is not a string: no canonical
    bytes exist for one (see engine.store.freeform)."""
    if not keys_are_strings(bodies):
        raise EventDecodeError("packed block: a map key that is not a string in a body")
    return bodies


def _cut_wrong() -> None:
    raise EventDecodeError("packed block: string lengths that do not cut its text")


def _no_string(kind: str) -> None:
    """An event of a bare kind flagged NO_BODY: its string is all it holds."""
    raise EventDecodeError(f"packed block: a {kind} without its string")


# Per local code: (constructor for the bare form or None, 2/1/0 for message and part
# id / message id / neither, the default actor as written, the kind).
_Entry = tuple[Callable[..., Event] | None, int, str, _Kind]


def _kind_table(block: _Block) -> list[_Entry]:
    out: list[_Entry] = []
    for tag, default_actor, bare, shape in block.kinds:
        cls = EVENT_BY_TAG.get(tag)
        if cls is None:
            raise EventDecodeError(f"packed block: unknown event type {tag!r}", path="$.type")
        kind = _KINDS[cls]
        if bare != kind.bare or shape != kind.shape:  # written when the kind looked otherwise
            raise EventDecodeError(f"packed block: {tag} was written with another shape "
                                   "(read it with unpack_builtins)")
        out.append((kind.make, shape, default_actor, kind))
    return out


# --------------------------------------------------------------------------- builtins


def unpack_builtins(data: bytes | bytearray | memoryview, session_id: str, first_seq: int,
                    *, json: bool = False) -> list[dict[str, Any]]:
    """Each event's builtins as written (``type``, envelope and fields; ``v`` only when
    not 1), whatever the catalog has become since: what upcasters and ``verify`` read.
    Needs nothing of the catalog but what the payload names."""
    raw = bytes(data)
    block = _open_json(raw) if json else _open(raw)
    try:
        return _builtin_rows(block, session_id, first_seq)
    except EventDecodeError:
        raise
    except _DAMAGE as exc:
        raise EventDecodeError(f"packed block: {type(exc).__name__}: {exc}") from None


def _strings(block: _Block) -> Iterator[str]:
    """The bare strings of the block's events, in order (``_checked`` has made sure
    that ``lens`` cuts ``text``)."""
    text = block.text
    ends = list(accumulate(block.lens))
    return map(text.__getitem__, map(slice, [0, *ends[:-1]], ends))


def _builtin_rows(block: _Block, session_id: str, first_seq: int) -> list[dict[str, Any]]:
    ids = iter(block.ids)
    actors = iter(block.actors)
    refidx = iter(block.refidx)
    vs = iter(block.vs)
    bodies = iter(block.bodies)
    strings = _strings(block)
    guess = _IdGuess()
    out: list[dict[str, Any]] = []
    t = 0
    msg: str | None = None
    part: str | None = None
    for i, (code, f, dt) in enumerate(zip(block.codes, block.flags, block.times, strict=True)):
        tag, default_actor, bare, shape = block.kinds[code]
        seq = first_seq + i
        t = dt if f & TIME_ABS else t + dt
        predicted = guess.next(t)
        if f & ID_STORED:
            event_id = _id_text(next(ids))
            guess.resync(event_id)
        else:
            event_id = predicted
        actor = next(actors) if f & ACTOR_STORED else default_actor
        obj: dict[str, Any] = {"type": tag}
        # As the event's own encoding has them: envelope defaults are omitted.
        for key, value, default in (("id", event_id, ""), ("session_id", session_id, ""),
                                    ("seq", seq, 0), ("time", t, 0), ("actor", actor, "")):
            if value != default or type(value) is not type(default):
                obj[key] = value
        if f & V_STORED:
            obj["v"] = next(vs)
        if f & MSG_NEW:
            msg = block.refs[next(refidx)]
        if f & PART_NEW:
            part = block.refs[next(refidx)]
        if (f & MSG_NEW and shape < 1) or (f & PART_NEW and shape < 2):
            raise EventDecodeError(f"packed block: a message or part id on {tag} at seq {seq}")
        if shape >= 1:
            if msg is None:
                raise EventDecodeError(f"packed block: no message id at seq {seq}")
            obj["message_id"] = msg
        if shape == 2:
            if part is None:
                raise EventDecodeError(f"packed block: no part id at seq {seq}")
            obj["part_id"] = part
        if bare:
            if f & NO_BODY:
                _no_string(tag)
            obj[bare] = next(strings)
        elif not f & NO_BODY:
            body = next(bodies)
            if isinstance(body, dict) and not _ENVELOPE.intersection(body):
                obj.update(body)
            else:
                raise EventDecodeError(f"packed block: a {tag} body is a {type(body).__name__}")
        out.append(obj)
    for rest in (ids, actors, refidx, vs, bodies):
        if next(rest, _END) is not _END:
            raise EventDecodeError("packed block: more column values than events")
    return out


_BREAK: Final = re.compile(rb"[^\x00]\x00*")  # an event that starts a stretch, and the stretch
_RUN_START: Final = MSG_NEW | PART_NEW  # the flags a run's first event may carry


def _run_spans(block: _Block, table: list[_Entry], stop: int | None = None
               ) -> list[tuple[int, int]]:
    """(index, count) of the runs of a payload's first ``stop`` events (all of them by
    default), in order: consecutive events of one run kind (``RUN_KINDS``) whose flags
    are all 0 but for the first, which may name a new message and part. See
    :func:`_stretches`."""
    codes, flags = block.codes[:stop], block.flags[:stop]
    run_codes = _run_codes(table)
    if not codes or not run_codes:
        return []
    other = codes.translate(_other_table(run_codes))
    spans: list[tuple[int, int]] = []
    a = 0
    for size in _stretches(codes, flags, run_codes):
        b = a + size
        head = a
        if other[a] or flags[a] & ~_RUN_START:
            head += 1  # read as an event; what follows it (if anything) is a run
        if b > head:
            spans.append((head, b - head))
        a = b
    return spans


def _run_codes(table: list[_Entry]) -> bytes:
    """The local codes of a payload's kinds whose consecutive events form runs."""
    return bytes(i for i, (make, shape, default_actor, kind) in enumerate(table)
                 if kind.cls in RUN_KINDS and make is not None and shape == 2
                 # a run stands for deltas with the kind's own default actor: a row
                 # that says another (damage) is read event by event, as unpack does
                 and default_actor == kind.default_actor)


@functools.lru_cache(maxsize=256)
def _other_table(run_codes: bytes) -> bytes:
    """A ``bytes.translate`` table: 0 for a run code, 1 for any other byte (a payload's
    kind table rarely differs from the last ones': built once per table, not per block)."""
    return bytes(0 if i in run_codes else 1 for i in range(256))


def _stretches(codes: bytes, flags: bytes, run_codes: bytes) -> list[int]:
    """The lengths of a payload's stretches, in order (they add up to its events).

    A stretch is an event that starts one, then the events that continue its run:
    of the same run kind (``run_codes``), with no flag. So an event of any other
    kind is a stretch of 1, and a stretch's events after its first are a run.
    Found without a loop per event: a byte per event, 0 where the event continues
    its predecessor's run, is made with big-integer arithmetic over the columns;
    a regex splits it at each other byte (``codes`` must not be empty)."""
    n = len(codes)
    other = codes.translate(_other_table(run_codes))
    big = int.from_bytes
    changed = big(codes, "big") ^ big(bytes((codes[0] ^ 1,)) + codes[:-1], "big")
    breaks = (changed | big(flags, "big") | big(other, "big")).to_bytes(n, "big")
    return list(map(len, _BREAK.findall(breaks)))


def _advance_ids(state: tuple[int, int, int, int], t: int,
                 dts: list[int]) -> tuple[int, int, int, int, bool]:
    """The id generator's ``state`` (ms, cnt, lo, hi) after events with time steps
    ``dts`` from time ``t``, and whether hi moved: what the per-event loop of
    :func:`_rows` computes, without formatting an id."""
    ms, cnt, lo, hi = state
    n = len(dts)
    if ms == t and cnt + n <= 0xFFF and lo + n <= _LOW48 and min(dts) >= 0:
        # No borrow, no wrap: ms follows the time; cnt counts events since it last rose.
        k = n - 1
        while k >= 0 and not dts[k]:
            k -= 1
        if k < 0:
            return ms, cnt + n, lo + n, hi, False
        return t + sum(dts), n - 1 - k, lo + n, hi, False
    moved = False
    for dt in dts:
        t += dt
        if t > ms:
            ms = t
            cnt = 0
        else:
            cnt += 1
            if cnt > 0xFFF:
                ms += 1
                cnt = 0
        lo = (lo + 1) & _LOW48
        if not lo:
            hi = (hi + 1) & 0x3FFF
            moved = True
    return ms, cnt, lo, hi, moved


def cut_spans(spans: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """``spans`` split at index ``lo`` and ending before index ``hi``: a stretch of a
    run is a run."""
    out: list[tuple[int, int]] = []
    for i, n in spans:
        end = min(i + n, hi)
        if i >= end:
            break
        if i < lo < end:
            out += [(i, lo - i), (lo, end - lo)]
        else:
            out.append((i, end - i))
    return out


# What the row loop carries from one event to the next: time, the id generator's
# (ms, cnt, lo, hi), the message and part ids in force and whether each was named.
_State = tuple[int, int, int, int, int, str, str, bool, bool]
_COLD: Final[_State] = (0, -1, 0, 0, 0, "", "", False, False)


def _rows(block: _Block, table: list[_Entry], session_id: str,  # noqa: PLR0917
          first_seq: int, spans: list[tuple[int, int]], cut: tuple[int, int] | None = None,
          start: _State | None = None) -> list[Any]:
    """The payload's events (those with index ``cut[0]..cut[1]-1`` when given); the
    stretches named by ``spans`` (see :func:`_run_spans`) as one :class:`Run` each.
    ``start``: the state before the first event, when the payload is the rest of a
    longer one (``engine.store.packed_range``). Fills the block's body maps in place:
    once per decode."""
    refs = block.refs
    ids = iter(block.ids)
    actors = iter(block.actors)
    refidx = iter(block.refidx)
    vs = iter(block.vs)
    bodies = iter(block.bodies)
    text, lens = block.text, block.lens
    li = tp = 0  # the next bare string's index in lens, its start in text
    body: Any
    guess = _IdGuess()  # the loop inlines guess.next; the object serves stored ids
    hex3 = _HEX3
    low48 = _LOW48
    convert = msgspec.convert
    out: list[Any] = []
    append = out.append
    t, ms, cnt, lo, hi, msg, part, have_msg, have_part = start or _COLD
    head_key = tail_key = -1
    head = tail = ""
    seq = first_seq - 1
    have = 2 if have_msg and have_part else 1 if have_msg else 0  # ids to repeat
    times = block.times
    # Each run as (its first seq, count), then one that is never reached.
    next_run = iter([*((first_seq + i, n) for i, n in spans), (-1, 0)]).__next__
    run_at, run_len = next_run()
    codes, flags = block.codes, block.flags
    keep, stop = (0, len(codes)) if cut is None else cut
    keep += first_seq
    whole = stop >= len(codes)
    if not whole:  # the columns' lengths agree (_checked)
        codes, flags = codes[:stop], flags[:stop]
    events = zip(codes, flags, times if whole else times[:stop], strict=True)
    for code, f, dt in events:
        make, shape, default_actor, kind = table[code]
        seq += 1
        if seq == run_at:
            # A run: its first event may name a new message and part; the rest repeat them.
            if f & MSG_NEW:
                msg = refs[next(refidx)]
                have_msg = True
            if f & PART_NEW:
                part = refs[next(refidx)]
                have_part = True
            have = 2 if have_msg and have_part else 1 if have_msg else 0
            if have < 2:
                _check_refs(kind, f, have_msg, have_part, seq)
            joined, li, tp = _run_text(text, lens, li, tp, run_len)
            i = seq - first_seq
            dts = times[i:i + run_len]
            ms, cnt, lo, hi, moved = _advance_ids((ms, cnt, lo, hi), t, dts)
            if moved:
                tail_key = -1
            t += sum(dts)
            next(islice(events, run_len - 1, run_len - 1), None)  # skip the run's rest
            last = seq + run_len - 1
            if seq >= keep:
                append(Run(kind.cls, msg, part, joined, seq, last, t))
            seq = last
            run_at, run_len = next_run()
            continue
        t += dt
        if f:
            if f & TIME_ABS:
                t = dt
            actor = next(actors) if f & ACTOR_STORED else default_actor
            if f & MSG_NEW:
                msg = refs[next(refidx)]
                have_msg = True
            if f & PART_NEW:
                part = refs[next(refidx)]
                have_part = True
            v = next(vs) if f & V_STORED else 1
            if make is not None:  # a bare kind: its string
                if f & NO_BODY:
                    _no_string(kind.tag)
                end = tp + lens[li]
                body = text[tp:end]
                li += 1
                tp = end
            else:
                body = None if f & NO_BODY else next(bodies)
            if f & (MSG_NEW | PART_NEW):
                have = 2 if have_msg and have_part else 1 if have_msg else 0
                if shape > have or (f & PART_NEW and shape < 2) or (f & MSG_NEW and not shape):
                    _check_refs(kind, f, have_msg, have_part, seq)
            elif shape > have:
                _check_refs(kind, f, have_msg, have_part, seq)
        else:
            actor = default_actor
            v = 1
            if make is not None:
                end = tp + lens[li]
                body = text[tp:end]
                li += 1
                tp = end
            else:
                body = next(bodies)
            if shape > have:
                _check_refs(kind, f, have_msg, have_part, seq)
        # -- the id: guess.next(t), inlined
        if t > ms:
            ms = t
            cnt = 0
        else:
            cnt += 1
            if cnt > 0xFFF:
                ms += 1
                cnt = 0
        lo = (lo + 1) & low48
        if not lo:
            hi = (hi + 1) & 0x3FFF
            tail_key = -1
        if f & ID_STORED:
            event_id = _id_text(next(ids))
            guess.ms, guess.cnt, guess.hi, guess.lo = ms, cnt, hi, lo
            guess.resync(event_id)
            ms, cnt, hi, lo = guess.ms, guess.cnt, guess.hi, guess.lo
            tail_key = -1
        else:
            tm = ms & low48
            if tm >> 12 != head_key:
                head_key = tm >> 12
                head = _head(tm)
            if lo >> 12 != tail_key:
                tail_key = lo >> 12
                tail = _tail(hi, lo)
            event_id = f"{head}{hex3[tm & 0xFFF]}-7{hex3[cnt]}{tail}{hex3[lo & 0xFFF]}"
        if seq < keep:
            continue  # before a partial read's first seq: the state moves on, nothing is built
        if make is not None:  # a bare kind: its string
            if shape == 2:
                append(make(event_id, session_id, seq, t, actor, v, msg, part, body))
            elif shape == 1:
                append(make(event_id, session_id, seq, t, actor, v, msg, body))
            else:
                append(make(event_id, session_id, seq, t, actor, v, body))
            continue
        if type(body) is not dict:
            body = _body_map(kind, body)
        # Any other kind: its fields and the envelope through msgspec's typed
        # conversion (validated). The body's dict is filled in place: each read
        # decodes its payload afresh. A body never holds an envelope field: the size
        # check finds one (an id the kind lacks is looked for first).
        size = len(body)
        if shape < 2 and ("part_id" in body or "message_id" in body):
            size = -1
        body.update(type=kind.tag, id=event_id, session_id=session_id, seq=seq, time=t,
                    actor=actor, v=v)
        if shape:
            body["message_id"] = msg
            if shape == 2:
                body["part_id"] = part
        if len(body) != size + 7 + shape:
            raise EventDecodeError(f"packed block: envelope field in a {kind.tag} body")
        try:
            append(convert(body, kind.cls))  # strict: msgspec's default (naming it costs)
        except msgspec.ValidationError as exc:
            raise EventDecodeError(f"packed block: {exc}") from None
    for rest in (ids, actors, refidx, vs, bodies) if whole else ():
        if next(rest, _END) is not _END:
            raise EventDecodeError("packed block: more column values than events")
    if times and _far(times):
        if spans:
            raise _NotRuns  # a run keeps only its last time: check each event's
        _check_times(out)  # big jumps: some sum may leave what msgpack can hold
    return out


# Fewer events than this, each time step within NEAR: no sum of steps leaves 64 bits.
_NEAR_EVENTS: Final = (1 << 63) // NEAR - 1


def _far(times: list[int]) -> bool:
    """Whether some sum of the time steps may leave a signed 64-bit int."""
    hi, lo = max(times), min(times)
    return (len(times) + 1) * max(hi, -lo) >= 1 << 63


def _bulk(block: _Block, session_id: str, first_seq: int, *, near: bool = False
          ) -> list[Any]:
    """:func:`_rows` over :func:`_run_spans` for a reader that needs no event ids: the
    same items and the same refusals, but a loop per stretch (:func:`_stretches`)
    instead of per event, and no id generator at all. The columns are indexed, not
    iterated, so a run takes its strings as one slice of the text."""
    try:
        table, run_codes, joins = _bulk_table(block)
        codes, flags, times = block.codes, block.flags, block.times
        if not codes:
            _all_read(block, 0, 0, 0, 0, 0)
            if block.text:  # (opened with sums=False)
                _cut_wrong()
            return []
        # ``near``: every step within NEAR, so fewer than 2**20 of them sum in 64 bits.
        if (not near or len(times) >= _NEAR_EVENTS) and _far(times):
            raise _NotRuns  # a run keeps only its last time: check each event's
        return _bulk_rows(block, table, joins, _stretches(codes, flags, run_codes),
                          session_id, first_seq)
    except (EventDecodeError, _NotRuns):
        raise
    except _DAMAGE as exc:
        raise EventDecodeError(f"packed block: {type(exc).__name__}: {exc}") from None


# Kind tables by the kinds column that names them: a session's blocks mostly share one.
# Only tables that were built are kept (an unknown or reshaped kind raises each time).
_TABLES: dict[tuple[KindRow, ...], tuple[list[_Entry], bytes, list[bool]]] = {}


def _bulk_table(block: _Block) -> tuple[list[_Entry], bytes, list[bool]]:
    """:func:`_kind_table` of the block, its run codes, and per code whether it joins runs."""
    key = tuple(block.kinds)
    found = _TABLES.get(key)
    if found is None:
        table = _kind_table(block)
        run_codes = _run_codes(table)
        if len(_TABLES) >= 256:
            _TABLES.clear()
        found = _TABLES[key] = (table, run_codes, [i in run_codes for i in range(len(table))])
    return found


def _bulk_rows(block: _Block, table: list[_Entry], joins: list[bool],  # noqa: PLR0917
               stretches: list[int], session_id: str, first_seq: int) -> list[Any]:
    """The loop of :func:`_bulk`: each check of :func:`_rows`, in the same terms (the
    tests hold the two to the same items and the same refusals)."""
    codes, flags, times, refs = block.codes, block.flags, block.times, block.refs
    ids, actors, refidx, vs, bodies = block.ids, block.actors, block.refidx, block.vs, \
        block.bodies
    text, lens = block.text, block.lens
    ii = ai = ri = vi = bi = li = 0  # the next unread value of each column
    tp = 0  # where the next bare string starts in text
    body: Any
    envelope = _ENVELOPE
    convert = msgspec.convert
    replace = msgspec.structs.replace
    out: list[Any] = []
    append = out.append
    t = 0
    i = 0  # the index of the stretch's first event
    seq = first_seq  # its seq
    msg = part = ""
    have_msg = have_part = False
    have = 0  # 2: a message and a part id to repeat, 1: a message id, 0: neither
    for stretch in stretches:
        size = stretch
        code = codes[i]
        f = flags[i]
        make, shape, default_actor, kind = table[code]
        if f & ~_RUN_START or not joins[code]:
            # -- one event (a stretch's first that cannot start a run)
            dt = times[i]
            t = dt if f & TIME_ABS else t + dt
            if f:
                if f & ACTOR_STORED:
                    actor = actors[ai]
                    ai += 1
                else:
                    actor = default_actor
                if f & MSG_NEW:
                    msg = refs[refidx[ri]]
                    ri += 1
                    have_msg = True
                if f & PART_NEW:
                    part = refs[refidx[ri]]
                    ri += 1
                    have_part = True
                if f & V_STORED:
                    v = vs[vi]
                    vi += 1
                else:
                    v = 1
                if make is not None:  # a bare kind: its string
                    if f & NO_BODY:
                        _no_string(kind.tag)
                    end = tp + lens[li]
                    body = text[tp:end]
                    li += 1
                    tp = end
                elif f & NO_BODY:
                    body = None
                else:
                    body = bodies[bi]
                    bi += 1
                if f & (MSG_NEW | PART_NEW):
                    have = 2 if have_msg and have_part else 1 if have_msg else 0
                    if shape > have or (f & PART_NEW and shape < 2) or (f & MSG_NEW and not shape):
                        _check_refs(kind, f, have_msg, have_part, seq)
                elif shape > have:
                    _check_refs(kind, f, have_msg, have_part, seq)
                if f & ID_STORED:
                    _id_text(ids[ii])  # checked as a read with ids checks it
                    ii += 1
            else:
                actor = default_actor
                v = 1
                if make is not None:
                    end = tp + lens[li]
                    body = text[tp:end]
                    li += 1
                    tp = end
                else:
                    body = bodies[bi]
                    bi += 1
                if shape > have:
                    _check_refs(kind, f, have_msg, have_part, seq)
            if make is not None:
                if shape == 2:
                    append(make("", session_id, seq, t, actor, v, msg, part, body))
                elif shape == 1:
                    append(make("", session_id, seq, t, actor, v, msg, body))
                else:
                    append(make("", session_id, seq, t, actor, v, body))
            elif body is None and kind.blank is not None:  # all defaults (NO_BODY)
                if shape == 2:
                    append(replace(kind.blank, session_id=session_id, seq=seq, time=t,
                                   actor=actor, v=v, message_id=msg, part_id=part))
                elif shape == 1:
                    append(replace(kind.blank, session_id=session_id, seq=seq, time=t,
                                   actor=actor, v=v, message_id=msg))
                else:
                    append(replace(kind.blank, session_id=session_id, seq=seq, time=t,
                                   actor=actor, v=v))
            else:
                if body is None:  # all defaults (NO_BODY)
                    body = {}
                elif type(body) is not dict:
                    body = _body_map(kind, body)
                # As in _rows: a body never holds an envelope field. The type and the
                # id are left out (the typed conversion needs neither), v when it is 1.
                if not envelope.isdisjoint(body):
                    raise EventDecodeError(f"packed block: envelope field in a {kind.tag} body")
                body["session_id"] = session_id
                body["seq"] = seq
                body["time"] = t
                body["actor"] = actor
                if v != 1:
                    body["v"] = v
                if shape:
                    body["message_id"] = msg
                    if shape == 2:
                        body["part_id"] = part
                try:
                    # strict is msgspec's default: naming it costs a keyword parse per
                    # event (~0.6 us, 5% of a replay)
                    append(convert(body, kind.cls))
                except msgspec.ValidationError as exc:
                    raise EventDecodeError(f"packed block: {exc}") from None
            i += 1
            seq += 1
            size -= 1
            if not size:
                continue
            f = 0  # the rest of the stretch: a run, no flags
        # -- a run of ``size`` events from i; its first may name a new message and part
        if f:
            if f & MSG_NEW:
                msg = refs[refidx[ri]]
                ri += 1
                have_msg = True
            if f & PART_NEW:
                part = refs[refidx[ri]]
                ri += 1
                have_part = True
            have = 2 if have_msg and have_part else 1 if have_msg else 0
        if have < 2:
            _check_refs(kind, f, have_msg, have_part, seq)
        joined, li, tp = _run_text(text, lens, li, tp, size)
        end = i + size
        t += sum(times[i:end])
        last = seq + size - 1
        append(Run(kind.cls, msg, part, joined, seq, last, t))
        i = end
        seq = last + 1
    _all_read(block, ii, ai, ri, vi, bi)
    if tp != len(text):  # (opened with sums=False)
        _cut_wrong()
    return out


def _run_text(text: str, lens: list[int], li: int, tp: int, n: int) -> tuple[str, int, int]:
    """The text of a run of ``n`` bare strings from the ``li``-th, which starts at
    ``tp`` in ``text``, and where the next string's length and text are. (A call per
    run, not per event: the row loops inline a single event's slice.)"""
    run_lens = lens[li:li + n]
    if len(run_lens) < n:
        raise EventDecodeError("packed block: fewer strings than events")
    end = tp + sum(run_lens)
    return text[tp:end], li + n, end


def _all_read(block: _Block, ids: int, actors: int, refidx: int, vs: int,  # noqa: PLR0917
              bodies: int) -> None:
    if (ids, actors, refidx, vs, bodies) != (len(block.ids), len(block.actors),
                                             len(block.refidx), len(block.vs),
                                             len(block.bodies)):
        raise EventDecodeError("packed block: more column values than events")


def _check_times(events: list[AnyEvent]) -> None:
    for e in events:
        if not _MSGPACK_INT[0] <= e.time <= _MSGPACK_INT[1]:
            raise EventDecodeError(f"packed block: time out of range at seq {e.seq}")


def _check_refs(kind: _Kind, f: int, have_msg: bool, have_part: bool, seq: int) -> None:
    """A message/part id flag only where the kind has the field, and a previous id
    to repeat where it has the field and no flag."""
    if f & MSG_NEW and not kind.has_msg:
        raise EventDecodeError(f"packed block: a message id on {kind.tag} at seq {seq}")
    if f & PART_NEW and not kind.has_part:
        raise EventDecodeError(f"packed block: a part id on {kind.tag} at seq {seq}")
    if kind.has_msg and not have_msg:
        raise EventDecodeError(f"packed block: no message id at seq {seq}")
    if kind.has_part and not have_part:
        raise EventDecodeError(f"packed block: no part id at seq {seq}")


_END: Final = object()


def _body_map(kind: _Kind, body: Any) -> dict[str, Any]:
    """The fields of an event stored as a map (None: all defaults)."""
    if body is None:
        return {}
    raise EventDecodeError(f"packed block: a {kind.tag} body is a {type(body).__name__}")
