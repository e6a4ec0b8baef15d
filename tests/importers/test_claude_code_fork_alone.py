"""A Claude Code ``--fork-session`` file imported without its original: nothing in it
names the original but its compaction summary ("read the full transcript at:
…/<original>.jsonl"). It stays a main session holding the copied lines (then exactly the
events the fork has in its folder), and the report says what it is and how to import it
as a fork; with the original in the import, no such note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from engine.importers.detect import plan_path

REAL = (Path(__file__).resolve().parent.parent / "fixtures" / "real-cli" /
        "claude-code-2.1.197" / "transcripts" / "-home-dev-work")
FORK = "41412e76-f63e-4868-8ec8-c50b89f7df70.jsonl"
ORIGINAL = "63214ce2-a700-4192-8677-b214777cfa96"
NOTE = "names another session's transcript"


def _notes(path: Path) -> dict[str, list[int | str]]:
    report = plan_path(path).report
    return {k: v.lines for k, v in report.unmapped.items() if NOTE in k}


def test_the_fork_file_alone_says_it_copies_its_original() -> None:
    notes = _notes(REAL / FORK)
    assert list(notes) == [next(k for k in notes if f"{ORIGINAL}.jsonl" in k)]
    assert list(notes.values()) == [[5]]  # the compaction summary's line
    assert [s.kind for s in plan_path(REAL / FORK).sessions] == ["main"]


def test_with_its_original_there_is_no_note(tmp_path: Path) -> None:
    assert _notes(REAL) == {}
    assert _notes(REAL / f"{ORIGINAL}.jsonl") == {}  # its summary names its own file


def test_a_summary_naming_its_own_session_is_no_copy(tmp_path: Path) -> None:
    lines = (REAL / FORK).read_text().splitlines()
    own = [json.dumps({**json.loads(x), "sessionId": ORIGINAL}) if x.strip() else x
           for x in lines]
    path = tmp_path / "resumed.jsonl"
    path.write_text("\n".join(own) + "\n")
    assert _notes(path) == {}
    shutil.copy(REAL / FORK, tmp_path / FORK)
    assert len(_notes(tmp_path / FORK)) == 1
