"""Claude Code 2.1.2xx's metadata records (no uuid: ``atis-latch``, ``mode``,
``permission-mode``, ``cost-state``, ...) before the conversation: the file is still
recognised as Claude Code, and the records are reported, never fatal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.detect import detect, plan_path
from engine.store import MemoryStore
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

FOLDER = FIXTURES / "claude-code-metadata-first"
SESSION = next(FOLDER.glob("*.jsonl"))
METADATA = ("atis-latch", "permission-mode", "mode", "frame-link", "file-history-delta",
            "history-suppression", "cost-state", "agent-setting")


def _conversation(store: MemoryStore, sid: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for m in at(store, sid).messages():
        kinds = [p.TAG if not isinstance(p, v.ToolPart) else f"tool:{p.state.TAG}"
                 for p in m.parts]
        out.append((m.info.role, kinds))
    return out


def test_a_file_that_opens_with_metadata_records_is_claude_code(tmp_path: Path) -> None:
    assert detect(SESSION) == "claude-code"
    assert detect(FOLDER) == "claude-code"
    mixed = tmp_path / "collected"  # a folder of several formats: read file by file
    mixed.mkdir()
    shutil.copy(SESSION, mixed / SESSION.name)
    shutil.copy(FIXTURES / "qcli-v1.14-objects.json", mixed / "save.json")
    plan = plan_path(mixed)
    assert plan.report.format == "claude-code+qcli"
    assert not any("no importer recognises" in k for k in plan.report.unmapped)


def test_the_conversation_imports_whole_and_each_metadata_record_is_reported() -> None:
    plan = plan_path(SESSION)
    store = written(plan)
    (session,) = plan.sessions
    assert _conversation(store, session.id) == [
        ("user", ["text"]), ("assistant", ["tool:completed"]), ("assistant", ["text"])]
    for kind in METADATA:
        assert any(f"'{kind}'" in what for what in plan.report.unmapped), kind


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=16).filter(
        lambda k: k not in ("user", "assistant", "system", "summary", "progress")),
    st.dictionaries(st.sampled_from(["sessionId", "v", "cause", "mode", "atis"]),
                    st.none() | st.text(max_size=8) | st.integers(), max_size=3)),
    min_size=1, max_size=6))
def test_any_run_of_new_metadata_records_before_the_conversation(
        tmp_path: Path, records: list[tuple[str, dict[str, object]]]) -> None:
    """A newer version's record types (uuid-less, any fields) in front of the
    conversation: still detected, the same conversation, each type reported."""
    lines = SESSION.read_text().splitlines(keepends=True)
    conversation = [x for x in lines if '"uuid"' in x]
    head = [json.dumps({"type": kind, **fields}) + "\n" for kind, fields in records]
    path = tmp_path / SESSION.name
    path.write_text("".join(head + conversation))
    assert detect(path) == "claude-code"
    plan = plan_path(path)
    store = written(plan)
    assert len(plan.sessions) == 1
    assert [m[0] for m in _conversation(store, plan.sessions[0].id)] == [
        "user", "assistant", "assistant"]
    for kind, _ in records:
        assert any(f"'{kind}'" in what for what in plan.report.unmapped), kind
