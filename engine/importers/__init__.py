"""Importers: sessions other agents recorded, turned into convlog logs (write side).

One module per format; :mod:`engine.importers.base` holds what they share (the
report, the typed input error, stable ids, bounded line reading) and
:mod:`engine.importers.write` appends a plan atomically and idempotently.
"""
