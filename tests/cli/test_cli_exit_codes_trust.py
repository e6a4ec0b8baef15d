"""Exit codes that told the wrong story (issue 27 item 8), each now the documented
code and one line: a busy write lock is exit 7 (not "damaged", 4), a `--key-file`
given for an unkeyed store is exit 2 (not "tampering"), Ctrl-C that lands while
`append` writes lets the committed batch be reported (exit 0, never an empty
session left), `append` of nothing still checks that the store is one, and a path
too long for the file system is exit 2 on every reading command.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.cli import EXIT_BUSY, EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE
from engine.session import Session
from engine.store import open_store, sqlite
from tests.support.cli_run import run_cli

SID = "0194d1e0-0000-7000-8000-00000000e027"
LINE = json.dumps({"type": "message.started", "role": "assistant",
                   "message_id": "0194d1e0-0000-7000-8000-00000000e028"}).encode() + b"\n"


def test_a_busy_write_lock_is_its_own_exit_code(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "b.db"
    assert run_cli(["append", str(db), "--session", SID], LINE).code == EXIT_OK
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer's long window
    try:
        line = LINE.replace(b"e028", b"e029")
        done = run_cli(["append", str(db), "--session", SID], line)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    done.assert_clean()
    assert done.code == EXIT_BUSY, done
    assert "another writer held the write lock" in done.err
    assert len(done.err.splitlines()) == 1
    assert run_cli(["verify", str(db)]).code == EXIT_OK


def test_a_key_for_an_unkeyed_store_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "u.db"
    assert run_cli(["append", str(db), "--session", SID], LINE).code == EXIT_OK
    key = tmp_path / "key"
    key.write_bytes(b"k" * 24)
    for verb in ("verify", "anchor"):
        done = run_cli([verb, str(db), "--key-file", str(key)])
        done.assert_clean()
        assert done.code == EXIT_USAGE, done
        assert "created without a key" in done.err
        assert len(done.err.splitlines()) == 1  # no "also:" line


@pytest.mark.parametrize("when", ["after create_session", "after the append"])
def test_ctrl_c_while_append_writes_reports_the_committed_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """SIGINT delivered at the step that used to cut `append` short: the batch is
    committed and reported, and a new session is never left empty."""
    db = tmp_path / "i.db"
    name = "create" if when == "after create_session" else "append"
    real = getattr(Session, name)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(Session, name, interrupted if name == "append"
                        else classmethod(lambda cls, *a, **k: interrupted(*a, **k)))
    done = run_cli(["append", str(db), "--session", SID], LINE)
    done.assert_clean()
    assert done.code == EXIT_OK, done
    assert done.out.startswith("appended 1 event(s)")
    store = open_store(f"sqlite:///{db}", create=False)
    try:
        assert store.version(SID) == 1
    finally:
        store.close()


def test_append_of_nothing_still_checks_the_store(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database\n" * 50)
    done = run_cli(["append", str(junk), "--session", SID], b"")
    done.assert_clean()
    assert done.code == EXIT_UNREADABLE, done
    assert junk.read_text() == "not a database\n" * 50
    fresh = tmp_path / "none.db"
    assert run_cli(["append", str(fresh), "--session", SID], b"").code == EXIT_OK
    assert not fresh.exists()  # still creates nothing


@pytest.mark.parametrize("verb", ["show", "verify", "tail", "anchor", "sessions", "append"])
@pytest.mark.parametrize("form", ["path", "url"])
def test_a_path_too_long_is_one_line_exit_2(verb: str, form: str, tmp_path: Path) -> None:
    place = tmp_path / ("a" * 300 + ".db")
    store = str(place) if form == "path" else f"sqlite:///{place}"
    argv = [verb, store] + (["--session", SID] if verb == "append" else [])
    done = run_cli(argv, LINE)
    done.assert_clean()
    assert done.code == EXIT_USAGE, done
    assert "File name too long" in done.err
    assert len(done.err.splitlines()) == 1
