"""Junk anywhere in any format: a typed ImportInputError or a valid import, never a crash.

Each example takes a fixture, replaces one value (at any depth of any line or
record) with random JSON, and imports the result. Anything but an
``ImportInputError`` or a log that verifies is a bug in the importer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.base import ImportInputError, Plan
from engine.importers.detect import plan_path
from engine.importers.write import write_plan
from engine.store import MemoryStore
from engine.store.verify import verify
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

LINE_FILES = [
    FIXTURES / "claude-code" / "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f.jsonl",
    next((FIXTURES / "codex").glob("rollout-2025-09-03*.jsonl")),
    next((FIXTURES / "codex").glob("rollout-2025-11-20*.jsonl")),
    next((FIXTURES / "gemini").glob("*.jsonl")),
    next((FIXTURES / "codex").glob("rollout-2026-01-15*.jsonl")),
    next((FIXTURES / "gemini-chats").glob("session-*.jsonl")),
    next((FIXTURES / "claude-code").glob("*/subagents/agent-*.jsonl")),
    next((FIXTURES / "codex-legacy").glob("rollout-*.jsonl")),
    next((FIXTURES / "claude-code-blocks").glob("*.jsonl")),
    # The newest layouts: a paginated Codex rollout, Claude Code 2.1 with title records and
    # a workflow agent.
    sorted((FIXTURES / "codex-home").rglob("rollout-*.jsonl"))[0],
    next((FIXTURES / "claude-projects").rglob("3c2b1a00-*.jsonl")),
    next((FIXTURES / "claude-projects").rglob("agent-w1.jsonl")),
]
# Every fixture of every format, for the byte-level truncation test.
ALL_FILES = [*LINE_FILES, *[
    FIXTURES / "opencode" / "export-live.json", next((FIXTURES / "gemini").glob("*.json")),
    FIXTURES / "qcli-v1.10-pairs.json", FIXTURES / "qcli-v1.14-objects.json",
    FIXTURES / "aider" / ".aider.chat.history.md",
    *sorted((FIXTURES / "gemini-checkpoints").glob("*.json")),
    FIXTURES / "gemini-tmp" / "logs.json", FIXTURES / "gemini-logs-v0" / "logs.json"]]
DOCUMENTS = [FIXTURES / "opencode" / "export-live.json", next((FIXTURES / "gemini").glob("*.json")),
             FIXTURES / "qcli-v1.10-pairs.json", FIXTURES / "qcli-v1.14-objects.json",
             *sorted((FIXTURES / "gemini-checkpoints").glob("*.json")),
             FIXTURES / "gemini-tmp" / "logs.json", FIXTURES / "gemini-logs-v0" / "logs.json",
             next((FIXTURES / "gemini-tmp" / "chats").glob("session-*.json"))]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=6)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, x in value.items():
            out += paths(x, (*prefix, k))
    elif isinstance(value, list):
        for i, x in enumerate(value):
            out += paths(x, (*prefix, i))
    return out


def put(doc: Any, where: tuple[Any, ...], junk: Any) -> Any:
    if not where:
        return junk
    target = doc
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = junk
    return doc


def shape(messages: list[v.WithParts]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(m.info.id, [(p.id, getattr(getattr(p, "state", None), "TAG", p.TAG))
                         for p in m.parts]) for m in messages]


def _state(store: MemoryStore) -> dict[str, list[Any]]:
    return {s.id: list(store.read(s.id)) for s in store.sessions()}


# A store that already holds an import: a refused import must leave it exactly as it was.
_BASE = FIXTURES / "qcli-v1.14-objects.json"


def import_or_refuse(path: Path) -> Plan | None:
    """Import ``path`` into a store holding another import; a refusal is typed and leaves
    that store unchanged, an acceptance verifies."""
    try:
        plan = plan_path(path)
    except ImportInputError:
        return None
    store = MemoryStore()
    write_plan(store, plan_path(_BASE))
    before = _state(store)
    try:
        write_plan(store, plan)
    except ImportInputError:
        assert _state(store) == before, "a refused import changed the store"
        return None
    report = verify(store)
    assert report.ok, report.problems
    return plan


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LINE_FILES), st.data(), JSON)
def test_junk_in_a_line(tmp_path: Path, source: Path, data: st.DataObject, junk: Any) -> None:
    lines = [json.loads(x) for x in source.read_text().splitlines()]
    n = data.draw(st.integers(0, len(lines) - 1), label="line")
    where = data.draw(st.sampled_from(paths(lines[n])), label="path")
    lines[n] = put(lines[n], where, junk)
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    import_or_refuse(path)


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(DOCUMENTS), st.data(), JSON)
def test_junk_in_a_document(tmp_path: Path, source: Path, data: st.DataObject,
                            junk: Any) -> None:
    doc = json.loads(source.read_text())
    where = data.draw(st.sampled_from(paths(doc)[1:]), label="path")
    path = tmp_path / source.name
    path.write_text(json.dumps(put(doc, where, junk)))
    import_or_refuse(path)


@pytest.mark.parametrize("source", LINE_FILES, ids=lambda p: p.parent.name)
def test_every_prefix_of_a_file_imports(tmp_path: Path, source: Path) -> None:
    """A transcript cut at any line (a crash, a copy in progress) still imports."""
    lines = source.read_text().splitlines(keepends=True)
    for n in range(1, len(lines) + 1):
        path = tmp_path / source.name
        path.write_text("".join(lines[:n]))
        import_or_refuse(path)


@pytest.mark.parametrize("source", LINE_FILES[:3], ids=lambda p: p.name[:20])
def test_a_grown_file_reimports_on_top_of_its_prefix(tmp_path: Path, source: Path) -> None:
    """A live transcript imported, then imported again once it grew: only new events."""
    lines = source.read_text().splitlines(keepends=True)
    alone = tmp_path / "whole"  # the file alone (a session file also brings its subagents/)
    alone.mkdir()
    (alone / source.name).write_text("".join(lines))
    whole = written(plan_path(alone / source.name))
    for n in range(1, len(lines)):
        path = tmp_path / source.name
        path.write_text("".join(lines[:n]))
        try:
            store = written(plan_path(path))
        except ImportInputError:
            continue  # a prefix with nothing to import
        path.write_text("".join(lines))
        write_plan(store, plan_path(path))
        for info in whole.sessions():  # the same messages and parts, nothing twice
            assert shape(at(store, info.id).messages()) == shape(at(whole, info.id).messages())


def test_a_replaced_gemini_record_already_imported_is_a_typed_error(tmp_path: Path) -> None:
    """Known limit: a record replaced after it was imported cannot be updated in place."""
    source = LINE_FILES[3]
    lines = source.read_text().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_text("".join(lines[:3]))  # m2 while its tool call was still executing
    store = written(plan_path(path))
    before = {s.id: store.version(s.id) for s in store.sessions()}
    path.write_text("".join(lines))
    with pytest.raises(ImportInputError):
        write_plan(store, plan_path(path))
    assert {s.id: store.version(s.id) for s in store.sessions()} == before


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(ALL_FILES), st.data())
def test_a_file_cut_at_any_byte(tmp_path: Path, source: Path, data: st.DataObject) -> None:
    """A copy interrupted mid-write: refused with a typed error (nothing written) or
    imported (a cut JSONL line is the truncated final line; --lenient skips it)."""
    raw = source.read_bytes()
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    path = tmp_path / source.name
    path.write_bytes(raw[:cut])
    import_or_refuse(path)


UNKNOWN_RECORDS = {
    "claude-code": lambda kind, junk: {"type": kind, "uuid": "zz-1", "parentUuid": None,
                                       "sessionId": "s", "data": junk},
    # Claude Code 2.1.x's metadata records have no uuid ({"type": "atis-latch", ...}).
    "claude-code-metadata": lambda kind, junk: {"type": kind, "sessionId": "s", "data": junk},
    "codex": lambda kind, junk: {"timestamp": "2025-09-03T14:00:30.000Z", "type": kind,
                                 "payload": {"type": kind, "data": junk}},
    "gemini": lambda kind, junk: {"id": "zz-1", "timestamp": "2025-10-01T09:00:30Z",
                                  "type": kind, "content": junk},
}
KINDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=3, max_size=12).filter(
    lambda k: k not in {"user", "assistant", "gemini", "info", "error", "warning", "system",
                        "summary", "progress", "attachment", "compacted", "session_meta",
                        "turn_context", "response_item", "event_msg"})


FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=6)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LINE_FILES), st.data(), KINDS, FINITE_JSON)
def test_an_unknown_record_type_is_reported_never_fatal(
        tmp_path: Path, source: Path, data: st.DataObject, kind: str, junk: Any) -> None:
    """A newer tool version's record type: the import goes on and the report names it."""
    fmt = plan_path(source).report.format
    if fmt == "claude-code":
        fmt = data.draw(st.sampled_from(["claude-code", "claude-code-metadata"]), label="shape")
    lines = source.read_text().splitlines(keepends=True)
    # Line 0 too: a newer version's record can open the file, before anything known.
    at_line = data.draw(st.integers(0, len(lines)), label="at")
    record = UNKNOWN_RECORDS[fmt](kind, junk)
    lines.insert(at_line, json.dumps(record) + "\n")
    path = tmp_path / source.name
    path.write_text("".join(lines))
    plan = import_or_refuse(path)
    assert plan is not None, "an unknown record type refused the import"
    assert any(kind in what for what in plan.report.unmapped), plan.report.unmapped


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data(), st.lists(st.text(max_size=40), min_size=1, max_size=4))
def test_junk_lines_in_an_aider_history(tmp_path: Path, data: st.DataObject,
                                        junk: list[str]) -> None:
    source = FIXTURES / "aider" / ".aider.chat.history.md"
    lines = source.read_text().splitlines(keepends=True)
    at_line = data.draw(st.integers(0, len(lines)), label="at")
    lines[at_line:at_line] = [j.replace("\x00", "") + "\n" for j in junk]
    path = tmp_path / source.name
    path.write_text("".join(lines))
    import_or_refuse(path)


def _with_tool_calls(doc: Any, junk: Any) -> Any:
    """``doc`` with every ``toolCalls`` (and a model message without one) set to junk."""
    if isinstance(doc, list):
        return [_with_tool_calls(x, junk) for x in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: _with_tool_calls(v, junk) for k, v in doc.items()}
    if "toolCalls" in out or out.get("type") == "gemini":
        out["toolCalls"] = junk
    return out


@pytest.mark.parametrize("junk", [True, 1, "calls", {"id": "c"}], ids=repr)
@pytest.mark.parametrize("source", [d for d in DOCUMENTS + LINE_FILES if "gemini" in str(d)],
                         ids=lambda p: f"{p.parent.name}/{p.name[:16]}")
def test_gemini_tool_calls_of_any_shape_import_or_refuse(tmp_path: Path, source: Path,
                                                         junk: Any) -> None:
    """Found by the fuzz above: ``toolCalls: true`` crashed the reader of newer
    records' function parts with a bare TypeError instead of a refusal."""
    path = tmp_path / source.name
    if source.suffix == ".jsonl":
        lines = [_with_tool_calls(json.loads(x), junk) for x in source.read_text().splitlines()]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    else:
        path.write_text(json.dumps(_with_tool_calls(json.loads(source.read_text()), junk)))
    import_or_refuse(path)
