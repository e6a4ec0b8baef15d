"""OpenCode: export JSON (round trip via ``export --as opencode``), storage tree, opencode.db."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.importers.opencode import message_uuid, plan_opencode, session_uuid
from engine.importers.write import write_plan
from projections import views as v
from projections.render import anthropic
from projections.timetravel import at
from projections.verbs import opencode_export
from tests.importers.support import FIXTURES, written

EXPORT = FIXTURES / "opencode" / "export-live.json"


def source() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXPORT.read_text())
    return data


def back_to_source_ids(out: Any, src: dict[str, Any]) -> Any:
    """convlog's UUIDs replaced by the OpenCode ids they were derived from."""
    back = {message_uuid(m["info"]["id"], m["info"]["time"]["created"]): m["info"]["id"]
            for m in src["messages"]}
    info = src["info"]
    back[session_uuid(info["id"], info["time"]["created"])] = info["id"]

    def fix(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: fix(x) for k, x in o.items()}
        if isinstance(o, list):
            return [fix(x) for x in o]
        return back.get(o, o) if isinstance(o, str) else o

    return fix(out)


def test_export_json_round_trips_modulo_the_documented_fields() -> None:
    src = source()
    plan = plan_opencode(EXPORT)
    store = written(plan)
    sid = plan.sessions[0].id
    out = back_to_source_ids(opencode_export(store, sid, store.version(sid)), src)
    assert len(out["messages"]) == len(src["messages"])
    for want, got in zip(src["messages"], out["messages"], strict=True):
        assert got["info"] == want["info"]
        for wp, gp in zip(want["parts"], got["parts"], strict=True):
            untimed = "time" not in wp and wp["type"] == "text"  # convlog always has times
            assert {k: x for k, x in gp.items() if not (untimed and k == "time")} == wp


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
    assert root.is_dir()


def test_opencode_db_imports_like_the_export(tmp_path: Path) -> None:
    src = source()
    db = sqlite3.connect(tmp_path / "opencode.db")
    db.executescript("""
        CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT);
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT,
                              title TEXT, time_created INTEGER, time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
                              data TEXT);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
                           time_created INTEGER, data TEXT);
        CREATE TABLE todo (session_id TEXT, content TEXT);
    """)
    info = src["info"]
    db.execute("INSERT INTO session VALUES (?, 'proj_1', NULL, ?, ?, ?)",
               (info["id"], info["title"], info["time"]["created"], info["time"]["updated"]))
    for m in src["messages"]:
        body = {k: x for k, x in m["info"].items() if k != "id"}
        db.execute("INSERT INTO message VALUES (?, ?, ?, ?)",
                   (m["info"]["id"], info["id"], m["info"]["time"]["created"], json.dumps(body)))
        for p in m["parts"]:
            db.execute("INSERT INTO part VALUES (?, ?, ?, 0, ?)",
                       (p["id"], m["info"]["id"], info["id"],
                        json.dumps({k: x for k, x in p.items() if k != "id"})))
    db.commit()
    db.close()
    assert detect(tmp_path) == "opencode"
    plan = plan_opencode(tmp_path)
    store = written(plan)
    reference = plan_opencode(EXPORT)
    ref_store = written(reference)
    assert plan.sessions[0].id == reference.sessions[0].id
    sid = plan.sessions[0].id
    assert at(store, sid).to_json() == at(ref_store, sid).to_json()


def test_a_broken_export_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"info": {}, "messages": 3}')
    with pytest.raises(ImportInputError, match="opencode export"):
        plan_opencode(path)
