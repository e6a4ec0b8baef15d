"""What a long-running reader (the viewer's server) keeps between ``at(seq)`` calls.

Each state from stored snapshots decodes the snapshot's index records (a full index
lists every message: about 2,400 of them at the middle of a 1M-event session) and
the chunks of the messages it shows. A scrub asks for a new seq every few tens of
milliseconds, mostly near the last one, so the same index and the same message
chunks were decoded again and again.

Both are caches of immutable things, keyed by what they were decoded from:

- an index chain by (owner session, index seq), and kept only while the stored
  record's bytes are the very bytes it was decoded from (a later writer may put a
  new record at the same seq: it is decoded again);
- a message view by (owner, message id, chunk version, chunk digest, rename): a
  chunk at a version is written once per message version, and the digest (blake2b of
  the stored bytes, checked before a chunk is decoded) names its content. Version 1
  indexes carry no digest; their chunks are not kept.

Views are frozen attrs objects that a fold never changes (a changed message gets a
new view), so one view can serve many states, as a ``Timeline``'s frozen states
share theirs. Both maps are bounded LRUs; a hit equals a decode by construction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from projections import views as v

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()  # the server answers from a thread pool

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


# An index record decoded (a ``timetravel._Index``), with its messages in order once its
# delta's bases are applied, each as the tuple ``WithPartsProjection.from_refs`` takes.
Refs = tuple[Any, dict[str, tuple[Any, ...]]]

# Index records kept: the full bases that most deltas share, and the deltas a scrub
# lands near again (a drag, the arrow keys, the list fetching more of one state).
INDEXES = 32
# Message views kept: a screenful of messages at a few dozen seqs. A view's size is its
# message's (a long tool output included), so this bounds the count, not the bytes.
VIEWS = 512


class RestoreCache:
    """Decoded snapshot indexes and message views, shared by the ``at(seq)`` calls of
    one reader; pass it to :func:`projections.timetravel.at` (``cache=``)."""

    def __init__(self, *, indexes: int = INDEXES, views: int = VIEWS) -> None:
        self._indexes: _Lru[tuple[str, str, int], tuple[bytes, Refs]] = _Lru(indexes)
        self._replays: _Lru[tuple[str, int], Any] = _Lru(2)  # whole states: two at most
        self._views: _Lru[tuple[str, str, int, bytes, str | None], v.WithParts] = _Lru(views)

    def refs(self, session_id: str, owner: str, seq: int, record: bytes) -> Refs | None:
        """The index record of ``owner`` at ``seq`` as read for ``session_id`` (a fork
        reads its parent's), if decoded from these very bytes. Its dict is shared:
        copy it before a projection takes it."""
        found = self._indexes.get((session_id, owner, seq))
        return found[1] if found is not None and found[0] == record else None

    def keep_refs(self, session_id: str, owner: str, seq: int, record: bytes,
                  refs: Refs) -> None:
        self._indexes.put((session_id, owner, seq), (record, refs))

    def replayed(self, session_id: str, seq: int) -> Any:
        """A state a stale chunk was replayed for, if it is ``seq``'s (the last two: a
        delta's and its base's)."""
        return self._replays.get((session_id, seq))

    def keep_replayed(self, session_id: str, seq: int, state: Any) -> None:
        self._replays.put((session_id, seq), state)

    def view(self, key: tuple[str, str, int, bytes, str | None]) -> v.WithParts | None:
        return self._views.get(key) if key[3] else None

    def keep_view(self, key: tuple[str, str, int, bytes, str | None], view: Any) -> None:
        if key[3]:  # only a chunk named by its digest
            self._views.put(key, view)

    def sizes(self) -> tuple[int, int]:
        """(indexes, views) held: for tests and benchmarks."""
        return len(self._indexes), len(self._views)


__all__ = ["RestoreCache"]
