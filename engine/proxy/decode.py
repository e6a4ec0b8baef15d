"""Decoding a compressed response on the side copy (the client gets it as sent)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any


class UndecodableBody(Exception):
    """A content encoding the recorder cannot decode (the client is unaffected)."""


def decoder(encoding: str) -> Callable[[bytes], bytes]:
    """An incremental decoder for a ``Content-Encoding`` (listed encodings applied
    in order, decoded in reverse)."""
    steps = [e.strip().lower() for e in encoding.split(",") if e.strip()]
    steps = [e for e in steps if e != "identity"]
    funcs = [_one(e) for e in reversed(steps)]

    def decode(chunk: bytes) -> bytes:
        for f in funcs:
            chunk = f(chunk)
        return chunk

    return decode


def _one(encoding: str) -> Callable[[bytes], bytes]:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
    if encoding == "deflate":
        return _Deflate().decompress
    if encoding == "br":
        return _module_decoder(("brotli", "brotlicffi"), "Decompressor", "process", encoding)
    if encoding == "zstd":
        return _module_decoder(("zstandard",), "ZstdDecompressor", "", encoding)
    raise UndecodableBody(f"content encoding {encoding!r} is not supported")


class _Deflate:
    """``deflate`` is zlib-wrapped by the standard, raw by some servers: try both."""

    def __init__(self) -> None:
        self._obj: Any = None
        self._first = b""

    def decompress(self, chunk: bytes) -> bytes:
        if self._obj is None:
            self._first += chunk
            if len(self._first) < 2:
                return b""
            wrapped = (self._first[0] & 0x0F) == 8 and int.from_bytes(self._first[:2]) % 31 == 0
            self._obj = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            chunk, self._first = self._first, b""
        out: bytes = self._obj.decompress(chunk)
        return out


def _module_decoder(names: tuple[str, ...], cls: str, method: str, encoding: str
                    ) -> Callable[[bytes], bytes]:
    import importlib  # noqa: PLC0415 - optional codecs

    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if name == "zstandard":
            obj = module.ZstdDecompressor().decompressobj()
            return obj.decompress  # type: ignore[no-any-return]
        return getattr(getattr(module, cls)(), method)  # type: ignore[no-any-return]
    raise UndecodableBody(f"content encoding {encoding!r} needs the {names[0]} package")
