"""A window ``[start, end)`` over a list that is only ever appended to.

Checkpoints and the tangent keep the conversation's history and transcript by
reference: keeping a window is O(1), and a later append never shows through it.
Nothing here knows what the items are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Window(Generic[T]):
    """A window ``[start, end)`` over a list that is only ever appended to.

    ``fork()`` is O(1) and later appends never show through a fork: a window
    whose end is no longer the list's end copies its items out before it
    appends. Only ``replace`` (rare: a compacted tool output) copies eagerly.
    """

    __slots__ = ("base", "end", "shared", "start")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self.base: list[T] = list(items)
        self.start = 0
        self.end = len(self.base)
        self.shared = False

    def __len__(self) -> int:
        return self.end - self.start

    def fork(self) -> Window[T]:
        other: Window[T] = Window.__new__(Window)
        other.base, other.start, other.end = self.base, self.start, self.end
        self.shared = other.shared = True
        return other

    def _own(self) -> None:
        self.base = self.base[self.start:self.end]
        self.start, self.end, self.shared = 0, len(self.base), False

    def append(self, item: T) -> None:
        if self.end != len(self.base):
            self._own()  # another window grew the list past us
        self.base.append(item)
        self.end += 1

    def drop_front(self, n: int) -> None:
        self.start = min(self.start + max(n, 0), self.end)

    def replace(self, index: int, item: T) -> None:
        if self.shared:
            self._own()
        self.base[self.start + index] = item

    def __getitem__(self, index: int) -> T:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.base[self.start + index]

    def items(self) -> list[T]:
        return self.base[self.start:self.end]

    def tail(self, n: int) -> list[T]:
        return self.base[max(self.end - n, self.start):self.end] if n > 0 else []

    def __iter__(self) -> Iterator[T]:
        return iter(self.items())

    def share(self) -> tuple[list[T], int, int]:
        """The list and the range, for a read-only holder (later writes copy first)."""
        self.shared = True
        return self.base, self.start, self.end
