"""Stores to view: the demo session, a fork of it, and a session whose log is hostile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from playwright.sync_api import Browser, sync_playwright

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import record_demo, stepping_clock
from tests.support.browser import chromium

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'


@attrs.frozen
class Sessions:
    demo: str
    fork: str
    fork_seq: int
    hostile: str


def record_hostile(store: Store) -> Session:
    """A session whose user text, tool name, input and output try to run script."""
    s = Session.create(store, clock=stepping_clock())
    s.user_message(f"please echo {IMG}")
    m = s.start_message("assistant")
    tool = s.add_tool(m, "call_1", "bash<b>bold</b>")
    s.tool_input_ready(tool, {"command": SCRIPT})
    s.start_tool(tool)
    s.complete_tool(tool, f"output: {SCRIPT}", title=IMG)
    s.complete_message(m, finish="stop")
    return s


def fill(store: Store) -> Sessions:
    demo = record_demo(store)
    fork_seq = 41
    fork = demo.fork(at=fork_seq)
    hostile = record_hostile(store)
    return Sessions(demo.id, fork.id, fork_seq, hostile.id)


@pytest.fixture
def viewer_store(tmp_path: Path) -> Iterator[tuple[Store, Sessions]]:
    store = open_store(f"sqlite:///{tmp_path / 'view.db'}")
    try:
        yield store, fill(store)
    finally:
        store.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw, chromium(pw) as b:
        yield b
