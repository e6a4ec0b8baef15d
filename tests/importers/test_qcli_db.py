"""Q CLI's own store of conversations: data.sqlite3, table conversations (one
ConversationState JSON per working directory), beside credentials it must not touch."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.cli import main as main_cli
from engine.importers.base import ImportInputError
from engine.importers.detect import detect, plan_path
from engine.importers.qcli import plan_qcli
from projections.qcli import export_qcli
from projections.qcli.timetravel import conversation_at
from tests.importers.support import FIXTURES, written

SAVES = [FIXTURES / "qcli-v1.10-pairs.json", FIXTURES / "qcli-v1.14-objects.json"]
SECRET = "aoa-refresh-token-never-imported"


def data_dir(root: Path, values: list[str] | None = None) -> Path:
    """``~/.local/share/amazon-q`` as Q CLI leaves it (tables of its migrations)."""
    db = sqlite3.connect(root / "data.sqlite3")
    db.executescript("""
        CREATE TABLE migrations (id INTEGER PRIMARY KEY, version INTEGER NOT NULL,
                                 migration_time INTEGER NOT NULL);
        CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB);
        CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE conversations (key TEXT PRIMARY KEY, value TEXT);
    """)
    db.execute("INSERT INTO auth_kv VALUES ('codewhisperer:odic:token', ?)", (SECRET,))
    for i, value in enumerate(values if values is not None
                              else [p.read_text() for p in SAVES]):
        db.execute("INSERT INTO conversations VALUES (?, ?)", (f"/home/me/project{i}", value))
    db.commit()
    db.close()
    return root


def test_the_data_directory_and_the_database_are_detected(tmp_path: Path) -> None:
    data_dir(tmp_path)
    assert detect(tmp_path) == "qcli"
    assert detect(tmp_path / "data.sqlite3") == "qcli"


def test_every_saved_conversation_is_a_session_like_its_save(tmp_path: Path) -> None:
    data_dir(tmp_path)
    plan = plan_path(tmp_path)
    written(plan)
    alone = [plan_qcli(p).sessions[0] for p in SAVES]
    assert [s.id for s in plan.sessions] == [s.id for s in alone]
    assert [len(s.events) for s in plan.sessions] == [len(s.events) for s in alone]
    assert all(s.source == "data.sqlite3" for s in plan.sessions)


def test_neither_credentials_nor_the_directory_key_reach_the_store(tmp_path: Path) -> None:
    data_dir(tmp_path)
    store = f"sqlite:///{tmp_path / 'out.db'}"
    assert main_cli(["import", str(tmp_path / "data.sqlite3"), "--store", store]) == 0
    raw = (tmp_path / "out.db").read_bytes()
    assert SECRET.encode() not in raw
    assert b"/home/me/project" not in raw


def test_a_damaged_row_is_one_error_naming_it(tmp_path: Path) -> None:
    data_dir(tmp_path, ['{"conversation_id": "c1", "history": [tru'])
    with pytest.raises(ImportInputError, match="conversations row 1"):
        plan_path(tmp_path)


def test_an_empty_conversations_table_imports_nothing_and_says_so(tmp_path: Path) -> None:
    data_dir(tmp_path, [])
    plan = plan_path(tmp_path / "data.sqlite3")
    assert plan.sessions == []
    assert "a data.sqlite3 without saved conversations: nothing to import" in plan.report.unmapped


def test_db_import_export_import_is_the_same_conversation(tmp_path: Path) -> None:
    """data.sqlite3 -> export --as qcli -> import as a /save: the same state, and an
    export of that is the first export."""
    data_dir(tmp_path)
    plan = plan_path(tmp_path)
    store = written(plan)
    for planned in plan.sessions:
        state = conversation_at(store, planned.id).state()
        first = export_qcli(state)
        save = tmp_path / f"{planned.id}.json"
        save.write_text(json.dumps(first))
        again = plan_qcli(save)
        store2 = written(again)
        assert again.sessions[0].id == planned.id
        assert conversation_at(store2, planned.id).state() == state
        assert export_qcli(conversation_at(store2, planned.id).state()) == first


def test_a_row_that_is_not_utf8_or_too_deep_is_one_error_naming_it(tmp_path: Path) -> None:
    root = data_dir(tmp_path, [SAVES[0].read_text()])
    db = sqlite3.connect(root / "data.sqlite3")
    db.execute("INSERT INTO conversations VALUES ('/p2', CAST(? AS TEXT))",
               (b'{"conversation_id": "\xff"}',))
    db.commit()
    db.close()
    with pytest.raises(ImportInputError, match="conversations row 2: not UTF-8"):
        plan_path(root)
    deep = tmp_path / "deep"
    deep.mkdir()
    data_dir(deep, ["[" * 100_000 + "]" * 100_000])
    with pytest.raises(ImportInputError, match="conversations row 1"):
        plan_path(deep)
