"""Codex lines decoded once into Structs read exactly what the dict reading read.

The main pass decodes a ``{timestamp, type, payload}`` line straight into ``_Line`` /
``_Payload``; a line of another shape (legacy, a lone surrogate mended into a dict)
is converted from its dict. Both must give the same payload for any JSON, and
JSON texts inside strings (a call's arguments) must parse as ``json.loads`` did.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers import codex
from engine.importers.base import loads

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12)
# The payload fields the reader uses, and others it ignores.
_KEYS = st.one_of(st.sampled_from(codex._Payload.__struct_fields__), st.text(max_size=6))


@settings(max_examples=300, deadline=None)
@given(payload=st.dictionaries(_KEYS, JSON, max_size=8), kind=st.sampled_from(
    ["response_item", "event_msg", "compacted", "inter_agent_communication", "other"]),
       stamp=JSON)
def test_a_line_decoded_into_structs_equals_its_dict_converted(
        payload: dict[str, Any], kind: str, stamp: Any) -> None:
    raw = json.dumps({"timestamp": stamp, "type": kind, "payload": payload}).encode()
    line = codex._decode_line(raw)
    assert isinstance(line, codex._Line)
    assert line.payload == msgspec.convert(payload, codex._Payload)
    assert (line.timestamp, line.type) == (stamp, kind)
    # Presence is kept where only presence is read (UNSET when absent).
    for name in ("id", "status", "phase", "author"):
        assert (getattr(line.payload, name) is msgspec.UNSET) == (name not in payload)


@settings(max_examples=200, deadline=None)
@given(payload=st.one_of(JSON.filter(lambda v: not isinstance(v, dict)), st.just(None)),
       kind=st.sampled_from(["response_item", "session_meta", "turn_context"]))
def test_other_shapes_read_as_dicts(payload: Any, kind: str) -> None:
    """A payload that is not an object, a kind kept whole, and a line without the
    envelope come back as the dict the reader always read."""
    for record in ({"timestamp": "t", "type": kind, "payload": payload},
                   {"timestamp": "t", "type": "message", "role": "user"},
                   {"record_type": "state"}):
        raw = json.dumps(record).encode()
        got = codex._decode_line(raw)
        if isinstance(got, codex._Line):
            assert kind not in ("session_meta", "turn_context")
            assert isinstance(got.payload, codex._Payload)
        else:
            assert got == record


_TEXTS = st.one_of(
    JSON.map(json.dumps),
    JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.floats().map(lambda f: json.dumps({"x": f})),  # NaN, Infinity
    st.sampled_from(['{"a": "\\ud800"}', '{"a": 1e400}', "[" * 3000, '{"a":1,"a":2}',
                     ' {"a": -0.0} ', "\ufeff{}", '{"a": 1', "", "nul", '"\\u0000"']),
    st.text(max_size=12))


def _verdict(read: Any, text: str) -> str:
    try:
        return repr(read(text))  # repr: int vs float, -0.0, nan all told apart
    except ValueError as exc:
        return f"ValueError {type(exc).__name__}"


@settings(max_examples=500, deadline=None)
@given(text=_TEXTS)
def test_a_json_text_parses_as_json_loads_parsed_it(text: str) -> None:
    assert _verdict(codex.json_text, text) == _verdict(loads, text)
