"""convlog's read side: pure folds of the event log into views, and time travel.

Projections never read the clock, the disk or randomness: times and ids come
from events, so the same log always folds to the same state.
"""

from projections.timetravel import Diff, Snapshotter, Timeline, at, at_time, diff
from projections.withparts import WithPartsProjection

__all__ = ["Diff", "Snapshotter", "Timeline", "WithPartsProjection", "at", "at_time", "diff"]
