"""Helpers for the importer tests: fixture paths, and a plan written to a fresh store."""

from __future__ import annotations

from pathlib import Path

from engine.importers.base import Plan
from engine.importers.write import write_plan
from engine.store import MemoryStore
from engine.store.verify import verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"


def written(plan: Plan) -> MemoryStore:
    """``plan`` appended to a fresh memory store, which must verify."""
    store = MemoryStore()
    write_plan(store, plan)
    report = verify(store)
    assert report.ok, report.problems
    return store
