"""The real agent CLIs for the proxy's closed loops: found as the real-clients rig finds
them (:mod:`tests.realclients.clients`)."""

from __future__ import annotations

from tests.realclients.clients import IN_CI, ROOT, find, require

__all__ = ["IN_CI", "ROOT", "find", "require"]
