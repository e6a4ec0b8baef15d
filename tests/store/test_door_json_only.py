"""The door's walk of free-form values (``json_only``) stands in for ``first_problem``
only where that walk would find nothing: it may defer (say False) for anything, and
must never clear a value that ``first_problem`` refuses. The byte search it replaced
sent nearly every imported event to the full walk (a time's byte, a length's byte or
UTF-8 text matched its candidates), a third of a tool-heavy import's CPU."""

from __future__ import annotations

import datetime
from collections import OrderedDict
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.store import door
from engine.store.door import MAX_DEPTH, admit, first_problem, json_only

_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(), st.text(max_size=6),
    st.binary(max_size=3), st.just(datetime.date(2026, 1, 2)), st.just(1 + 2j),
    st.just(ev.Tokens(input=1)), st.just(ev.Tokens(input=1 << 64)), st.just(("a", 1)))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)), inner, max_size=3),
    st.dictionaries(st.text(max_size=4), inner, max_size=2).map(OrderedDict)),
    max_leaves=14)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


def _event(metadata: Any) -> ev.TextAdded:
    return ev.TextAdded(id="e", session_id="s", seq=1, time=1, message_id="m", part_id="p",
                        text="t", metadata={"k": metadata})


@settings(max_examples=300, deadline=None)
@given(value=_VALUE)
def test_the_walk_clears_only_what_first_problem_finds_nothing_in(value: Any) -> None:
    if json_only([{"k": value}]):
        assert first_problem(_event(value)) is None


@pytest.mark.parametrize("depth", [MAX_DEPTH - 3, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH + 5])
def test_the_depth_limit_is_first_problem_s(depth: int) -> None:
    event = _event(_deep(depth))
    assert json_only([event.metadata]) == (first_problem(event) is None)


def test_a_time_whose_bytes_look_like_a_bin_header_takes_no_full_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 1785571200232 ms encodes as cf 00 00 01 9f bc c4 2c e8: 0xc4 is a bin8 header,
    # which the byte search took for a candidate on every event of that millisecond.
    event = msgspec.structs.replace(_event({"tool": "Read", "lines": [1, 2, 3]}),
                                    time=0x19FBCC42CE8)
    assert b"\xc4" in admit(event)
    calls: list[object] = []
    monkeypatch.setattr(door, "first_problem", calls.append)
    admit(event)
    assert calls == []


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)),
                             st.one_of(st.text(max_size=4), _VALUE), max_size=4),
       depth=st.integers(1, MAX_DEPTH + 2))
def test_json_object_is_strings_only_or_the_walk(value: dict[Any, Any], depth: int) -> None:
    # The short proofs' one call for a JSON object field: the verdict of the two it joins.
    assert door.json_object(value, depth) == (door.strings_only(value)
                                              or json_only([value], depth))
