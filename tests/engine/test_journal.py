"""The lifecycle's journal: a rolled-back batch leaves every dict as it was, order included."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.decider import Journal

# An operation: ("put", None) adds a new key ranked after every earlier one,
# ("pop", i) pops the i-th present key (modulo), ranked or by copy.
_OPS = st.lists(st.tuples(st.sampled_from(["put", "pop_ranked", "pop"]),
                          st.integers(0, 50)), max_size=60)


@given(before=_OPS, during=_OPS)
def test_rollback_restores_items_and_order(before: list[tuple[str, int]],
                                           during: list[tuple[str, int]]) -> None:
    j = Journal()
    d: dict[str, int] = {}
    counter = 0

    def run(ops: list[tuple[str, int]]) -> None:
        nonlocal counter
        for op, i in ops:
            if op == "put" or not d:
                counter += 1
                j.put(d, f"k{counter}", counter)
            else:
                key = list(d)[i % len(d)]
                if op == "pop_ranked":
                    j.pop_ranked(d, key)
                else:
                    j.pop(d, key)

    run(before)  # outside a batch: nothing journaled
    saved = list(d.items())
    j.begin()
    run(during)
    j.rollback()
    assert list(d.items()) == saved
    assert j.undo is None


def test_pop_ranked_outside_a_batch_journals_nothing() -> None:
    j = Journal()
    d = {"a": 1, "b": 2}
    j.pop_ranked(d, "a")
    j.pop_ranked(d, "missing")
    assert d == {"b": 2}
    assert j.undo is None
