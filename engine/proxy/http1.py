"""HTTP/1.1 message framing for the forwarder: message heads, and where a body ends.

The forwarder passes bytes on as they arrive and only needs to know where each
message ends (to reuse connections and to tell the recorder a call is over) and
which bytes are the body's own (the recorder's copy). So a head is split into
its lines, kept raw, and a body's framing is scanned incrementally: each
:meth:`Framing.feed` returns the payload pieces in the bytes it was given and
how many of them belong to this message.
"""

from __future__ import annotations

import attrs

MAX_HEAD = 256 * 1024  # a head larger than this is refused (431 / a broken upstream)
_MAX_LINE = 8192  # a chunk-size or trailer line


class BadMessage(Exception):
    """Bytes that are not an HTTP/1.1 message."""


@attrs.define
class Head:
    """A message head: its first line and its header lines, raw (no CRLF)."""

    first: bytes
    lines: list[bytes]
    headers: list[tuple[bytes, bytes]]  # (name lowercased, value stripped), in order

    def get(self, name: bytes) -> bytes | None:
        values = [v for n, v in self.headers if n == name]
        return b", ".join(values) if values else None

    def tokens(self, name: bytes) -> set[bytes]:
        """A comma-separated header's tokens, lowercased (``connection``, ...)."""
        value = self.get(name)
        if value is None:
            return set()
        return {t.strip().lower() for t in value.split(b",") if t.strip()}


def head_end(buf: bytes | bytearray) -> int:
    """The index just past the blank line ending a head in ``buf``, or -1."""
    at = buf.find(b"\r\n\r\n")
    if at >= 0:
        return at + 4
    at = buf.find(b"\n\n")  # bare LF line ends (tolerated)
    return at + 2 if at >= 0 else -1


def parse_head(raw: bytes) -> Head:
    """``raw`` is a head up to and including its blank line."""
    text = raw.rstrip(b"\r\n")
    lines = [line.rstrip(b"\r") for line in text.split(b"\n")]
    if not lines or not lines[0]:
        raise BadMessage("an empty head")
    headers: list[tuple[bytes, bytes]] = []
    kept: list[bytes] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise BadMessage(f"a malformed header line: {line[:80]!r}")
        headers.append((name.lower(), value.strip()))
        kept.append(line)
    return Head(lines[0], kept, headers)


def request_line(head: Head) -> tuple[str, str, bytes]:
    """(method, target, version) of a request head."""
    parts = head.first.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadMessage(f"not an HTTP/1.x request line: {head.first[:80]!r}")
    return parts[0].decode("ascii", "replace"), parts[1].decode("latin-1"), parts[2]


def status_line(head: Head) -> tuple[bytes, int]:
    """(version, status) of a response head."""
    parts = head.first.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise BadMessage(f"not an HTTP/1.x status line: {head.first[:80]!r}")
    return parts[0], int(parts[1])


class Framing:
    """A body's end, found as its bytes are fed."""

    done: bool = False
    # The connection can carry another message after this one.
    reusable: bool = True

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        """(the payload pieces in ``data``, how many bytes of ``data`` are this body's)."""
        raise NotImplementedError


class Empty(Framing):
    def __init__(self) -> None:
        self.done = True

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        return [], 0


class Length(Framing):
    def __init__(self, length: int) -> None:
        self.left = length
        self.done = length == 0

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        if len(data) < self.left:
            self.left -= len(data)
            return [data], len(data)
        piece, self.left, self.done = data[:self.left], 0, True
        return [piece], len(piece)


class UntilClose(Framing):
    """A response without a length: it ends when the upstream closes."""

    reusable = False

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        return [data], len(data)


_SIZE, _DATA, _CRLF, _TRAILER = range(4)


class Chunked(Framing):
    """``Transfer-Encoding: chunked``: the payload is the chunks' data."""

    def __init__(self) -> None:
        self._state = _SIZE
        self._left = 0
        self._line = b""

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        out: list[bytes] = []
        i, n = 0, len(data)
        while i < n and not self.done:
            if self._state == _DATA:
                take = min(self._left, n - i)
                out.append(data[i:i + take])
                i += take
                self._left -= take
                if not self._left:
                    self._state, self._left = _CRLF, 2
            elif self._state == _CRLF:
                if data[i:i + 1] == b"\n":  # a bare LF ends the chunk's data too
                    self._left = 1
                take = min(self._left, n - i)
                i += take
                self._left -= take
                if not self._left:
                    self._state = _SIZE
            else:
                j = data.find(b"\n", i)
                if j < 0:
                    self._line += data[i:]
                    if len(self._line) > _MAX_LINE:
                        raise BadMessage("a chunk-size line too long")
                    return out, n
                line = (self._line + data[i:j]).rstrip(b"\r")
                self._line = b""
                i = j + 1
                if self._state == _SIZE:
                    self._size(line)
                elif not line:
                    self.done = True
        return out, i

    def _size(self, line: bytes) -> None:
        text = line.split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            raise BadMessage(f"a bad chunk size: {line[:40]!r}") from None
        if size < 0:
            raise BadMessage(f"a bad chunk size: {line[:40]!r}")
        if size == 0:
            self._state = _TRAILER
        else:
            self._state, self._left = _DATA, size


def body_framing(head: Head, *, request: bool, method: str = "", status: int = 0
                 ) -> Framing:
    """How the body after ``head`` is framed (RFC 9112 section 6)."""
    if not request and (method == "HEAD" or status in (204, 304) or 100 <= status < 200):
        return Empty()
    if b"chunked" in head.tokens(b"transfer-encoding"):
        return Chunked()
    length = head.get(b"content-length")
    if length is not None:
        values = {v.strip() for v in length.split(b",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise BadMessage(f"a bad content-length: {length[:40]!r}")
        return Length(int(next(iter(values))))
    return Empty() if request else UntilClose()
