"""``convlog migrate``: a store of an earlier release's layout is brought to today's
at once (what its first write would do), its events, hashes and verification kept;
a store already current is left as it is, byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.cli import EXIT_OK
from engine.store import open_store
from engine.store.jsonl_files import FORMAT_VERSION
from engine.store.sqlite import SCHEMA_VERSION
from engine.store.verify import verify
from tests.support.cli_run import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _schema(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0])
    finally:
        db.close()


def _heads(url: str) -> dict[str, tuple[int, str]]:
    store = open_store(url, create=False)
    try:
        report = verify(store)
        assert report.ok, report.problems
        return report.heads
    finally:
        store.close()


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def test_a_schema_2_sqlite_store_is_migrated_by_the_verb(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    shutil.copy(FIXTURES / "store-v2.db", path)
    url = f"sqlite:///{path}"
    before = _heads(url)
    assert _schema(path) == 2  # reading left it as its release wrote it
    outcome = run_cli(["migrate", url])
    assert outcome.code == EXIT_OK, outcome.err
    assert "migrated" in outcome.out
    assert _schema(path) == SCHEMA_VERSION
    assert _heads(url) == before
    again = run_cli(["migrate", url])
    assert again.code == EXIT_OK
    assert "nothing to migrate" in again.out


@pytest.mark.parametrize("fixture", ["jsonl-v1", "jsonl-v2"])
def test_an_old_jsonl_store_gets_todays_format_number(tmp_path: Path, fixture: str) -> None:
    root = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, root)
    url = f"jsonl:///{root}"
    before = _heads(url)
    assert json.loads((root / "convlog.json").read_text())["version"] < FORMAT_VERSION
    outcome = run_cli(["migrate", url])
    assert outcome.code == EXIT_OK, outcome.err
    assert json.loads((root / "convlog.json").read_text())["version"] == FORMAT_VERSION
    assert _heads(url) == before


def test_a_current_store_is_left_byte_for_byte(tmp_path: Path) -> None:
    root = tmp_path / "now"
    shutil.copytree(FIXTURES / "jsonl-v1", root)
    run_cli(["migrate", f"jsonl:///{root}"])
    digest = _digest(root)
    outcome = run_cli(["migrate", f"jsonl:///{root}"])
    assert outcome.code == EXIT_OK
    assert "nothing to migrate" in outcome.out
    assert _digest(root) == digest
