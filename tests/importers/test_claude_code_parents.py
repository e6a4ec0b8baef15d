"""Whatever the ``parentUuid`` links of a Claude Code file say (a root, a line that is not
in the file, a later line, the line itself, a cycle), every message line's text is
imported: no line is unreachable from a session. Before, a cycle (or a line naming
itself) left its lines under no root, and the file imported as "no session found"."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

ENV = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s",
       "version": "2.1.100"}


def _line(i: int, parent: str | None) -> dict[str, object]:
    base = {**ENV, "uuid": f"l{i}", "parentUuid": parent,
            "timestamp": f"2026-09-01T10:00:{i:02d}.000Z"}
    if i % 2 == 0:
        return {**base, "type": "user", "message": {"role": "user", "content": f"ask {i}"}}
    return {**base, "type": "assistant", "message": {
        "id": f"msg_{i}", "role": "assistant", "model": "m", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": f"answer {i}"}]}}


def _texts(path: Path) -> set[str]:
    plan = plan_path(path)
    store = written(plan)
    return {p.text for s in plan.sessions for m in at(store, s.id).messages()
            for p in m.parts if isinstance(p, v.TextPart)}


def test_a_line_naming_itself_and_a_two_line_cycle_import(tmp_path: Path) -> None:
    for links in (["l0", "l0"], ["l1", "l0"]):
        path = Path(tempfile.mkdtemp(dir=tmp_path)) / "s.jsonl"
        path.write_text("".join(json.dumps(_line(i, p)) + "\n" for i, p in enumerate(links)))
        plan = plan_path(path)
        assert "parentUuid forms a cycle: its earliest line starts a new chain" in \
            plan.report.unmapped
        assert _texts(path) == {"ask 0", "answer 1"}


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(1, 8).flatmap(lambda n: st.lists(
    st.none() | st.just("not-in-the-file") | st.integers(0, n - 1).map(lambda j: f"l{j}"),
    min_size=n, max_size=n)))
def test_every_line_is_imported_whatever_its_parent_links(
        tmp_path: Path, links: list[str | None]) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "s.jsonl"
    path.write_text("".join(json.dumps(_line(i, p)) + "\n" for i, p in enumerate(links)))
    expected = {f"ask {i}" if i % 2 == 0 else f"answer {i}" for i in range(len(links))}
    assert _texts(path) == expected
