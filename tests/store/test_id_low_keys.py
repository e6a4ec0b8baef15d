"""``blocks.low_keys`` answers for a whole run exactly what ``id_key`` says id by id.

SQLite's deep verify checks the id index's runs with it: for every list of ids it
must give the low 64 bits (signed) of each id's 16-byte key when every id has one
(a canonical lowercase UUID), and None as soon as one has not: never a list for
ids that ``id_key`` would not all turn into 16 bytes.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store import blocks

_canonical = st.uuids().map(str)
_near = st.one_of(
    _canonical.map(str.upper),
    _canonical.map(lambda u: u[:35] + "g"),
    _canonical.map(lambda u: u[:34] + " a"),
    _canonical.map(lambda u: u[:8] + "0" + u[9:]),  # a dash replaced
    _canonical.map(lambda u: u.replace("-", "")[:32] + "0000"),  # 36 chars, no dashes
    _canonical.map(lambda u: u[:9] + "\u0660" + u[10:]),  # a non-ASCII digit
    st.text(min_size=36, max_size=36),
    st.none(),
)


def _expected(ids: list[str | None]) -> list[int] | None:
    out = []
    for i in ids:
        if i is None:
            return None
        key = blocks.id_key(i)
        if len(key) != 16:
            return None
        out.append(int.from_bytes(key[8:], "big", signed=True))
    return out or None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_canonical, _canonical, _near), max_size=8))
def test_low_keys_is_id_key_for_every_id(ids: list[str | None]) -> None:
    assert blocks.low_keys(ids) == _expected(ids)


def test_a_run_of_generated_ids() -> None:
    ids: list[str | None] = [str(uuid.UUID(int=(7 << 76) | (1 << 63) | k)) for k in range(5)]
    assert blocks.low_keys(ids) == [-(1 << 63) + k for k in range(5)]
