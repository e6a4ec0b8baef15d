"""The format line: a store of today's layout is written, read, sealed and verified
without importing any reader of an older layout (``engine.store.legacy``); a store
an earlier release wrote is read through that room."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

_SCRIPT = """
import json
import sys
from engine import events as ev
from engine.store import open_store
from engine.store.verify import verify

url = sys.argv[1]
store = open_store(url)
if sys.argv[2] == "new":
    sid = "0194d1e0-0000-7000-8000-0000000d0001"
    store.create_session(sid, created=0)
    for n in range(700):  # enough to seal blocks in SQLite and JSONL
        store.append(sid, [ev.TextDelta(id=f"0194d1e0-0000-7000-8000-0001{n:08x}",
                                        message_id="m", part_id="p", delta="x" * 40)])
for info in store.sessions():
    list(store.read(info.id))
for deep in (False, True):
    verify(store, deep=deep)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("engine.store.legacy."))))
"""


def _legacy_modules(url: str, mode: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, url, mode], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=120)
    found: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_todays_layout_never_imports_the_legacy_room(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else f"jsonl:///{tmp_path}/s"
    assert _legacy_modules(url, "new") == []


@pytest.mark.parametrize(("fixture", "rooms"), [
    ("store-v2.db", {"sqlite_schema", "blocks_v2"}),
    ("jsonl-v1-blocks", {"jsonl_index_v1"}),
    ("packed-v1-stores/jsonl", {"packed_v1"}),
    ("packed-v1-stores/store.db", {"packed_v1"}),
])
def test_an_old_store_is_read_through_the_legacy_room(fixture: str, rooms: set[str],
                                                      tmp_path: Path) -> None:
    source = FIXTURES / fixture
    copy = tmp_path / source.name
    if source.is_dir():
        shutil.copytree(source, copy)
    else:
        shutil.copy(source, copy)
    url = f"sqlite:///{copy}" if copy.suffix == ".db" else f"jsonl:///{copy}"
    found = _legacy_modules(url, "old")
    assert {f"engine.store.legacy.{r}" for r in rooms} <= set(found)
