"""The one-line preview of a part (``convlog show``) looks only at a long text's start;
it must equal the preview of the whole text collapsed, for any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.text import _PREVIEW, _short


def _reference(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_TEXTS = st.lists(st.one_of(st.text(max_size=40), st.sampled_from([" ", "\n\t ", " " * 300])),
                  max_size=60).map("".join)


@settings(max_examples=300)
@given(text=_TEXTS, limit=st.integers(1, 100))
def test_the_preview_of_a_prefix_is_the_preview_of_the_whole(text: str, limit: int) -> None:
    assert _short(text, limit) == _reference(text, limit)


def test_a_long_output_mostly_blank_at_its_start() -> None:
    text = " " * 10_000 + "word " * 50
    assert _short(text) == _reference(text, _PREVIEW)
