"""The door: every event passes the same checks before any store writes it.

msgspec checks types and ``Literal`` vocabularies when it *decodes*, not when a
struct is built in code, so ``ToolFailed(kind="crashed")`` or a token count of
``2**70`` would reach a store unchecked: one backend keeps it, another crashes
or writes bytes it cannot read back. So the pipeline turns each stamped event
into its canonical bytes (which the hash chain needs anyway) and reads them back
with the typed decoder: one C-level pass that applies exactly the rules a stored
event is read with. What decoding cannot see is checked around it:

- any JSON value a model can produce is held, integers of any size and strings
  with lone surrogates included, in the free-form JSON of an event (a tool's
  input, metadata): the codec writes what msgpack lacks as an extension
  (:func:`engine.codec.escaped`). The event's *typed* integers (seq, time,
  token counts) stay within the signed 64-bit range, and its ids (``id``,
  ``session_id``, ``actor``, ``message_id``, ``part_id``, which stores index as
  text) hold no lone surrogate: a byte pattern search finds the candidates, and
  a walk of the event confirms;
- nesting deep enough to exhaust the stack, or an object of no JSON type, fails
  the encode; infinite floats encode but no JSON holds them (the same search);
- NaN, and any value that decodes into something else (a dict where a struct
  belongs), make the decoded event differ from the one given;
- nesting deeper than ``MAX_DEPTH``: a count of the container bytes rules it out
  for nearly every event, a walk settles the rest.

Every event type also has a shorter proof of the same verdict, compiled from its
declaration: once the encode succeeded (no lone surrogate, no integer past 64
bits), each field holding exactly its declared type (an ``int`` within the signed
64-bit range, a finite ``float``, one of a string ``Literal``'s values, a nested
struct of exactly its class field by field, a list or dict of such values, None
where the field is optional, a JSON object of exact JSON values within the depth
bound) is what the decode would find. The streamed deltas, most of a log, and an
import's messages, tool parts and results take it; anything else (a subclass, a
tuple where a list is declared, a number out of range, NaN...) takes the full path, which decides (a
property test and an edge-value sweep over every field path hold the two paths to
the same verdict).

Every refusal is :class:`~engine.errors.InvalidEvent` naming the event type, the
field path and the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from engine.codec import (
    UNENCODABLE,
    OnFirstUse,
    canonical,
    canonical_encoder,
    ext_hook,
    typed_fallback,
)
from engine.errors import InvalidEvent
from engine.events import EVENT_TYPES, AnyEvent, Event
from engine.store.freeform import free_fields, holds, struct_info

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
# Containers nested in one event, the event itself included. Far above real tool
# input, far below what decoding on a deep call stack could not take.
MAX_DEPTH = 100

_typed = OnFirstUse(lambda: msgspec.msgpack.Decoder(AnyEvent, ext_hook=ext_hook))
_canonical_encode = canonical_encoder.encode  # what canonical() calls, without the call
# msgpack uint64 with the top bit set (>= 2**63); any float64 (rare in events: a
# walk then looks for an infinity).
_BIG_INT = re.compile(rb"\xcf[\x80-\xff]").search
_FLOAT = b"\xcb"
# msgpack bin and ext headers: ``bytes``, a datetime, ... in a free-form field encode
# and decode back to themselves, but JSON (and PostgreSQL's jsonb) would hold them
# as something else, so a store would then read back other bytes than it chained.
# A candidate search (these bytes also occur inside strings); a walk confirms.
_NON_JSON = re.compile(rb"[\xc4-\xc9\xd4-\xd8]").search
# Every byte that is not a msgpack container header: what is left after deleting
# them bounds the number of containers, hence the depth.
_NOT_CONTAINER = bytes(b for b in range(256) if not (0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF))
_PATH_RE = re.compile(r"at `(\$[^`]*)`")


def admit(event: Event) -> bytes:
    """The event's canonical bytes, or InvalidEvent: the one check of every stored event."""
    try:
        data = _canonical_encode(event)
    except UNENCODABLE:
        # A big integer or a lone surrogate: its extension, then the full proof
        # (which decides where such a value may be).
        try:
            data = canonical(event)
        except (OverflowError, UnicodeEncodeError, RecursionError, TypeError,
                ValueError) as exc:
            raise _refusal(event, exc) from None
        return _admit_decoded(event, data)
    except (RecursionError, TypeError, ValueError) as exc:
        raise _refusal(event, exc) from None
    fast = _FAST.get(event.__class__)
    if fast is not None and fast(event):
        return data
    return _admit_decoded(event, data)


def _refusal(event: Event, exc: Exception) -> InvalidEvent:
    found = first_problem(event)
    if found is None:
        return _refuse(event, "$", f"cannot be encoded: {exc}")
    return _refuse(event, *found)


def admit_all(events: Iterable[Event], *, stamped: bool = False) -> list[bytes]:
    """:func:`admit` of each event, in one loop (a batch's events: no call per event
    for the deltas, whose short proof is inlined).

    ``stamped``: the caller vouches that every event's envelope but ``v`` (id,
    session, seq, time, actor) holds exactly its type in range (a session's own
    stamp: see :class:`engine.store.base.Stamped`); the short proof then checks
    the other fields only. It only ever decides yes for what the full proof
    admits; the full proof still decides every no."""
    out: list[bytes] = []
    append = out.append
    encode = _canonical_encode
    fast_checks = _FAST_PAYLOAD if stamped else _FAST
    for event in events:
        try:
            data = encode(event)
        except (OverflowError, UnicodeEncodeError, RecursionError, TypeError, ValueError):
            data = admit(event)  # escapes what msgpack lacks, or raises naming the field
        else:
            fast = fast_checks.get(event.__class__)
            if fast is None or not fast(event):
                data = _admit_decoded(event, data)
        append(data)
    return out


def _admit_decoded(event: Event, data: bytes) -> bytes:
    """The full proof: decode the canonical bytes as stored events are read."""
    cls = event.__class__
    plain = cls in _PLAIN
    free = cls in _FREE_FORM
    if not plain and (_BIG_INT(data) is not None or _FLOAT in data or (
            # A walk of the free-form values that builds no paths, in place of a byte
            # search for their candidates (a char-class search of the whole event ran
            # at ~60 MB/s and its candidates were mostly a time's or a length's byte).
            # It only ever says yes for what first_problem finds nothing in.
            free and not json_only([getattr(event, f) for f in free_fields(cls)]))):
        found = first_problem(event)
        if found is not None:
            raise _refuse(event, *found)
    try:
        try:
            back = _typed.decode(data)
        except msgspec.ValidationError:
            # An extension (engine.codec.escaped) where a typed field is: a lone
            # surrogate in a text field is fine, an id or a typed integer is not.
            back = typed_fallback(data, AnyEvent)
            found = first_problem(event)
            if found is not None:
                raise _refuse(event, *found) from None
    except msgspec.ValidationError as exc:
        # Where the byte search used to send the event to first_problem before the
        # decode (a wrong value in a typed field of a free-form event), its refusal
        # stands, as it did.
        found = first_problem(event) if free and (
            len(data.translate(None, _NOT_CONTAINER)) >= MAX_DEPTH
            or _NON_JSON(data) is not None) else None
        if found is not None:
            raise _refuse(event, *found) from None
        match = _PATH_RE.search(str(exc))
        reason = str(exc).split(" - at ")[0]
        raise _refuse(event, match.group(1) if match else "$", reason) from None
    if back != event:
        found = _difference(event, back)
        if found is not None:
            raise _refuse(event, *found)
    # After the decode: these are ints now.
    if not 0 <= back.time <= INT_MAX:
        raise _refuse(event, "$.time", f"time {_short(back.time)} is negative or outside "
                                       "the signed 64-bit range")
    if plain and not (back.seq <= INT_MAX and back.v <= INT_MAX):
        found = first_problem(event)
        raise _refuse(event, *(found or ("$", "an integer is outside the signed 64-bit range")))
    return data


_ENVELOPE_INTS = frozenset({"seq", "time", "v"})
# Event types that can nest without bound: only their free-form JSON can be deep.
_FREE_FORM: frozenset[type] = frozenset(cls for cls in EVENT_TYPES if free_fields(cls))
# Event types whose only numbers are the envelope's (the streamed deltas): no byte
# scan, three comparisons after the decode instead.
_PLAIN: frozenset[type] = frozenset(
    cls for cls in EVENT_TYPES
    if not holds(struct_info(cls),
                 (msgspec.inspect.AnyType, msgspec.inspect.IntType,
                  msgspec.inspect.FloatType), skip=_ENVELOPE_INTS))


_JSON_SCALARS = frozenset({str, int, bool, type(None)})
_JSON_ARRAYS = frozenset({list, tuple})


def json_only(values: list[Any], depth: int = 2) -> bool:
    """True when ``values`` (an event's free-form field values, at ``depth``) hold only
    exact JSON types: str, bool, None, an int within the signed 64-bit range, a finite
    float, dicts with str keys, lists and tuples, no container deeper than
    ``MAX_DEPTH``: then :func:`first_problem` finds nothing in them. False says
    nothing (a struct, a subclass, a big integer...): first_problem decides."""
    stack = [(v, depth) for v in values]
    pop, push = stack.pop, stack.append
    scalars, arrays = _JSON_SCALARS, _JSON_ARRAYS
    while stack:
        value, d = pop()
        cls = value.__class__
        if cls in scalars:
            if cls is int and not INT_MIN <= value <= INT_MAX:
                return False
            continue
        if cls is float:
            if not math.isfinite(value):
                return False
            continue
        if d > MAX_DEPTH:
            return False
        if cls is dict:
            for k in value:
                if k.__class__ is not str:
                    return False
            items = value.values()
        elif cls in arrays:
            items = value
        else:
            return False
        d += 1
        for v in items:
            if v.__class__ is str:  # most leaves: no push
                continue
            push((v, d))
    return True


def short_proof(event: Event) -> bool:
    """True when the short proof holds for ``event``: for an event that encodes, the
    full proof would admit it too (and decoding its bytes gives it back). False says
    nothing: the full proof decides."""
    fast = _FAST.get(event.__class__)
    return fast is not None and fast(event)


def _plain(t: msgspec.inspect.Type) -> bool:
    return type(t) is msgspec.inspect.StrType and (t.min_length, t.max_length,
                                                   t.pattern) == (None, None, None)


def _term(t: msgspec.inspect.Type, value: str, name: str, depth: int = 2) -> str | None:
    """A boolean expression true when ``value`` holds exactly what field type ``t``
    takes, in what every store holds; None for a type the short proof does not cover.
    ``name`` is the event's own field name (``time`` is never negative), empty inside
    a nested struct; ``depth`` is where ``value`` sits (the event is at 1), for the
    depth bound of free-form JSON."""
    mi = msgspec.inspect
    unbounded = (None,) * 5
    if _plain(t):
        return f"{value}.__class__ is str"
    if type(t) is mi.IntType and (t.gt, t.ge, t.lt, t.le, t.multiple_of) == unbounded:
        # The bounds as literals (constants in the compiled code, not two global lookups).
        low = "0" if name == "time" else str(INT_MIN)
        return f"({value}.__class__ is int and {low} <= {value} <= {INT_MAX})"
    if type(t) is mi.BoolType:
        return f"{value}.__class__ is bool"
    if type(t) is mi.FloatType and (t.gt, t.ge, t.lt, t.le, t.multiple_of) == unbounded:
        # A finite float reads back as itself (an int here takes the full proof).
        return f"({value}.__class__ is float and isfinite({value}))"
    if type(t) is mi.LiteralType and all(v.__class__ is str for v in t.values):
        return f"({value}.__class__ is str and {value} in {tuple(t.values)!r})"
    if (type(t) is mi.DictType and _plain(t.key_type) and type(t.value_type) is mi.AnyType
            and (t.min_length, t.max_length) == (None, None)):
        # A JSON object: of strings only (a tool's input, often), or of exact JSON values
        # within the depth bound (what first_problem finds nothing in: json_only).
        return f"({value}.__class__ is dict and json_object({value}, {depth}))"
    if (type(t) is mi.DictType and _plain(t.key_type)
            and (t.min_length, t.max_length) == (None, None)):
        key, item = f"k{depth}", f"x{depth}"
        inner = _term(t.value_type, item, "", depth + 1)
        # (An empty one without the generator all() would make.)
        return None if inner is None else (
            f"({value}.__class__ is dict and (not {value} or all({key}.__class__ is str "
            f"and {inner} for {key}, {item} in {value}.items())))")
    if type(t) is mi.ListType and (t.min_length, t.max_length) == (None, None):
        item = f"x{depth}"
        inner = _term(t.item_type, item, "", depth + 1)
        return None if inner is None else (
            f"({value}.__class__ is list and (not {value} or all({inner} for {item} in "
            f"{value})))")
    if type(t) is mi.StructType:
        # A nested struct of exactly its class, each field by its own term.
        terms = []
        for field in t.fields:
            inner = _term(field.type, f"{value}.{field.name}", "", depth + 1)
            if inner is None:
                return None
            terms.append(inner)
        alias = f"_{t.cls.__module__.replace('.', '_')}_{t.cls.__qualname__}"
        _NESTED[alias] = t.cls
        return f"({value}.__class__ is {alias} and {' and '.join(terms) or 'True'})"
    if type(t) is mi.UnionType:
        # None, or one of the members (tagged structs decode back to their own class).
        options = [None if type(u) is mi.NoneType else _term(u, value, name, depth)
                 for u in t.types]
        if any(u is None for u, m in zip(options, t.types, strict=True)
               if type(m) is not mi.NoneType):
            return None
        members = [u for u in options if u is not None]
        nullable = [f"{value} is None"] if len(members) < len(options) else []
        return f"({' or '.join(nullable + members)})"
    return None


# The nested struct classes the short proofs compare with (by name in the compiled code).
_NESTED: dict[str, type] = {}


def json_object(d: dict[Any, Any], depth: int) -> bool:
    """``strings_only(d) or json_only([d], depth)``, the same verdict: one pass over the
    items while they are strings (a tool's input, often), the walk from the first
    other value on (instead of two sets built first, which a dict of nested metadata
    always failed)."""
    for k, v in d.items():
        if k.__class__ is not str or v.__class__ is not str:
            return json_only([d], depth)
    return True


def strings_only(d: dict[Any, Any]) -> bool:
    """Every key and every value of ``d`` exactly a str (true for an empty dict)."""
    return not d or (set(map(type, d)) == _STR and set(map(type, d.values())) == _STR)


_STR = {str}


# The envelope fields a session stamps itself (Session.record): the short proof of a
# stamped batch leaves them out (``v`` stays in: the caller may have set it).
STAMPED_FIELDS = frozenset({"id", "session_id", "seq", "time", "actor"})


def _fast_check(cls: type[Event], skip: frozenset[str] = frozenset()
                ) -> Callable[[Event], bool] | None:
    """For an event type whose fields are all of the types :func:`_term` covers: a
    function true when every field holds exactly its type, in the range every store
    holds (after a successful encode, what decoding would find). None for other
    types. Fields named in ``skip`` are left out (still required to be of a covered
    type, so both forms cover the same event types)."""
    code = _fast_code(cls, skip)
    return None if code is None else _compile(code)


def _fast_code(cls: type[Event], skip: frozenset[str]) -> str | None:
    """The source of :func:`_fast_check`'s function (None: a type it does not cover)."""
    terms = []
    for field in struct_info(cls).fields:
        term = _term(field.type, f"e.{field.name}", field.name)
        if term is not None and field.name in skip:
            continue
        if term is None:
            return None
        terms.append(term)
    # One boolean expression per type, compiled once from the declaration: no loop,
    # no tuple per event (this runs for every delta).
    return f"lambda e: {' and '.join(terms) or 'True'}"


def _compile(code: str) -> Callable[[Event], bool]:
    check: Callable[[Event], bool] = eval(
        code, {"INT_MIN": INT_MIN, "INT_MAX": INT_MAX, "json_object": json_object,
               "isfinite": math.isfinite, **_NESTED})
    return check


def _deferred(table: dict[type, Callable[[Event], bool]], cls: type[Event],
              code: str) -> Callable[[Event], bool]:
    """A stand-in that compiles ``cls``'s proof when an event of it first comes, puts
    it in ``table`` in its own place and answers with it: compiling all 64 at import
    cost every process (a CLI start) about 20 ms, and most meet a few types."""
    def first(e: Event) -> bool:
        check = table[cls] = _compile(code)
        return check(e)
    return first


def _proofs(skip: frozenset[str]) -> dict[type, Callable[[Event], bool]]:
    table: dict[type, Callable[[Event], bool]] = {}
    for cls in EVENT_TYPES:
        code = _fast_code(cls, skip)
        if code is not None:
            table[cls] = _deferred(table, cls, code)
    return table


_FAST = _proofs(frozenset())
# The same proofs without the stamped envelope fields, for a session's stamped batch.
_FAST_PAYLOAD = _proofs(STAMPED_FIELDS)


def _refuse(event: Event, path: str, reason: str) -> InvalidEvent:
    tag = getattr(type(event).__struct_config__, "tag", None)
    if not isinstance(tag, str):
        tag = type(event).__name__
    return InvalidEvent(tag, event.id if isinstance(event.id, str) else repr(event.id),
                        path, reason)


def _children(value: Any, path: str) -> Iterator[tuple[Any, str]]:
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            yield getattr(value, name), f"{path}.{name}"
    elif isinstance(value, dict):
        for k, v in value.items():
            yield v, f"{path}.{k}" if isinstance(k, str) else f"{path}[{k!r}]"
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield v, f"{path}[{i}]"


# The fields stores index as text: no lone surrogate in them.
ID_FIELDS = frozenset({"id", "session_id", "actor", "message_id", "part_id"})


def first_problem(event: Event) -> tuple[str, str] | None:
    """(path, reason) of the first value no store can hold, walking without recursion.

    ``typed`` below: the value is a field of a struct (not inside free-form JSON)."""
    stack: list[tuple[Any, str, int, str]] = [(event, "$", 1, "")]
    while stack:
        value, path, depth, field = stack.pop()
        cls = value.__class__
        if cls is str:
            if field in ID_FIELDS and not value.isascii():
                try:
                    value.encode()
                except UnicodeEncodeError as exc:
                    return path, (f"lone surrogate {value[exc.start]!r} at index {exc.start} "
                                  "in an id")
        elif cls is int:
            if field and not INT_MIN <= value <= INT_MAX:
                return path, f"integer {_short(value)} is outside the signed 64-bit range"
        elif cls is float:
            if not math.isfinite(value):
                return path, f"{value} is not a finite number"
        elif value is None or cls is bool:
            pass
        elif isinstance(value, msgspec.Struct | dict | list | tuple):
            if depth > MAX_DEPTH:
                return path, f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(value, dict):
                for k in value:
                    if not isinstance(k, str):
                        return path, f"key {_short(k)} is not a string"
            children = list(_children(value, path))
            typed = isinstance(value, msgspec.Struct)
            stack.extend((v, p, depth + 1, p.rsplit(".", 1)[-1] if typed else "")
                         for v, p in reversed(children))
        else:
            return path, f"a {cls.__name__} is not a JSON value"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} digits)"


def _difference(given: Event, back: Event) -> tuple[str, str] | None:
    """Where the event given differs from its decoded bytes: a value of the wrong type
    that decoding converted, or NaN. None when the only differences are sequences
    given as tuples (they are stored as the same array)."""
    found = first_problem(given)
    if found is not None:
        return found
    stack: list[tuple[Any, Any, str]] = [(given, back, "$")]
    while stack:
        a, b, path = stack.pop()
        if isinstance(a, tuple) and isinstance(b, list):
            a = list(a)
        if type(a) is not type(b) and not (type(a) is int and type(b) is float):
            return path, f"expected {type(b).__name__}, got {type(a).__name__}"
        if isinstance(a, msgspec.Struct | dict | list):
            if isinstance(a, dict) and a.keys() != b.keys():
                return path, "keys differ after decoding"
            if isinstance(a, list) and len(a) != len(b):
                return path, "length differs after decoding"
            if isinstance(a, dict):
                stack.extend((v, b[k], f"{path}.{k}") for k, v in a.items())
            else:
                mine = list(_children(a, path))
                theirs = [v for v, _ in _children(b, path)]
                stack.extend((x, y, p) for (x, p), y in zip(mine, theirs, strict=True))
        elif a != b:
            return path, f"{_short(a)} reads back as {_short(b)}"
    return None
