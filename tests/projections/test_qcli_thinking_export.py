"""A Q CLI save's assistant ``thinking`` is written back by ``export --as qcli``.

Newer Q CLI saves keep the model's reasoning (ReasoningContentForHistory) on the
assistant message; the import keeps it whole in the reasoning part's
``metadata.qcli.thinking``. The export wrote every other field back and dropped
this one. Property: any thinking on any assistant messages of a save comes back
as the same JSON, and messages without it get none.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.qcli import plan_qcli
from projections.qcli import export_qcli
from projections.qcli.timetravel import conversation_at
from tests.importers.support import FIXTURES, written
from tests.support.cli_run import run_cli, scratch_dir

PAIRS = FIXTURES / "qcli-v1.10-pairs.json"
JSON = dict[str, Any]

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | TEXT,
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(TEXT, inner, max_size=3), max_leaves=6)
# ReasoningContentForHistory's fields, any of them missing or null, and fields of
# later versions.
THINKING = st.fixed_dictionaries({}, optional={
    "text": st.none() | TEXT, "signature": st.none() | TEXT,
    "redacted_content": st.none() | st.lists(st.integers(0, 255), max_size=8),
    "model_id": st.none() | TEXT}).flatmap(
        lambda known: st.dictionaries(TEXT, VALUES, max_size=2).map(
            lambda extra: {**extra, **known}))


def _bodies(save: JSON) -> list[JSON]:
    """The variant bodies of every assistant message: of a v1.10 save's [user,
    assistant] pairs, or of today's {user, assistant, request_metadata} entries."""
    return [next(iter((e[1] if isinstance(e, list) else e["assistant"]).values()))
            for e in save["history"]]


def _with_thinking(thinking: list[JSON | None]) -> JSON:
    save: JSON = json.loads(PAIRS.read_text(encoding="utf-8"))
    for body, thought in zip(_bodies(save), thinking, strict=False):
        if thought is not None:
            body["thinking"] = thought
    return save


def _exported(save: JSON, where: Path) -> JSON:
    path = where / "save.json"
    path.write_text(json.dumps(save), encoding="utf-8")
    plan = plan_qcli(path)
    store = written(plan)
    return export_qcli(conversation_at(store, plan.sessions[0].id).state())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.none() | THINKING, min_size=1, max_size=4))
def test_thinking_comes_back_as_it_was_saved(thinking: list[JSON | None]) -> None:
    save = _with_thinking(thinking)
    with scratch_dir("qcli-thinking") as where:
        exported = _exported(copy.deepcopy(save), where)
    assert [b.get("thinking", "absent") for b in _bodies(exported)] == [
        b.get("thinking", "absent") for b in _bodies(save)]


def test_the_export_verb_writes_thinking_back(tmp_path: Path) -> None:
    thinking = {"text": "Read the README first.", "signature": "sig-1",
                "redacted_content": [], "model_id": "claude-sonnet-4"}
    save = _with_thinking([thinking, None])
    path = tmp_path / "save.json"
    path.write_text(json.dumps(save), encoding="utf-8")
    store = str(tmp_path / "s.db")
    run_cli(["import", str(path), "--store", store]).assert_clean()
    sid = plan_qcli(path).sessions[0].id
    done = run_cli(["export", store, "--session", sid, "--as", "qcli"])
    done.assert_clean()
    bodies = _bodies(json.loads(done.out))
    assert bodies[0]["thinking"] == thinking
    assert "thinking" not in bodies[1]
