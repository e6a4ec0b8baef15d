"""Stored snapshot chunks, format 3: one WithParts message as positional msgpack arrays.

A chunk of format 2 was msgpack of the message's JSON view (the seed's names) and
was read back through cattrs, field by field and union by union: about a third of
an ``at(seq)`` on a short tail went into that. Format 3 writes each view as the
array of its attribute values in declaration order, a tagged view (a part, a tool
state, a message info) led by its tag. The encoder and the decoder of every view
class are compiled once, on first use, from the views' attrs declarations, so reading
a chunk is one msgpack decode plus one constructor call per view, and the chunk is
about half as large.

Positional arrays depend on those declarations, so every chunk starts with a
fingerprint of them (each class, its fields and their types). A chunk whose
fingerprint differs was written against other views: it is stale, as is one of
the wrong shape, and :func:`decode_chunk` raises :class:`StaleChunk` (the reader
then rebuilds that message by replay; a snapshot is only a cache).

Message values that are the events' msgspec types (tokens, a model reference, an
error, a file source) are written by msgspec as msgspec writes them and read back
through ``msgspec.convert`` against their declared type. Everything else (text,
numbers, JSON metadata, tool input) is written as is.
"""

from __future__ import annotations

import functools
import hashlib
import types
import typing
from collections.abc import Callable
from typing import Any, Final, Union

import attrs
import msgspec

from engine.codec import ext_hook, packb
from projections import views as v


class StaleChunk(ValueError):
    """A chunk that is not format 3 of today's views (or is damaged): a cache miss."""


# The plan of a value's type: how it is written and read, as source text around a name.
_Plan = tuple[str, Callable[[str], str], Callable[[str], str], str]  # kind, enc, dec, description


class _Compiler:
    def __init__(self) -> None:
        self.scope: dict[str, Any] = {"StaleChunk": StaleChunk, "convert": msgspec.convert}
        self.done: dict[type, str] = {}  # class -> the suffix of its E_/D_ functions
        self.described: list[str] = []
        self.source: list[str] = []

    def _name(self, obj: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.scope)}"
        self.scope[name] = obj
        return name

    def plan(self, t: Any) -> _Plan:
        origin = typing.get_origin(t)
        if origin in (Union, types.UnionType):
            args = typing.get_args(t)
            rest = [a for a in args if a is not type(None)]
            inner = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 - runtime union
            if len(rest) < len(args):
                kind, enc, dec, desc = self.plan(inner)
                if kind == "plain":
                    return kind, enc, dec, f"{desc}?"
                wrap = enc("x") != "x"  # (a struct is written as it is)
                return ("optional",
                        (lambda x: f"(None if {x} is None else {enc(x)})") if wrap else enc,
                        lambda x: f"(None if {x} is None else {dec(x)})", f"{desc}?")
            if all(attrs.has(a) for a in rest):
                return self._tagged_union(rest)
            if all(_is_struct(a) for a in rest):
                return self._struct(t, rest)
            raise TypeError(f"snapshot chunks cannot hold {t!r}")
        if attrs.has(t):
            suffix = self.compile(t)
            return ("view", lambda x: f"E{suffix}({x})", lambda x: f"D{suffix}({x}, sid)",
                    t.__name__)
        if _is_struct(t):
            return self._struct(t, [t])
        if origin is list:
            (item,) = typing.get_args(t)
            kind, enc, dec, desc = self.plan(item)
            if kind == "plain":
                return kind, enc, dec, f"list[{desc}]"
            return ("list", lambda x: f"[{enc('i')} for i in {x}]",
                    lambda x: f"[{dec('i')} for i in {x}]", f"list[{desc}]")
        return "plain", lambda x: x, lambda x: x, _type_name(t)

    def _struct(self, t: Any, members: list[type]) -> _Plan:
        name = self._name(t, "T")
        desc = "|".join(_describe_struct(m) for m in members)
        return "struct", lambda x: x, lambda x: f"convert({x}, {name})", desc

    def _tagged_union(self, members: list[type]) -> _Plan:
        encoders: dict[type, Any] = {}
        decoders: dict[str, Any] = {}
        for cls in members:
            tag = getattr(cls, "TAG", None)
            if tag is None or tag in decoders:
                raise TypeError(f"{cls.__name__} needs a TAG of its own in a union")
            suffix = self.compile(cls)
            encoders[cls] = f"E{suffix}"
            decoders[tag] = f"D{suffix}"
        # Their values name functions until every member's exist (after exec): finish().
        enc_map = self._name(encoders, "EU")
        dec_map = self._name(decoders, "DU")
        return ("union", lambda x: f"{enc_map}[type({x})]({x})",
                lambda x: f"{dec_map}[{x}[0]]({x}, sid)",
                "|".join(c.__name__ for c in members))

    def compile(self, cls: type) -> str:
        """Emit ``E<n>(obj)`` and ``D<n>(array, sid)`` for an attrs view class."""
        found = self.done.get(cls)
        if found is not None:
            return found
        suffix = str(len(self.done))
        self.done[cls] = suffix
        hints = typing.get_type_hints(cls)
        fields = attrs.fields(cls)
        tag = getattr(cls, "TAG", None)
        lead = 0 if tag is None else 1
        enc_items = [] if tag is None else [repr(tag)]
        dec_args: list[str] = []
        dec_kw: list[str] = []
        desc = []
        for i, f in enumerate(fields):
            if not f.init:
                raise TypeError(f"{cls.__name__}.{f.name} is not an argument")
            _, enc, dec, what = self.plan(hints[f.name])
            enc_items.append(enc(f"o.{f.name}"))
            item = f"a[{lead + i}]"
            # A fork reads its parent's chunks: the structural session ids become its own.
            arg = f"({item} if sid is None else sid)" if f.name == "session_id" else dec(item)
            # A keyword-only field (one a base class adds to every part) goes by name,
            # after the positional ones.
            if f.kw_only:
                dec_kw.append(f"{f.alias}={arg}")
            else:
                dec_args.append(arg)
            desc.append(f"{f.name}:{what}")
        name = self._name(cls, "C")
        size = lead + len(fields)
        check = f"len(a) != {size}" + ("" if tag is None else f" or a[0] != {tag!r}")
        self.source += [
            f"def E{suffix}(o):",
            f"    return [{', '.join(enc_items)}]",
            f"def D{suffix}(a, sid):",
            f"    if {check}:",
            f"        raise StaleChunk('a {cls.__name__} of another shape')",
            f"    return {name}({', '.join(dec_args + dec_kw)})",
        ]
        self.described.append(f"{cls.__name__}{'' if tag is None else '=' + tag}"
                              f"({','.join(desc)})")
        return suffix

    def finish(self) -> dict[str, Any]:
        exec("\n".join(self.source), self.scope)  # the source holds names and repr()s only
        for key, value in list(self.scope.items()):
            if key.startswith(("EU", "DU")):
                for k, fn in value.items():
                    value[k] = self.scope[fn]
        return self.scope


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def _type_name(t: Any) -> str:
    return t.__qualname__ if isinstance(t, type) else repr(t)


def _describe_struct(t: Any, seen: frozenset[type] = frozenset()) -> str:
    if t in seen:
        return str(t.__name__)
    config = t.__struct_config__
    parts = []
    for f in msgspec.structs.fields(t):
        nested = [a for a in (f.type, *typing.get_args(f.type)) if _is_struct(a)]
        inner = "".join(_describe_struct(n, seen | {t}) for n in nested)
        parts.append(f"{f.name}:{_type_name(f.type)}{inner}")
    return f"{t.__name__}[{config.tag}]({','.join(parts)})"


FORMAT: Final = 3
# What the positions mean: every view class reachable from WithParts, in order.
# FINGERPRINT (bytes) is computed on first read (module __getattr__ below).
FINGERPRINT: bytes
_module = globals()


# The codec is compiled on first use, not at import: the walk over the views'
# declarations (their annotations evaluated) is needed for FINGERPRINT, which the
# preview check reads, but the generated functions only when a chunk is written or
# read; a `show` printed from stored previews never runs them.
@functools.cache
def _walked() -> tuple[_Compiler, str]:
    compiler = _Compiler()
    top = compiler.compile(v.WithParts)
    # A value set before the first walk (a test's monkeypatch) stays.
    _module.setdefault("FINGERPRINT", hashlib.blake2b(
        f"{FORMAT};{';'.join(compiler.described)}".encode(), digest_size=8).digest())
    return compiler, top


@functools.cache
def _functions() -> tuple[Callable[[v.WithParts], list[Any]],
                          Callable[[list[Any], str | None], v.WithParts]]:
    compiler, top = _walked()
    scope = compiler.finish()
    return scope[f"E{top}"], scope[f"D{top}"]


def __getattr__(name: str) -> bytes:
    if name == "FINGERPRINT":
        _walked()
        fingerprint: bytes = _module["FINGERPRINT"]
        return fingerprint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_enc = msgspec.msgpack.Encoder()  # through engine.codec.packb: big ints, lone surrogates
_dec = msgspec.msgpack.Decoder(tuple[bytes, list[Any]], ext_hook=ext_hook)
# A format 3 chunk is a msgpack array of two (fingerprint, message); format 2 is a map.
_HEAD: Final = b"\x92"


def encode_chunk(message: v.WithParts) -> bytes:
    """The message as format 3 chunk bytes (uncompressed)."""
    encode_view = _functions()[0]  # sets FINGERPRINT
    return packb((_module["FINGERPRINT"], encode_view(message)), _enc)


def is_chunk(data: bytes) -> bool:
    """Whether ``data`` (uncompressed) is a format 3 chunk rather than a format 2 map."""
    return data[:1] == _HEAD


def decode_chunk(data: bytes, session_id: str | None = None) -> v.WithParts:
    """The message of a format 3 chunk; its structural session ids become ``session_id``
    when given (a fork reading its parent's chunk). Raises :class:`StaleChunk`."""
    try:
        decode_view = _functions()[1]  # sets FINGERPRINT
        fingerprint, body = _dec.decode(data)
        if fingerprint != _module["FINGERPRINT"]:
            raise StaleChunk("written against other views")
        return decode_view(body, session_id)
    except StaleChunk:
        raise
    except (msgspec.DecodeError, msgspec.ValidationError, LookupError, TypeError,
            ValueError, AttributeError) as exc:
        raise StaleChunk(f"unreadable chunk: {type(exc).__name__}: {exc}") from None


__all__ = ["FINGERPRINT", "FORMAT", "StaleChunk", "decode_chunk", "encode_chunk", "is_chunk"]
