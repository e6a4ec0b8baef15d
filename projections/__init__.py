"""convlog's read side: pure folds of the event log into views, and time travel.

Projections never read the clock, the disk or randomness: times and ids come
from events, so the same log always folds to the same state.

The names below load on first use (PEP 562), as :mod:`engine`'s do: importing one
read command (``convlog show``) must not import every projection.
"""

from __future__ import annotations

from engine.lazy import lazy_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from projections.timetravel import Diff, Snapshotter, Timeline, at, at_time, diff
    from projections.withparts import WithPartsProjection

_HOMES = {
    "projections.timetravel": ("Diff", "Snapshotter", "Timeline", "at", "at_time", "diff"),
    "projections.withparts": ("WithPartsProjection",),
}

__all__ = ["Diff", "Snapshotter", "Timeline", "WithPartsProjection", "at", "at_time", "diff"]


__getattr__ = lazy_names(__name__, globals(), _HOMES)
