"""The ``convlog`` console script's start: no cyclic garbage collection while the
command loads.

Loading a command imports a few hundred modules; every object that creates lives as
long as the process, yet the collector walked them again and again while they were
made (and every later collection of the oldest generation walks them once more).
:mod:`engine.launch` holds the collector at its first line; once the command is
loaded, :func:`release_collector` moves everything alive into the permanent
generation (``gc.freeze``: never walked again) and turns the collector back on, so
the command itself runs with collection as usual. Measured on ``show --at`` of a
1M-event session: about 6% of the whole process's instructions (docs/performance.md).

A program that calls :func:`engine.cli.main` itself (the tests do) never held the
collector, and releasing is then nothing: only the console script's process freezes.
This module imports only :mod:`gc`: it runs before the engine's imports.
"""

from __future__ import annotations

import gc

_held: set[str] = set()  # {"held"} while held (a set: no global statement)


def hold_collector() -> None:
    """Turn the collector off until :func:`release_collector` (if it was on)."""
    if gc.isenabled():
        gc.disable()
        _held.add("held")


def release_collector() -> None:
    """After :func:`hold_collector`: freeze what is alive and turn the collector on."""
    if _held:
        _held.clear()
        gc.freeze()
        gc.enable()


__all__ = ["hold_collector", "release_collector"]
