"""The recorder finds the call a request continues through an index of its group's
calls by conversation (engine.proxy.recorder.Group). It must pick exactly the call
that comparing the request with every call of every branch picks: the longest
conversation the request extends; among calls as long, the first (in branch, then
call order) that is its branch's latest, else the first."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy.conversation import extends
from engine.proxy.recorder import Branch, CallRecord, Group

Conversation = tuple[int, ...]
conversations = st.lists(st.integers(0, 2), max_size=4).map(tuple)
# ("call", branch pick, conversation) | ("fork", branch pick, calls kept)
steps = st.lists(st.one_of(
    st.tuples(st.just("call"), st.integers(0, 99), conversations),
    st.tuples(st.just("fork"), st.integers(0, 99), st.integers(0, 5)),
), max_size=25)


def _call(entries: Conversation) -> CallRecord:
    return CallRecord("m", None, len(entries), entries, 0, 0)


def _scan(branches: list[Branch], new: Conversation) -> tuple[Branch, int] | None:
    """What the recorder did before the index: every call of every branch compared."""
    best: tuple[tuple[int, bool], Branch, int] | None = None
    for branch in branches:
        for i, call in enumerate(branch.calls):
            if call.entries and extends(call.entries, new):
                rank = (len(call.entries), i == len(branch.calls) - 1)
                if best is None or rank > best[0]:
                    best = (rank, branch, i)
    return None if best is None else (best[1], best[2])


@given(steps, st.lists(conversations, min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_the_index_picks_what_a_scan_of_every_call_picks(
        done: list[tuple[str, int, Any]], asked: list[Conversation]) -> None:
    group = Group()
    group.add_branch(Branch(None))  # type: ignore[arg-type]  # (no session needed)
    for kind, pick, arg in done:
        branch = group.branches[pick % len(group.branches)]
        if kind == "call":
            group.add_call(branch, _call(arg))
        else:  # a fork holds copies of the first calls of its origin, as _fork makes
            group.add_branch(Branch(None, [attrs.evolve(c)  # type: ignore[arg-type]
                                           for c in branch.calls[:arg]]))
    for new in asked:
        found = group.continued(new)
        expected = _scan(group.branches, new)
        if expected is None:
            assert found is None
        else:
            assert found is not None
            assert (found[0] is expected[0], found[1]) == (True, expected[1])
