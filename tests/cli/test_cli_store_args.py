"""Every store argument of every command, plug-ins and nested verbs included, reads a
bare path as ``convlog verify my.db`` does (the class of defect: ``import --store my.db``
was "unsupported store URL" while ``verify my.db`` worked)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cli.app import all_commands, build_parser
from engine.cli.args import store_url
from tests.importers.support import FIXTURES
from tests.support.cli_run import run_cli


def _store_actions(parser: argparse.ArgumentParser,
                   name: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if action.dest == "store":
            yield name, action
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _store_actions(sub, f"{name} {sub_name}".strip())


REPO = Path(__file__).resolve().parents[2]
STORE_ACTIONS = list(_store_actions(build_parser(all_commands()), ""))


def test_the_walk_finds_the_store_options() -> None:
    names = {name for name, _ in STORE_ACTIONS}
    assert {"import", "demo", "verify", "mailbox export"} <= names


@pytest.mark.parametrize(("name", "action"), STORE_ACTIONS, ids=[n for n, _ in STORE_ACTIONS])
def test_every_store_argument_takes_a_bare_path(name: str, action: argparse.Action) -> None:
    assert action.type is store_url, name


def test_import_into_a_bare_path_then_read_it_back(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_cli(["import", str(FIXTURES / "qcli-v1.10-pairs.json"), "--store", "mine.db"])
    done.assert_clean()
    assert done.code == 0
    assert (tmp_path / "mine.db").is_file()
    listed = run_cli(["sessions", "mine.db"])
    assert (listed.code, "from qcli" in listed.out) == (0, True)


def test_a_path_that_is_not_utf8_prints_back_as_its_bytes(tmp_path: Path) -> None:
    # With a strict UTF-8 stdout (LANG=en_US.UTF-8), printing a path Python holds as lone
    # surrogates failed as an internal error after the work was done.
    store = os.fsencode(tmp_path) + b"/demo-\xff.db"
    done = subprocess.run([sys.executable, "-m", "engine", "demo", "--store", store],
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"},
                          cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    assert b"demo-\xff.db" in done.stdout
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("typed", ["nosuch.db", "./nosuch.db", "sub/../nosuch.db"])
def test_a_missing_bare_path_is_named_as_the_file_it_is(typed: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # It read "sqlite:///./nosuch.db is relative ...; sqlite:////./nosuch.db would be
    # absolute": URL slash advice for someone who typed a path.
    monkeypatch.chdir(tmp_path)
    done = run_cli(["show", typed])
    done.assert_clean()
    assert done.code == 2
    assert done.err.startswith(f"convlog show: no such store: sqlite:///{tmp_path}/nosuch.db")
    assert "relative" not in done.err
    assert not (tmp_path / "nosuch.db").exists()
