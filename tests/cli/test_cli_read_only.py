"""Every reading command works on a store its user can only read (a root-owned 0444
SQLite file or JSONL directory, as an unprivileged user); every writing command
fails with one line, exit 2, and changes nothing. The defect: `show` and `verify`
were exit 5 "attempt to write a readonly database", and JSONL reads exit 2
"Permission denied: 'jl/lock'"."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_run import run_cli
from tests.support.read_only import CAN_WRITE, CLI, as_reader, make_read_only, shared_dir, state

NEW = "0194d1e0-0000-7000-8000-00000000d000"
EVENT = json.dumps({"type": "message.started", "role": "assistant",
                    "message_id": "0194d1e0-0000-7000-8000-00000000d001"}) + "\n"


@pytest.fixture(scope="module", params=["sqlite", "jsonl"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[Path, str, str]]:
    """A demo store made read-only: (its directory, its path, its first session)."""
    with shared_dir() as place:
        path = place / ("demo.db" if request.param == "sqlite" else "jl")
        assert run_cli(["demo", "--store", f"{request.param}:///{path}"]).code == 0
        listed = run_cli(["sessions", str(path)])
        make_read_only(place)
        assert as_reader(CAN_WRITE, str(path)).stdout.strip() == "False"
        yield place, str(path), listed.out.split()[0]


def _reader(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return as_reader(CLI, *argv, stdin=stdin)


READS = [
    ["show", "{path}"],
    ["show", "{path}", "--session", "{sid}", "--at", "3"],
    ["verify", "{path}"],
    ["verify", "--fast", "{path}"],
    ["sessions", "{path}"],
    ["export", "{path}", "--session", "{sid}"],
    ["export", "{path}", "--session", "{sid}", "--as", "events"],
    ["tail", "{path}"],
    ["diff", "{path}", "--session", "{sid}", "1", "5"],
    ["anchor", "{path}"],
]


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a[:2]) for a in READS])
def test_a_read_command_works_on_a_read_only_store(store: tuple[Path, str, str],
                                                   argv: list[str]) -> None:
    place, path, sid = store
    before = state(place)
    done = _reader(*(a.format(path=path, sid=sid) for a in argv))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout
    assert state(place) == before


WRITES = [
    (["fork", "{path}", "--session", "{sid}", "--at", "3"], ""),
    (["append", "{path}", "--session", NEW], EVENT),
]


@pytest.mark.parametrize(("argv", "stdin"), WRITES, ids=[a[0] for a, _ in WRITES])
def test_a_write_to_a_read_only_store_is_one_line_exit_2_nothing_changed(
        store: tuple[Path, str, str], argv: list[str], stdin: str) -> None:
    place, path, sid = store
    before = state(place)
    done = _reader(*(a.format(path=path, sid=sid) for a in argv), stdin=stdin)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    line, = done.stderr.splitlines()
    assert line.startswith(f"convlog {argv[0]}: cannot write "), line
    assert "the store is read-only" in line
    assert path in line
    assert state(place) == before
