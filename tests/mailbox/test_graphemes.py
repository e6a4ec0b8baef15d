"""The 4,000-character limit counts as Swift's String.count: grapheme clusters."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.mailbox_graphemes import grapheme_count

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"


@pytest.mark.parametrize(("text", "count"), [
    ("", 0),
    ("hello", 5),
    ("a\r\nb", 3),  # CR LF is one character
    ("a\n\rb", 4),
    (FAMILY, 1),  # a ZWJ sequence of four people
    ("\U0001f44d\U0001f3fd", 1),  # thumbs up with a skin tone modifier
    ("\u2764\ufe0f", 1),  # heart with an emoji variation selector
    ("\U0001f1ef\U0001f1f5", 1),  # the Japanese flag: two regional indicators
    ("\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8", 2),
    ("\U0001f1ef\U0001f1f5\U0001f1fa", 2),  # a lone regional indicator stands alone
    ("\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", 1),  # Scotland
    ("e\u0301", 1),  # e + combining acute
    ("e\u0301\u0302\u0323", 1),
    ("\ud55c\uad6d\uc5b4", 3),  # precomposed Hangul syllables
    ("\u1100\u1161\u11a8", 1),  # conjoining jamo L V T form one syllable
    ("\u1100\u1100\u1161", 1),  # L L V
    ("\u0928\u092e\u0938\u094d\u0924\u0947", 3),  # Devanagari with a conjunct (GB9c)
    ("\u0915\u094d\u0937\u093f", 1),
    ("\u0e01\u0e33", 1),  # Thai SARA AM is a spacing mark
    ("\U0001f468\u200d", 1),  # a trailing ZWJ extends
    ("a\u200d\U0001f469", 2),  # ZWJ joins pictographs only
    ("\u0600\u0661", 1),  # a prepended concatenation mark
    ("タスクXについて質問があります", 15),
])
def test_grapheme_count(text: str, count: int) -> None:
    assert grapheme_count(text) == count


def test_a_family_emoji_counts_once_at_the_limit() -> None:
    assert grapheme_count(FAMILY * 4000) == 4000
    assert grapheme_count(FAMILY * 4000 + "x") == 4001


@given(st.text())
def test_never_more_than_code_points_and_at_least_one(text: str) -> None:
    n = grapheme_count(text)
    assert (n == 0) == (text == "")
    assert n <= len(text)


@given(st.text(), st.text())
def test_concatenation_adds_at_most_the_parts(a: str, b: str) -> None:
    """A boundary can disappear where two texts meet, never appear out of nothing."""
    assert grapheme_count(a + b) <= grapheme_count(a) + grapheme_count(b)


@given(st.lists(st.characters(categories=["Lu", "Ll", "Lo", "Nd"]), max_size=30),
       st.lists(st.characters(categories=["Mn"]), max_size=3))
def test_combining_marks_never_add_characters(base: list[str], marks: list[str]) -> None:
    text = "".join(base)
    with_marks = "".join(c + "".join(marks) for c in base)
    plain = grapheme_count(text)
    # A mark after a Devanagari virama may start a conjunct: only fewer, never more.
    assert grapheme_count(with_marks) <= plain
    if not any(unicodedata.name(c, "").startswith(("DEVANAGARI", "BENGALI", "GUJARATI",
                                                   "ORIYA", "TELUGU", "MALAYALAM", "HANGUL"))
               for c in base + marks):
        assert grapheme_count(with_marks) == plain
