"""``ingest.loads`` (msgspec's decoder, ``json.loads`` where msgspec refuses) reads
every text as ``json.loads`` does: the same value, of the same types, in the same key
order, or an error where ``json.loads`` raises one. Texts: dumps of random JSON values
(big ints, odd floats, astral and escaped characters, duplicate keys), the
non-standard literals ``json.loads`` alone accepts, and random edits of them."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.adapters.ingest import loads

_SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text())
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                       max_leaves=12)
_EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["", " ", "0", "-", ".", "e", "\\", '"', ",", "}", "]", "\\ud800", "\ud800", "NaN",
     "\t", "\x00", "\\u00e9", "1e999", "{", "[", "\\x"])), max_size=3)


def _exact(value: Any) -> Any:
    """A comparable form that tells 1 from 1.0 and True, -0.0 from 0.0, keeps key order
    and NaN."""
    if isinstance(value, dict):
        return ("dict", [(k, _exact(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_exact(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    return (type(value).__name__, value)


def _outcome(fn: Any, text: str) -> Any:
    try:
        return _exact(fn(text))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


@settings(max_examples=500, deadline=None)
@given(_VALUES, st.booleans(), _EDITS)
@example({"a": 1, "b": 2}, True, [(7, ', "a": 3')])  # a duplicate key: last value, first place
@example({"n": 1}, True, [(6, "00")])
@example([1.5], False, [(1, "1e400, NaN, -Infinity, ")])
def test_loads_reads_what_json_loads_reads(value: Any, ascii: bool,
                                           edits: list[tuple[int, str]]) -> None:
    text = json.dumps(value, ensure_ascii=ascii)
    for where, piece in edits:
        at = where % (len(text) + 1)
        text = text[:at] + piece + text[at:]
    assert _outcome(loads, text) == _outcome(json.loads, text)
