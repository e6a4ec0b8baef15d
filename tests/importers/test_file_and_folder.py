"""The import of a file equals the import of the folder that holds it (issue 23): the
same sessions, the same events (ids included), whatever the format. A folder read
file by file, or as the tool's own directory, must not change what a file means."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.importers.detect import plan_path
from tests.importers.support import written
from tests.importers.test_fuzz_junk import ALL_FILES


def _stored(path: Path) -> list[tuple[str, list[Any]]]:
    plan = plan_path(path)
    store = written(plan)
    return sorted((s.id, list(store.read(s.id))) for s in store.sessions())


@pytest.mark.parametrize("source", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_a_file_alone_and_its_folder_import_the_same(tmp_path: Path, source: Path) -> None:
    if "subagents" in source.parts:
        pytest.skip("a subagent file is read with its session file")
    folder = tmp_path / "folder"
    folder.mkdir()
    copy = folder / source.name
    shutil.copy(source, copy)
    companions = source.parent / source.stem  # a Claude Code session's subagents/
    if companions.is_dir():
        shutil.copytree(companions, folder / source.stem)
    assert _stored(copy) == _stored(folder)
