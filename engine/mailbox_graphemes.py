"""Count user-perceived characters the way Swift's ``String.count`` does.

The seed limits a message to 4,000 characters as Swift counts them: extended
grapheme clusters (UAX #29), so a family emoji, a flag or "e" plus a combining
accent is one character. Python's :mod:`unicodedata` has no Grapheme_Cluster_Break
property, so this module derives it from the general category plus the few code
point ranges UAX #29 names (Hangul syllable types, regional indicators, emoji
modifiers and tags, Extended_Pictographic blocks, the Indic conjunct consonants
and linkers of GB9c). It applies rules GB3-GB13 and GB999.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final

OTHER, CR, LF, CONTROL, EXTEND, ZWJ, RI, PREPEND, SPACING, L, V, T, LV, LVT, PICT = range(15)

# Prepended concatenation marks and the other Prepend code points of UAX #29.
_PREPEND: Final = frozenset(
    [*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x0D4E, 0x110BD,
     0x110CD, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, *range(0x11A84, 0x11A8A),
     0x11D46]
)
# Extended_Pictographic outside the U+1F000 planes' emoji blocks (the common ones).
_PICT_SINGLES: Final = frozenset(
    [0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, *range(0x2194, 0x219A), 0x21A9,
     0x21AA, 0x231A, 0x231B, 0x2328, 0x2388, 0x23CF, *range(0x23E9, 0x23F4),
     *range(0x23F8, 0x23FB), 0x24C2, 0x25AA, 0x25AB, 0x25B6, 0x25C0, *range(0x25FB, 0x25FF),
     0x2934, 0x2935, *range(0x2B05, 0x2B08), 0x2B1B, 0x2B1C, 0x2B50, 0x2B55, 0x3030, 0x303D,
     0x3297, 0x3299]
)
# Spacing marks UAX #29 classes as Extend (they merely look like spacing marks).
_EXTEND_MC: Final = frozenset(
    [0x09BE, 0x09D7, 0x0B3E, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6, 0x0D3E, 0x0D57,
     0x0DCF, 0x0DDF, 0x1B35, 0x302E, 0x302F, 0x1133E, 0x11357, 0x114B0, 0x114BD, 0x115AF,
     0x11930, 0x1D165, *range(0x1D16E, 0x1D173)]
)


# GB9c (Unicode 15.1): InCB=Linker viramas and InCB=Consonant letters of six scripts.
_LINKERS: Final = frozenset([0x094D, 0x09CD, 0x0ACD, 0x0B4D, 0x0C4D, 0x0D4D])
_CONSONANTS: Final = frozenset(
    [*range(0x0915, 0x093A), *range(0x0958, 0x0960), *range(0x0978, 0x0980),
     *range(0x0995, 0x09A9), *range(0x09AA, 0x09B1), 0x09B2, *range(0x09B6, 0x09BA), 0x09DC,
     0x09DD, 0x09DF, 0x09F0, 0x09F1, *range(0x0A95, 0x0AA9), *range(0x0AAA, 0x0AB1), 0x0AB2,
     0x0AB3, *range(0x0AB5, 0x0ABA), 0x0AF9, *range(0x0B15, 0x0B29), *range(0x0B2A, 0x0B31),
     0x0B32, 0x0B33, *range(0x0B35, 0x0B3A), 0x0B5C, 0x0B5D, 0x0B5F, 0x0B71,
     *range(0x0C15, 0x0C29), *range(0x0C2A, 0x0C3A), *range(0x0C58, 0x0C5B),
     *range(0x0D15, 0x0D3B)]
)


@lru_cache(maxsize=4096)
def _break_class(cp: int) -> int:
    """The Grapheme_Cluster_Break value of one code point (approximated, see above)."""
    if cp == 0x0D:
        return CR
    if cp == 0x0A:
        return LF
    if cp == 0x200D:
        return ZWJ
    if 0x1F1E6 <= cp <= 0x1F1FF:
        return RI
    if 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F or cp in (0x200C, 0xFF9E, 0xFF9F):
        return EXTEND  # emoji modifiers, tag characters, ZWNJ, halfwidth voicing marks
    if 0xAC00 <= cp <= 0xD7A3:
        return LV if (cp - 0xAC00) % 28 == 0 else LVT
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return L
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return V
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return T
    if cp in _PREPEND:
        return PREPEND
    if (0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or cp in _PICT_SINGLES
            or 0x1FC00 <= cp <= 0x1FFFD):
        return PICT
    category = unicodedata.category(chr(cp))
    if category in ("Mn", "Me") or cp in _EXTEND_MC:
        return EXTEND
    if category == "Mc":
        return SPACING
    if category in ("Cc", "Zl", "Zp", "Cs") or (category == "Cf" and cp != 0x200D):
        return CONTROL
    if cp in (0x0E33, 0x0EB3):  # Thai and Lao SARA AM are SpacingMark
        return SPACING
    return OTHER


def _joins(prev: int, cur: int, pict_zwj: bool, ri_odd: bool) -> bool:
    """True when there is no boundary between two code points (GB3..GB13)."""
    if prev == CR and cur == LF:
        return True  # GB3
    if prev in (CONTROL, CR, LF) or cur in (CONTROL, CR, LF):
        return False  # GB4, GB5
    if prev == L and cur in (L, V, LV, LVT):
        return True  # GB6
    if prev in (LV, V) and cur in (V, T):
        return True  # GB7
    if prev in (LVT, T) and cur == T:
        return True  # GB8
    if cur in (EXTEND, ZWJ, SPACING) or prev == PREPEND:
        return True  # GB9, GB9a, GB9b
    if prev == ZWJ and cur == PICT and pict_zwj:
        return True  # GB11
    return prev == RI and cur == RI and ri_odd  # GB12, GB13


def grapheme_count(text: str) -> int:
    """The number of extended grapheme clusters in ``text`` (Swift's ``String.count``)."""
    if text.isascii():  # no ASCII pair joins but CR LF
        return len(text) - text.count("\r\n")
    count = 0
    prev = -1
    pict_seen = False  # inside ExtPict Extend* (GB11's left context)
    pict_zwj = False  # ... and the previous code point is that sequence's ZWJ
    ri_run = 0  # regional indicators in a row just before the current one
    conjunct = 0  # GB9c: 1 after a consonant (and extends), 2 once a linker followed
    for ch in text:
        cp = ord(ch)
        cur = _break_class(cp)
        consonant = cp in _CONSONANTS
        if prev >= 0 and not _joins(prev, cur, pict_zwj, ri_run % 2 == 1) and not (
                consonant and conjunct == 2):
            count += 1
        elif prev < 0:
            count = 1
        if consonant:
            conjunct = 1
        elif conjunct and cp in _LINKERS:
            conjunct = 2
        elif conjunct and cur not in (EXTEND, ZWJ):
            conjunct = 0
        # The left contexts of GB11 and GB12/13 for the next code point.
        if cur == PICT:
            pict_seen, pict_zwj = True, False
        elif cur == EXTEND and pict_seen:
            pict_zwj = False
        elif cur == ZWJ and pict_seen:
            pict_zwj, pict_seen = True, False
        else:
            pict_seen = pict_zwj = False
        ri_run = ri_run + 1 if cur == RI else 0
        prev = cur
    return count
