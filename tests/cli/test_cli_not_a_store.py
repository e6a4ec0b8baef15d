"""A path that holds something other than a convlog store: exit 5, and left as it was.

Exit 5 (``unreadable``, docs/cli.md) is "the store's files cannot be read as a store
at all"; 2 is for arguments, including a store that is not there. A bare path that
is a file was already 5. Two cases were not:

- another program's SQLite database was taken for a new store: every command, the
  reading ones too, created convlog's tables inside it (``sessions`` then listed
  none, exit 0);
- a ``jsonl://`` URL naming a regular file was "no such store" (exit 2), where a
  ``sqlite://`` URL naming a directory is 5.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_UNREADABLE, EXIT_USAGE
from tests.support.cli_run import run_cli, scratch_dir

SID = "0190a000-0000-7000-8000-00000000f002"
STARTED = (b'{"type": "message.started", "role": "user", '
           b'"message_id": "0190a000-0000-7000-8000-00000000f001"}\n')


def commands(place: str) -> list[tuple[list[str], bytes]]:
    return [(["sessions", place], b""), (["verify", place], b""),
            (["verify", place, "--fast"], b""), (["tail", place], b""),
            (["anchor", place], b""), (["show", place, "--session", SID], b""),
            (["export", place, "--session", SID], b""),
            (["append", place, "--session", SID], STARTED)]


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


# Another program's tables, convlog's own names among them; its meta table (if any)
# has no schema row: convlog's always has one.
FOREIGN = st.lists(st.sampled_from(["t", "notes", "meta", "sessions", "blocks", "log",
                                    "ids", "names", "snapshots"]),
                   min_size=1, max_size=4, unique=True)
META_ROWS = st.lists(st.tuples(st.sampled_from(["chain", "key", "version", "owner"]),
                               st.text(max_size=8)), max_size=3, unique_by=lambda r: r[0])


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tables=FOREIGN, meta=META_ROWS, bare=st.booleans())
def test_another_programs_sqlite_database_is_exit_5_and_never_written(
        tables: list[str], meta: list[tuple[str, str]], bare: bool) -> None:
    with scratch_dir("not-a-store") as root:
        db = root / "app.db"
        con = sqlite3.connect(db)
        for table in tables:
            con.execute(f"CREATE TABLE {table} (key text, value text)")
        if "meta" in tables:
            con.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        con.commit()
        con.close()
        before = _files(root)
        place = str(db) if bare else f"sqlite:///{db}"
        for argv, stdin in commands(place):
            outcome = run_cli(argv, stdin)
            outcome.assert_clean()
            assert outcome.code == EXIT_UNREADABLE, (argv, outcome)
            assert len(outcome.err.splitlines()) == 1, outcome
        assert _files(root) == before  # not a table, not a journal added


@pytest.mark.parametrize("content", [b"", b"a note\n", b'{"type": "user"}\n'])
def test_a_jsonl_url_naming_a_file_is_exit_5(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    for argv, stdin in commands(f"jsonl:///{path}"):
        outcome = run_cli(argv, stdin)
        outcome.assert_clean()
        assert outcome.code == EXIT_UNREADABLE, (argv, outcome)
        # (A writer takes an empty file for a place to start a store, and fails there.)
        assert (argv[0] == "append" and not content) \
            or "not a convlog jsonl store" in outcome.err, outcome
    assert path.read_bytes() == content


def test_a_directory_without_a_store_is_still_no_such_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    outcome = run_cli(["sessions", f"jsonl:///{tmp_path}"])
    assert outcome.code == EXIT_USAGE, outcome
    assert "no such store" in outcome.err, outcome
