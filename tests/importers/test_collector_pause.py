"""An import plans and writes with Python's cyclic collector paused (an import only
builds: a collection frees nothing of the plan and walks all of it), and leaves the
collector as it found it, on or off, also when the import is refused."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from engine.events import Event
from engine.importers.base import PROGRESS, ImportInputError
from engine.importers.codex import plan_codex
from engine.importers.write import write_plan
from engine.store import MemoryStore
from engine.store.base import Appended, Expected

LINES: list[dict[str, object]] = [
    {"timestamp": "2026-09-03T14:00:00.000Z", "type": "session_meta",
     "payload": {"id": "0199a0b1-1111-7222-8333-444455559999", "cwd": "/a"}},
    {"timestamp": "2026-09-03T14:00:01.000Z", "type": "response_item",
     "payload": {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "hi"}]}},
]


class _Watching(MemoryStore):
    """Records whether the collector ran while each batch was appended."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on: list[bool] = []

    def append(self, session_id: str, events: Iterable[Event],
               expected_version: Expected = 0) -> Appended:
        self.collector_on.append(gc.isenabled())
        return super().append(session_id, events, expected_version)


def _rollout(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("enabled", [True, False])
def test_an_import_runs_with_the_collector_paused_and_restores_it(
        tmp_path: Path, enabled: bool) -> None:
    seen: list[bool] = []
    token = PROGRESS.set(lambda _path, _done, _size: seen.append(gc.isenabled()))
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        plan = plan_codex(_rollout(tmp_path, LINES))
        assert gc.isenabled() is enabled
        store = _Watching()
        write_plan(store, plan)
        assert gc.isenabled() is enabled
    finally:
        PROGRESS.reset(token)
        (gc.enable if was else gc.disable)()
    assert seen
    assert not any(seen)  # planning: paused
    assert store.collector_on
    assert not any(store.collector_on)  # writing: paused


def test_a_refused_import_restores_the_collector(tmp_path: Path) -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with pytest.raises(ImportInputError):
            plan_codex(_rollout(tmp_path, [{"no": "rollout"}]))
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
