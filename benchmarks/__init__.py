"""Benchmarks (not timed tests): ``python benchmarks/replay.py`` or ``make bench``."""
