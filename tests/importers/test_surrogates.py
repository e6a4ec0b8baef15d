"""Half a character: JavaScript strings are UTF-16, so a Node.js tool (Claude Code, Gemini
CLI, OpenCode) that cuts a string mid-emoji writes a lone surrogate escape such as
``"\\ud83d"``. msgspec refuses it and no event may hold it: a real transcript with one
was "invalid JSON" (or, on its first line, "not a transcript"), with nothing imported.
Now it reads as U+FFFD, and the report says where. File names that are not UTF-8 are
the same class (Python keeps their bytes as lone surrogates)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.base import LONE_SURROGATE, ImportInputError
from engine.importers.detect import plan_path
from tests.importers.support import FIXTURES, written
from tests.importers.test_fuzz_junk import ALL_FILES, DOCUMENTS, paths, put
from tests.support.cli_run import run_cli

TEXT_FILES = [f for f in ALL_FILES if f.suffix in (".jsonl", ".json")]


def _strings(value: Any) -> list[tuple[Any, ...]]:
    found = []
    for where in paths(value):
        target = value
        for step in where:
            target = target[step]
        if isinstance(target, str):
            found.append(where)
    return found


def _events(path: Path) -> tuple[list[Any], list[str]] | None:
    """The events an import of ``path`` writes and its report's items, or None if refused."""
    try:
        plan = plan_path(path)
        store = written(plan)
    except ImportInputError:
        return None
    return ([list(store.read(s.id)) for s in store.sessions()], list(plan.report.unmapped))


def _write(path: Path, docs: list[Any], lines: bool) -> None:
    if lines:  # json.dumps writes a lone surrogate as its \\u escape, as JSON.stringify does
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    else:
        path.write_text(json.dumps(docs[0]))


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(TEXT_FILES), st.data(), st.sampled_from(["\ud83d", "\udc00", "\udfff"]))
def test_a_lone_surrogate_reads_as_the_replacement_character(
        tmp_path: Path, source: Path, data: st.DataObject, half: str) -> None:
    lines = source not in DOCUMENTS
    docs = ([json.loads(x) for x in source.read_text().splitlines()] if lines
            else [json.loads(source.read_text())])
    n = data.draw(st.integers(0, len(docs) - 1), label="line")
    where = data.draw(st.sampled_from(_strings(docs[n]) or [()]), label="string")
    if not where:
        return
    outcomes = []
    for piece in (half, "\ufffd"):
        variant = json.loads(json.dumps(docs))
        target = variant[n]
        for step in where:
            target = target[step]
        variant[n] = put(variant[n], where, target + piece)
        (tmp_path / piece.encode("utf-16", "surrogatepass").hex()).mkdir(exist_ok=True)
        path = tmp_path / piece.encode("utf-16", "surrogatepass").hex() / source.name
        _write(path, variant, lines)
        outcomes.append(_events(path))
    lone, replaced = outcomes
    assert (lone is None) == (replaced is None)
    if lone is not None and replaced is not None:
        assert lone[0] == replaced[0]  # the same log, event for event
        assert LONE_SURROGATE in lone[1]


def test_a_claude_code_first_line_with_half_an_emoji_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None,
                                "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z",
                                "message": {"role": "user", "content": "cut \ud83d"}}) + "\n")
    imported = _events(path)
    assert imported is not None
    assert LONE_SURROGATE in imported[1]


def test_a_file_name_that_is_not_utf8_imports(tmp_path: Path) -> None:
    name = tmp_path / (b"save-\xff.json").decode("utf-8", "surrogateescape")
    shutil.copy(FIXTURES / "qcli-v1.14-objects.json", name)
    url = f"sqlite:///{tmp_path}/s.db"
    done = run_cli(["import", str(name), "--store", url])
    done.assert_clean()
    assert done.code == 0
    assert "save-\ufffd.json" in done.out
    listed = run_cli(["sessions", url])
    assert "from qcli save-\ufffd.json" in listed.out
