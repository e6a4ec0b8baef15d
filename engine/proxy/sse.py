"""Server-sent events read incrementally from a byte stream (a side copy of the
response: the client's bytes are forwarded before they are parsed here)."""

from __future__ import annotations

from collections.abc import Iterator


class SSEParser:
    """Feed bytes as they arrive; get each complete event's ``(event, data)``.

    Lines end with LF, CRLF or CR; an event ends at a blank line; ``data`` lines
    join with LF; comments (``:``) and other fields are skipped.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str, str]]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" not in buf:  # lines end with LF alone (every provider's stream): split
            lines = buf.split(b"\n")
            self._buf = lines.pop()  # the line not ended yet
            line_event = self._line
            for raw in lines:
                event = line_event(raw.decode("utf-8", errors="replace"))
                if event is not None:
                    yield event
            return
        start = 0
        n = len(buf)
        while True:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr == n - 1:  # a CR at the end: it may be half of a CRLF
                    break
                end, nxt = cr, cr + 2 if buf[cr + 1:cr + 2] == b"\n" else cr + 1
            else:
                end, nxt = lf, lf + 1
            line = buf[start:end].decode("utf-8", errors="replace")
            start = nxt
            event = self._line(line)
            if event is not None:
                yield event
        self._buf = buf[start:]

    def _line(self, line: str) -> tuple[str, str] | None:
        if not line:
            if not self._data and not self._event:
                return None
            out = (self._event, "\n".join(self._data))
            self._event, self._data = "", []
            return out
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def close(self) -> Iterator[tuple[str, str]]:
        """The stream ended: an event still without its blank line is complete."""
        if self._buf:
            yield from self.feed(b"\n")
        if self._data:
            yield from (e for e in [self._line("")] if e is not None)
