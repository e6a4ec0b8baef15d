"""Identifiers: UUIDv7 for sessions, messages and events; short sortable ids for parts.

UUIDv7 (RFC 9562) puts the millisecond time in the top 48 bits, so ids sort by
creation time and satisfy BR-04 (session and message ids are valid UUIDs).
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
import uuid

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_LOW48 = (1 << 48) - 1
_HEX3 = [f"{n:03x}" for n in range(0x1000)]  # the counter field, formatted once
# Every 10-bit value as its two Crockford digits: a part id is 13 lookups.
_PAIRS = [_CROCKFORD[n >> 5] + _CROCKFORD[n & 31] for n in range(1024)]


# The random bits of ids: unique, not secret. A generator seeded from the OS once
# (and again in a forked child, which would otherwise repeat its parent's bits) costs
# a tenth of an os.urandom call, once per part id.
_RNG = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _RNG.seed(os.urandom(32)))
_bits = _RNG.getrandbits


class _Monotonic:
    """Keeps ids strictly increasing within one process, even inside one ms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def next(self, now_ms: int) -> tuple[int, int]:
        with self._lock:
            if now_ms <= self._last_ms:
                now_ms = self._last_ms
                self._counter += 1
            else:
                self._last_ms = now_ms
                self._counter = _bits(10)
            return now_ms, self._counter


_MONO = _Monotonic()


def uuid7(now_ms: int | None = None) -> str:
    """A new UUIDv7 string: 48-bit ms time, 12-bit counter, 62 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    ms, counter = _MONO.next(ms)
    rand = _bits(62)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= (counter & 0xFFF) << 64
    value |= 0b10 << 62  # RFC 4122 variant
    value |= rand
    return str(uuid.UUID(int=value))


def part_id(now_ms: int | None = None) -> str:
    """A 26-character, time-sortable part id in Crockford base32 (prefix ``prt_``)."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    ms, counter = _MONO.next(ms)
    value = (ms << 80) | (counter << 64) | _bits(64)
    return "prt_" + _base32_26(value)


def _base32_26(value: int) -> str:
    """The low 130 bits of ``value`` as 26 Crockford digits, most significant first.

    The top ten digits (the millisecond time, for a part id) are formatted once per
    distinct value and kept: consecutive ids share them, so an id costs 8 lookups."""
    top = value >> 80 & _TOP50
    head = _HEAD[0]
    if head[0] != top:
        p = _PAIRS
        head = _HEAD[0] = (top, p[top >> 40 & 1023] + p[top >> 30 & 1023] + p[top >> 20 & 1023]
                        + p[top >> 10 & 1023] + p[top & 1023])
    p = _PAIRS
    return (head[1] + p[value >> 70 & 1023] + p[value >> 60 & 1023] + p[value >> 50 & 1023]
            + p[value >> 40 & 1023] + p[value >> 30 & 1023] + p[value >> 20 & 1023]
            + p[value >> 10 & 1023] + p[value & 1023])


_TOP50 = (1 << 50) - 1
# (top 50 bits, their ten digits) of the last value _base32_26 formatted: one tuple,
# replaced whole, so a reader on another thread sees a matching pair.
_HEAD: list[tuple[int, str]] = [(-1, "")]


def is_uuid(value: str) -> bool:
    """True for a canonical lowercase or uppercase hyphenated UUID string."""
    return _UUID_RE.match(value.lower()) is not None


class EventIds:
    """Fast UUIDv7 strings for events: one random 62-bit base per generator, then counting.

    Monotonic within a generator (sortable even inside one millisecond); distinct
    generators collide only if their random bases do.
    """

    __slots__ = ("_hi", "_last_ms", "_lo", "_middle", "_prefix", "_seq", "_upper")

    def __init__(self) -> None:
        rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        self._hi = rand >> 48  # the random bits' top 14, beside the variant bits
        self._lo = rand & _LOW48  # the 48 bits that count
        self._middle = f"-{self._hi | 0x8000:04x}-"
        self._upper = f"{self._lo >> 12:09x}"  # the counting bits but the last 12
        self._last_ms = -1
        self._seq = 0
        self._prefix = ""  # "tttttttt-tttt-7" for _last_ms: formatted once per millisecond

    def __call__(self, now_ms: int) -> str:
        if now_ms > self._last_ms:
            self._set_ms(now_ms)
        else:
            self._seq += 1
            if self._seq > 0xFFF:  # 4096 ids in one ms: borrow the next millisecond
                self._set_ms(self._last_ms + 1)
        lo = self._lo = (self._lo + 1) & _LOW48
        low = lo & 0xFFF
        if not low:  # a carry past the last 12 bits: format the rest again (1 in 4096)
            self._upper = f"{lo >> 12:09x}"
            if not lo:  # the low bits wrapped: carry into the top ones
                self._hi = (self._hi + 1) & 0x3FFF
                self._middle = f"-{self._hi | 0x8000:04x}-"
        return self._prefix + _HEX3[self._seq] + self._middle + self._upper + _HEX3[low]

    def many(self, now_ms: int, n: int) -> list[str]:
        """``n`` ids, as ``n`` calls would give them (a batch's events): runs of ids
        that share the prefix, middle and upper bits are one comprehension each."""
        if n < 8:
            return [self(now_ms) for _ in range(n)]
        out: list[str] = []
        hex3 = _HEX3
        if now_ms > self._last_ms:
            self._set_ms(now_ms)
            self._seq -= 1  # the first id of the loop below takes sequence 0
        while n:
            seq = self._seq + 1
            if seq > 0xFFF:  # 4096 ids in one ms: borrow the next millisecond
                self._set_ms(self._last_ms + 1)
                seq = 0
            lo = (self._lo + 1) & _LOW48
            low = lo & 0xFFF
            if not low:  # a carry past the last 12 bits: format the rest again
                self._upper = f"{lo >> 12:09x}"
                if not lo:
                    self._hi = (self._hi + 1) & 0x3FFF
                    self._middle = f"-{self._hi | 0x8000:04x}-"
            # The run until the sequence or the low 12 bits would wrap.
            k = min(n, 0x1000 - seq, 0x1000 - low)
            prefix, mid = self._prefix, self._middle + self._upper
            out += [f"{prefix}{s}{mid}{c}" for s, c in zip(hex3[seq:seq + k],
                                                          hex3[low:low + k], strict=True)]
            self._seq = seq + k - 1
            self._lo = lo + k - 1  # no carry: low + k - 1 <= 0xFFF
            n -= k
        return out

    def _set_ms(self, ms: int) -> None:
        self._last_ms = ms
        self._seq = 0
        t = ms & _LOW48
        self._prefix = f"{t >> 16:08x}-{t & 0xFFFF:04x}-7"
