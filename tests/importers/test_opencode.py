"""OpenCode: export JSON (round trip via ``export --as opencode``), storage tree, opencode.db."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.importers.opencode import message_uuid, plan_opencode, session_uuid
from engine.importers.write import write_plan
from engine.store import open_store
from projections import views as v
from projections.render import anthropic
from projections.timetravel import at
from projections.verbs import opencode_export
from tests.importers.support import FIXTURES, written

EXPORT = FIXTURES / "opencode" / "export-live.json"


def source() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXPORT.read_text())
    return data


def exported(store: Any, sid: str) -> dict[str, Any]:
    out: dict[str, Any] = opencode_export(store, sid, store.version(sid))
    return out


def test_export_json_round_trips_exactly() -> None:
    """Every part type, every tool state (a running and a pending one: a live export),
    MessageAbortedError, OpenCode's own ids, the info fields convlog has no place for."""
    src = source()
    plan = plan_opencode(EXPORT)
    store = written(plan)
    out = exported(store, plan.sessions[0].id)
    assert out == src
    kinds = {p["type"] for m in src["messages"] for p in m["parts"]}
    assert len(kinds) == 12
    assert {p["state"]["status"] for m in src["messages"] for p in m["parts"]
            if p["type"] == "tool"} == {"pending", "running", "completed", "error"}


def test_ids_stay_uuids_inside_convlog() -> None:
    """BR-04: the store holds UUIDs; the OpenCode ids ride in metadata.opencode."""
    plan = plan_opencode(EXPORT)
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    first = messages[0].info
    assert first.id == message_uuid("msg_a00001", 1750000000000)
    assert first.metadata is not None
    assert first.metadata["opencode"]["id"] == "msg_a00001"
    assert plan.sessions[0].id == session_uuid(source()["info"]["id"], 1749999999990)


def test_a_live_export_stays_live() -> None:
    plan = plan_opencode(EXPORT)
    store = written(plan)
    last = at(store, plan.sessions[0].id).messages()[-1]
    assert last.info.time.completed is None
    states = [p.state for p in last.parts if isinstance(p, v.ToolPart)]
    assert isinstance(states[0], v.ToolStateRunning)
    assert isinstance(states[1], v.ToolStatePending)
    assert states[1].raw == '{"filePath": "docs/pa'


def test_aborted_message_and_every_part_type() -> None:
    plan = plan_opencode(EXPORT)
    store = written(plan)
    messages = at(store, plan.sessions[0].id).messages()
    aborted = messages[3].info
    assert isinstance(aborted, v.AssistantInfo)
    assert aborted.error is not None
    assert aborted.error.kind == "aborted"
    kinds = {type(p).__name__ for m in messages for p in m.parts}
    assert kinds == {"TextPart", "ReasoningPart", "FilePart", "ToolPart", "StepStartPart",
                     "StepFinishPart", "SnapshotPart", "PatchPart", "AgentPart", "SubtaskPart",
                     "RetryPart", "CompactionPart"}
    assert anthropic.messages(messages)


def test_reimport_is_idempotent() -> None:
    store = written(plan_opencode(EXPORT))
    again = plan_opencode(EXPORT)
    write_plan(store, again)
    assert again.report.written == 0


def storage_tree(root: Path, child: bool = False) -> Path:
    """The pre-1.2 layout, written from the export fixture."""
    src = source()
    info = src["info"]
    (root / "session" / "proj_1").mkdir(parents=True)
    (root / "session" / "proj_1" / f"{info['id']}.json").write_text(json.dumps(info))
    for m in src["messages"]:
        mdir = root / "message" / info["id"]
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"{m['info']['id']}.json").write_text(json.dumps(m["info"]))
        pdir = root / "part" / m["info"]["id"]
        pdir.mkdir(parents=True, exist_ok=True)
        for p in m["parts"]:
            (pdir / f"{p['id']}.json").write_text(json.dumps(p))
    if child:
        sub = {"id": "ses_child", "parentID": info["id"], "title": "docs subagent",
               "time": {"created": info["time"]["created"] + 5}}
        (root / "session" / "proj_1" / "ses_child.json").write_text(json.dumps(sub))
    return root


def test_the_storage_tree_imports_like_the_export(tmp_path: Path) -> None:
    root = storage_tree(tmp_path / "storage", child=True)
    assert detect(tmp_path) == "opencode"
    plan = plan_opencode(tmp_path)
    store = written(plan)
    main = next(s for s in plan.sessions if s.kind == "main")
    child = next(s for s in plan.sessions if s.kind == "child")
    assert child.parent == main.id
    from_export = written(plan_opencode(EXPORT))
    sid = plan_opencode(EXPORT).sessions[0].id
    assert main.id == sid
    assert at(store, main.id).to_json() == at(from_export, sid).to_json()
    assert exported(store, main.id) == source()
    assert exported(store, child.id)["info"]["parentID"] == source()["info"]["id"]
    assert root.is_dir()


# The 1.2+ tables, with the columns of OpenCode's session.sql.ts (older rows may lack
# the newer ones; the importer reads whichever are there).
SCHEMA = """
    CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL);
    CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, workspace_id TEXT,
        parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL,
        version TEXT NOT NULL, share_url TEXT, summary_additions INTEGER,
        summary_deletions INTEGER, summary_files INTEGER, summary_diffs TEXT, revert TEXT,
        permission TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
        time_compacting INTEGER, time_archived INTEGER);
    CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
        session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE todo (session_id TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL,
        priority TEXT NOT NULL, position INTEGER NOT NULL, time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL);
"""


def opencode_db(path: Path, *, child: bool = False) -> Path:
    """An opencode.db holding the export fixture (and a subagent's child session)."""
    src = source()
    info = src["info"]
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO session (id, project_id, slug, directory, title, version, "
               "summary_additions, summary_deletions, summary_files, share_url, "
               "time_created, time_updated) VALUES (?, ?, ?, ?, ?, ?, 3, 1, 1, ?, ?, ?)",
               (info["id"], info["projectID"], info["slug"], info["directory"], info["title"],
                info["version"], "https://opncd.ai/s/abc", info["time"]["created"],
                info["time"]["updated"]))
    if child:
        db.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, "
                   "version, time_created, time_updated) VALUES ('ses_child', 'proj_1', ?, "
                   "'docs', '/home/me/app', 'docs (@general subagent)', '1.2.0', ?, ?)",
                   (info["id"], info["time"]["created"] + 5, info["time"]["created"] + 9))
    for m in src["messages"]:
        mid, created = m["info"]["id"], m["info"]["time"]["created"]
        body = {k: x for k, x in m["info"].items() if k not in ("id", "sessionID")}
        db.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                   (mid, info["id"], created, created, json.dumps(body)))
        for p in m["parts"]:
            data = {k: x for k, x in p.items() if k not in ("id", "sessionID", "messageID")}
            db.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                       (p["id"], mid, info["id"], created, created, json.dumps(data)))
    db.commit()
    db.close()
    return path


def test_opencode_db_round_trips_like_the_export(tmp_path: Path) -> None:
    opencode_db(tmp_path / "opencode.db")
    assert detect(tmp_path) == "opencode"
    plan = plan_opencode(tmp_path)
    store = written(plan)
    src = source()
    out = exported(store, plan.sessions[0].id)
    assert out["messages"] == src["messages"]  # data + the id columns = the export's parts
    # The session row, as OpenCode's fromRow reads it.
    assert out["info"] == {**src["info"], "share": {"url": "https://opncd.ai/s/abc"}}
    assert plan.sessions[0].id == plan_opencode(EXPORT).sessions[0].id


def test_db_child_sessions_nest_under_their_parent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    opencode_db(tmp_path / "opencode.db", child=True)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["import", str(tmp_path), "--store", url]) == 0
    capsys.readouterr()
    assert main(["sessions", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert not lines[0].startswith(" ")
    assert lines[1].startswith("  ")
    assert "(child)" in lines[1]
    with open_store(url) as store:
        child = next(s.id for s in store.sessions() if s.id in lines[1])
        assert exported(store, child)["info"]["parentID"] == source()["info"]["id"]


def test_a_db_of_another_shape_is_a_typed_error(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "opencode.db")
    db.execute("CREATE TABLE unrelated (x)")
    db.close()
    with pytest.raises(ImportInputError, match=r"not an opencode\.db"):
        plan_opencode(tmp_path)


def test_a_broken_export_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"info": {}, "messages": 3}')
    with pytest.raises(ImportInputError, match="opencode export"):
        plan_opencode(path)
