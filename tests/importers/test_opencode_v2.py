"""The newest opencode.db: sessions recorded in session_message (OpenCode's newer message
table), a backfilled 1.2 session, and the session table's newer columns."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.base import ImportInputError
from engine.importers.detect import detect, plan_path
from engine.importers.opencode import plan_opencode
from projections import views as v
from projections.timetravel import at
from projections.verbs import opencode_export
from tests.importers.support import FIXTURES, written
from tests.importers.test_fuzz_junk import JSON, import_or_refuse, paths, put

ROWS = FIXTURES / "opencode-db-v2" / "rows.json"
_DDL = """
    CREATE TABLE project (id TEXT PRIMARY KEY);
    CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, workspace_id TEXT,
        parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, path TEXT,
        title TEXT NOT NULL, version TEXT NOT NULL, share_url TEXT, summary_additions INTEGER,
        summary_deletions INTEGER, summary_files INTEGER, summary_diffs TEXT,
        cost REAL NOT NULL DEFAULT 0, tokens_input INTEGER NOT NULL DEFAULT 0,
        tokens_output INTEGER NOT NULL DEFAULT 0, tokens_reasoning INTEGER NOT NULL DEFAULT 0,
        tokens_cache_read INTEGER NOT NULL DEFAULT 0,
        tokens_cache_write INTEGER NOT NULL DEFAULT 0, revert TEXT, permission TEXT, goal TEXT,
        agent TEXT, model TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
        time_compacting INTEGER, time_archived INTEGER);
    CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE session_message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
        type TEXT NOT NULL, seq INTEGER NOT NULL, time_created INTEGER NOT NULL,
        time_updated INTEGER, data TEXT NOT NULL);
    CREATE TABLE session_v2 (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, workspace_id TEXT,
        parent_id TEXT, fork_session_id TEXT, fork_boundary TEXT, slug TEXT NOT NULL,
        directory TEXT NOT NULL, path TEXT, title TEXT, version TEXT NOT NULL, share_url TEXT,
        summary_additions INTEGER, summary_deletions INTEGER, summary_files INTEGER,
        summary_diffs TEXT, metadata TEXT, cost REAL NOT NULL DEFAULT 0,
        tokens_input INTEGER NOT NULL DEFAULT 0, tokens_output INTEGER NOT NULL DEFAULT 0,
        tokens_reasoning INTEGER NOT NULL DEFAULT 0, tokens_cache_read INTEGER NOT NULL DEFAULT 0,
        tokens_cache_write INTEGER NOT NULL DEFAULT 0, revert TEXT, permission TEXT, agent TEXT,
        model TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
        time_compacting INTEGER, time_archived INTEGER, time_suspended INTEGER,
        resume_attempts INTEGER NOT NULL DEFAULT 0, time_idle INTEGER, time_viewed INTEGER,
        idle_outcome TEXT);
"""


def build(path: Path, rows: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    tables = rows or json.loads(ROWS.read_text())
    db = sqlite3.connect(path)
    db.executescript(_DDL)
    for table, items in tables.items():
        for row in items:
            cols = list(row)
            # data (and JSON columns) as JSON text; a string stands as it is (damaged data)
            values = [json.dumps(x) if isinstance(x, dict | list) or (
                k == "data" and not isinstance(x, str)) else x for k, x in row.items()]
            db.execute(f"INSERT INTO {table} ({', '.join(cols)}) "
                       f"VALUES ({', '.join('?' * len(cols))})", values)
    db.commit()
    db.close()
    return path


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    build(tmp_path / "opencode.db")
    return tmp_path


def sessions(plan: Any) -> dict[str, Any]:
    return {s.original_id: s for s in plan.sessions}


def test_a_session_only_session_message_holds_is_imported(data_dir: Path) -> None:
    assert detect(data_dir) == "opencode"
    plan = plan_path(data_dir)
    store = written(plan)
    msgs = at(store, sessions(plan)["ses_v2only0001"].id).messages()
    assert [m.info.role for m in msgs] == ["user", "assistant", "user", "user"]
    user, turn, shell, compaction = msgs
    assert [p.text for p in user.parts if isinstance(p, v.TextPart)] == ["add a /health route"]
    assert [(f.mime, f.filename) for f in user.parts if isinstance(f, v.FilePart)] == [
        ("image/png", "sketch.png")]
    info = turn.info
    assert isinstance(info, v.AssistantInfo)
    assert (info.model_id, info.provider_id, info.finish) == ("claude-sonnet-4-6", "anthropic",
                                                              "stop")
    assert (info.tokens.input, info.tokens.reasoning, info.tokens.cache.read) == (1500, 30, 200)
    reasoning = next(p for p in turn.parts if isinstance(p, v.ReasoningPart))
    assert (reasoning.metadata or {})["anthropic"]["signature"] == "sig-1"
    tools = {p.call_id: p for p in turn.parts if isinstance(p, v.ToolPart)}
    edit, failed = tools["toolu_01"].state, tools["toolu_02"].state
    assert isinstance(edit, v.ToolStateCompleted)
    assert edit.output == "Edited app.py"
    assert (edit.metadata or {})["structured"] == {"diff": "+@app.get('/health')"}
    assert isinstance(failed, v.ToolStateError)
    assert failed.error == "exit 1"
    assert [p.text for p in turn.parts if isinstance(p, v.TextPart)] == [
        "Added /health; one test fails."]
    bash = next(p for p in shell.parts if isinstance(p, v.ToolPart))
    assert (bash.tool, bash.call_id, bash.state.input) == ("bash", "call_sh1",
                                                           {"command": "git status"})
    assert any(isinstance(p, v.CompactionPart) for p in compaction.parts)


def test_what_has_no_message_is_reported(data_dir: Path) -> None:
    report = plan_path(data_dir).report.unmapped
    assert "a session_message model-switched (model changed): not imported" in report
    assert "a session_message of type 'future-kind': not imported" in report


def test_a_backfilled_session_is_read_once_from_its_original_rows(data_dir: Path) -> None:
    plan = plan_opencode(data_dir / "opencode.db")
    store = written(plan)
    legacy = sessions(plan)["ses_legacy0002"]
    msgs = at(store, legacy.id).messages()
    assert [[p.text for p in m.parts if isinstance(p, v.TextPart)] for m in msgs] == [
        ["hello from 1.2"]]
    assert not any("both message and session_message" in k for k in plan.report.unmapped)


def test_the_session_tables_newer_columns_are_kept(data_dir: Path) -> None:
    plan = plan_opencode(data_dir / "opencode.db")
    meta = sessions(plan)["ses_v2only0001"].metadata
    assert meta["columns"]["agent"] == "build"
    assert meta["columns"]["tokens_input"] == 1500
    assert meta["info"]["title"] == "add a health check"


def test_a_session_message_that_is_not_json_is_one_clear_error(tmp_path: Path) -> None:
    rows = json.loads(ROWS.read_text())
    rows["session_message"][0]["data"] = "[1, 2"
    build(tmp_path / "opencode.db", rows)
    with pytest.raises(ImportInputError, match="smg_0001"):
        plan_opencode(tmp_path / "opencode.db")


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), junk=JSON)
def test_junk_anywhere_in_a_session_message_is_refused_or_imports(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, junk: Any) -> None:
    rows = json.loads(ROWS.read_text())
    row = data.draw(st.sampled_from(rows["session_message"]), label="row")
    where = data.draw(st.sampled_from(paths(row["data"])), label="path")
    row["data"] = put(row["data"], where, junk)
    root = tmp_path_factory.mktemp("db")
    build(root / "opencode.db", rows)
    import_or_refuse(root / "opencode.db")


def test_a_session_message_session_round_trips_through_the_opencode_export(
        data_dir: Path, tmp_path: Path) -> None:
    """import (session_message) -> export --as opencode -> import: the same conversation,
    and the second export is the first."""
    plan = plan_opencode(data_dir / "opencode.db")
    store = written(plan)
    sid = sessions(plan)["ses_v2only0001"].id
    first = opencode_export(store, sid, store.version(sid))
    path = tmp_path / "export.json"
    path.write_text(json.dumps(first))
    again = plan_opencode(path)
    store2 = written(again)
    sid2 = again.sessions[0].id
    assert sid2 == sid
    assert at(store2, sid2).messages() == at(store, sid).messages()
    assert opencode_export(store2, sid2, store2.version(sid2)) == first


NEWEST = FIXTURES / "opencode-db-v2" / "rows-newest.json"


def test_the_newest_session_message_schema(tmp_path: Path) -> None:
    build(tmp_path / "opencode.db", json.loads(NEWEST.read_text()))
    plan = plan_opencode(tmp_path / "opencode.db")
    store = written(plan)
    msgs = at(store, plan.sessions[0].id).messages()
    skill, user, turn, shell, compaction = msgs
    assert [p.text for p in user.parts if isinstance(p, v.TextPart)] == ["draft the notes"]
    first = skill.parts[0]
    assert isinstance(first, v.TextPart)
    assert first.synthetic
    assert (first.metadata or {})["opencode"]["name"] == "release-notes"
    reasoning = next(p for p in turn.parts if isinstance(p, v.ReasoningPart))
    assert (reasoning.metadata or {})["anthropic"]["signature"] == "sig-n"
    tools = {p.call_id: p for p in turn.parts if isinstance(p, v.ToolPart)}
    done = tools["toolu_n1"].state
    assert isinstance(done, v.ToolStateCompleted)
    assert done.output == "a1 fix\nb2 feat"
    assert (done.metadata or {})["exit"] == 0
    assert isinstance(tools["toolu_n2"].state, v.ToolStatePending)  # still streaming
    assert turn.info.time.completed is None  # no completion recorded: stays open
    bash = next(p for p in shell.parts if isinstance(p, v.ToolPart))
    assert bash.call_id == "sh_1"
    assert isinstance(bash.state, v.ToolStateCompleted)
    assert bash.state.output == "NOTES.md"
    assert any(isinstance(p, v.CompactionPart) for p in compaction.parts)
    report = plan.report.unmapped
    for note in ("a session_message location-switched (location changed): not imported",
                 "a session_message idle (the end of a turn): nothing to import",
                 "a session_message user skills: not imported"):
        assert note in report
    assert any(k.startswith("a session_message compaction that failed") for k in report)


def _shape(plan: Any) -> dict[str, list[tuple[str, list[str]]]]:
    store = written(plan)
    return {s.original_id: [(m.info.role, [p.TAG for p in m.parts])
                            for m in at(store, s.id).messages()] for s in plan.sessions}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["session", "session_v2", "both", "none"]), min_size=2,
                max_size=2))
def test_every_session_is_imported_whichever_table_holds_it(tmp_path_factory: Any,
                                                             where: list[str]) -> None:
    """OpenCode 2.0 keeps its sessions in session_v2 (the 1.x session table stays beside
    it, its rows migrated or stale), and session_message rows can name a session no table
    holds. Each session imports with the same messages wherever its row is; a row in both
    tables is one session; messages without a row are a session too."""
    rows = json.loads(ROWS.read_text())
    expected = _shape(plan_opencode(build(tmp_path_factory.mktemp("a") / "opencode.db")))
    moved: dict[str, list[dict[str, Any]]] = {**rows, "session": [], "session_v2": []}
    for row, table in zip(rows["session"], where, strict=True):
        if table in ("session", "both"):
            moved["session"].append(row)
        if table in ("session_v2", "both"):
            moved["session_v2"].append({**row, "resume_attempts": 0})
    plan = plan_opencode(build(tmp_path_factory.mktemp("b") / "opencode.db", moved))
    got = _shape(plan)
    with_messages = {r["session_id"] for r in [*rows["session_message"], *rows["message"]]}
    kept = {r["id"] for r, t in zip(rows["session"], where, strict=True) if t != "none"}
    assert set(got) == kept | with_messages
    for sid in kept | with_messages:  # the same messages, wherever the row was (or none)
        assert got[sid] == expected[sid]
    if with_messages - kept:
        assert "messages of a session no session table holds: imported as a session " \
               "without its info" in plan.report.unmapped
