"""Kept for callers of the old path: the Q CLI importer lives in :mod:`engine.importers.qcli`."""

from engine.importers.qcli import (
    ImportResult,
    QCliFormatError,
    events_from_qcli,
    import_qcli,
)

__all__ = ["ImportResult", "QCliFormatError", "events_from_qcli", "import_qcli"]
