"""``Window``: forks are O(1) and no later write ever shows through another window."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.qcli.window import Window

OPS = st.lists(st.tuples(st.sampled_from(["append", "fork", "drop", "replace"]),
                         st.integers(0, 5), st.integers(0, 99)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(start=st.lists(st.integers(0, 99), max_size=5), ops=OPS)
def test_windows_behave_like_independent_lists(start: list[int], ops: list[tuple[str, int, int]]
                                               ) -> None:
    windows = [Window(start)]
    models = [list(start)]
    for op, which, value in ops:
        i = which % len(windows)
        w, model = windows[i], models[i]
        if op == "append":
            w.append(value)
            model.append(value)
        elif op == "fork":
            windows.append(w.fork())
            models.append(list(model))
        elif op == "drop":
            w.drop_front(value % 3)
            del model[:value % 3]
        elif model:
            w.replace(value % len(model), -value)
            model[value % len(model)] = -value
        for each, expected in zip(windows, models, strict=True):
            assert each.items() == expected
            assert len(each) == len(expected)
            assert list(each) == expected
            assert each.tail(2) == expected[-2:]
    base, lo, hi = windows[0].share()
    assert base[lo:hi] == models[0]
