"""Parse JSON that may be cut short: what the SDKs show for a tool call cut by a token limit.

The Anthropic SDK parses a tool call's argument fragments with ``jiter`` in partial
mode (``from_json(buf, partial_mode=True)``); convlog cannot depend on it, so this
module follows the same rules, checked against jiter by the ingest tests:

- containers cut short are closed with what they hold so far;
- a string, literal (``tru``) or number (``1.``, ``-``, ``1e``) cut short is
  dropped, together with the key it was the value of (and a key without value);
- a complete number at the very end is kept (``{"a": 12`` is ``{"a": 12}``);
- a string or literal cut short at the top level, anything malformed, or text
  after the value raise :class:`ValueError`.

:func:`parse_partial` tells a truncated argument text (a prefix of some JSON
value) from a malformed one (which raises).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["is_prefix", "parse_partial"]

_WS: Final = " \t\n\r"
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_STRING_PREFIX: Final = re.compile(
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\u?[0-9a-fA-F]{0,3})?\Z')
_NUMBER_CHARS: Final = re.compile(r"[-+.eE0-9]*")
_NUMBER_PREFIX: Final = re.compile(r"-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?")
_LITERALS: Final = {"true": True, "false": False, "null": None}


class _Cut(Exception):
    """The text ended inside a scalar: the caller drops it."""


class _Parser:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def ws(self) -> bool:
        """Skip whitespace; False at the end of the text."""
        text, n = self.text, len(self.text)
        while self.pos < n and text[self.pos] in _WS:
            self.pos += 1
        return self.pos < n

    def value(self) -> Any:
        if not self.ws():
            raise _Cut
        c = self.text[self.pos]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            return self.string()
        if c == "-" or c.isdigit():
            return self.number()
        for word, val in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
            rest = self.text[self.pos:]
            if word.startswith(rest):
                self.pos = len(self.text)
                raise _Cut
        raise ValueError(f"unexpected {c!r} at {self.pos}")

    def string(self) -> str:
        m = _STRING.match(self.text, self.pos)
        if m is None:
            if _STRING_PREFIX.match(self.text, self.pos):
                self.pos = len(self.text)
                raise _Cut
            raise ValueError(f"bad string at {self.pos}")
        self.pos = m.end()
        out: str = json.loads(m.group())
        return out

    def number(self) -> int | float:
        m = _NUMBER_CHARS.match(self.text, self.pos)
        assert m is not None
        token = m.group()
        self.pos = m.end()
        if _NUMBER.fullmatch(token):  # complete (at the end too: jiter keeps it)
            out: int | float = json.loads(token)
            return out
        if self.pos == len(self.text) and _NUMBER_PREFIX.fullmatch(token):
            raise _Cut
        raise ValueError(f"bad number {token!r}")

    def obj(self) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {}
        if not self.ws():
            return out
        if self.text[self.pos] == "}":
            self.pos += 1
            return out
        while True:
            if self.text[self.pos] != '"':
                raise ValueError(f"expected a key at {self.pos}")
            try:
                key = self.string()
            except _Cut:
                return out
            if not self.ws():
                return out
            if self.text[self.pos] != ":":
                raise ValueError(f"expected ':' at {self.pos}")
            self.pos += 1
            try:
                out[key] = self.value()
            except _Cut:
                return out
            if not self.ws():
                return out
            c = self.text[self.pos]
            self.pos += 1
            if c == "}":
                return out
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at {self.pos - 1}")
            if not self.ws():
                return out

    def arr(self) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        if not self.ws():
            return out
        if self.text[self.pos] == "]":
            self.pos += 1
            return out
        while True:
            try:
                out.append(self.value())
            except _Cut:
                return out
            if not self.ws():
                return out
            c = self.text[self.pos]
            self.pos += 1
            if c == "]":
                return out
            if c != ",":
                raise ValueError(f"expected ',' or ']' at {self.pos - 1}")
            if not self.ws():
                return out


def parse_partial(text: str) -> Any:
    """The value ``text`` holds so far (see the module doc); ValueError if malformed."""
    parser = _Parser(text)
    try:
        value = parser.value()
    except _Cut:
        raise ValueError("the text ends inside a top-level scalar") from None
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
    if parser.ws():
        raise ValueError(f"text after the value at {parser.pos}")
    return value


def is_prefix(text: str) -> bool:
    """Whether ``text`` can be the beginning of an object's JSON (so it was cut, not broken)."""
    stripped = text.lstrip(_WS)
    if not stripped.startswith("{"):
        return False
    try:
        parse_partial(text)
    except ValueError:
        return False
    return True
