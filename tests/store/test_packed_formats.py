"""Stores written by the release of packed payload format 1 (each delta its own
string; tests/fixtures/make_packed_v1.py) open, read, replay and verify with today's
code, and take appends that seal in today's format next to the old blocks (and raise
the store's number, which reads never do)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import events as ev
from engine.session import Session
from engine.store import blocks, open_store, packed
from engine.store import jsonl as jsonl_store
from engine.store import sqlite as sqlite_store
from engine.store.verify import verify
from tests.support.packed_stores import (
    check_reads,
    enc,
    jsonl_payload_formats,
    sqlite_payload_formats,
    store_number,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "packed-v1-stores"


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_store_of_packed_format_1_reads_replays_and_verifies(tmp_path: Path, kind: str) -> None:
    if kind == "sqlite":
        path = tmp_path / "store.db"
        shutil.copy(FIXTURE / "store.db", path)
        url = f"sqlite:///{path}"
        formats: Callable[[], set[int]] = functools.partial(sqlite_payload_formats, path)
    else:
        root = tmp_path / "jsonl"
        shutil.copytree(FIXTURE / "jsonl", root)
        url = f"jsonl:///{root}"
        formats = functools.partial(jsonl_payload_formats, root)
    assert formats() == {1}  # the fixture keeps its meaning: old payloads only
    old_number, new_number = ((3, sqlite_store.SCHEMA_VERSION) if kind == "sqlite"
                              else (2, jsonl_store.FORMAT_VERSION))
    assert store_number(url) == old_number
    store = open_store(url)
    try:
        want = check_reads(store, FIXTURE, kind)
        root_id = next(i.id for i in store.sessions() if i.parent is None)
        for deep in (True, False):
            report = verify(store, deep=deep)
            assert report.ok, report.problems
        assert store_number(url) == old_number  # reads never raise it
        # Appends seal in today's format beside the old blocks; all of it still reads.
        s = Session.open(store, root_id)
        m = s.start_message("assistant")
        part = s.add_text(m)
        for i in range(blocks.BLOCK_MAX + 300):
            s.text_delta(part, f"é{i} ")
        s.end_part(part)
        s.complete_message(m, finish="stop")
        assert formats() == {1, packed.FORMAT}
        assert store_number(url) == new_number  # the release before refuses it as newer
        after = list(store.read(root_id))
        assert enc(after[:len(want[root_id])]) == enc(want[root_id])
        assert "".join(e.delta for e in after[len(want[root_id]):]
                       if isinstance(e, ev.TextDelta)) == "".join(
            f"é{i} " for i in range(blocks.BLOCK_MAX + 300))
        for deep in (True, False):
            report = verify(store, deep=deep)
            assert report.ok, report.problems
    finally:
        store.close()
