"""Stores to view: the demo session, a fork of it, and a session whose log is hostile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from playwright.sync_api import Browser, sync_playwright

from engine import events as ev
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.demo import record_demo, stepping_clock
from projections.mailbox import Mailbox
from tests.support.browser import NoBrowser, launch
from tests.support.pgserver import IN_CI

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'
B = "<b>bold</b>"


@attrs.frozen
class Sessions:
    demo: str
    fork: str
    fork_seq: int
    hostile: str


def record_hostile(store: Store) -> Session:
    """An imported session where every string the page shows tries to run script: the
    import's source, agent and model names, texts, reasoning, tool names, titles,
    inputs, outputs, errors, approval reasons, files, subtasks, retries, patches."""
    s = Session.create(store, clock=stepping_clock())
    s.append([ev.SessionImported(format=f"claude-code{B}", source=f"{SCRIPT}.jsonl",
                                 original_id=IMG, tool_version=B, metadata={"t": SCRIPT})])
    model = ev.ModelRef(provider_id=B, model_id=f"model{IMG}")
    s.user_message(f"please echo {IMG}", agent=f"agent{B}", model=model)
    m = s.start_message("assistant", agent=f"agent{B}", model=model)
    s.start_step(m, snapshot=IMG)
    thought = s.add_reasoning(m)
    s.reasoning_delta(thought, f"thinking {SCRIPT}")
    s.end_part(thought)
    s.add_file(m, f"text/{B}", f"file:///{IMG}", filename=f"{IMG}.txt")
    tool = s.add_tool(m, "call_1", "bash<b>bold</b>")
    s.tool_input_ready(tool, {"command": SCRIPT})
    s.request_approval(tool, reason=f"because {IMG}")
    s.approve(tool, reason=f"yes {SCRIPT}")
    s.start_tool(tool)
    s.complete_tool(tool, f"output: {SCRIPT}", title=IMG)
    failing = s.add_tool(m, "call_2", f"grep{IMG}", raw=SCRIPT)
    s.tool_input_ready(failing, {"pattern": IMG})
    s.start_tool(failing)
    s.fail_tool(failing, f"error: {SCRIPT}")
    pending = s.add_tool(m, "call_3", "write", raw=f"{{{SCRIPT}")
    s.tool_input_delta(pending, IMG)
    s.add_subtask(m, f"prompt {SCRIPT}", f"description {IMG}", f"agent{B}")
    s.add_retry(m, 1, ev.MessageError(kind="api", message=f"retry {SCRIPT}"))
    s.add_patch(m, IMG, [f"{SCRIPT}.py"])
    s.finish_step(m, f"stop{B}", cost=0.001, tokens=ev.Tokens(input=1, output=2))
    s.abort(m, reason=f"aborted {SCRIPT}")
    return s


def record_mailbox(store: Store) -> Mailbox:
    """A project whose agents sent, fetched, read and answered messages."""
    mb = Mailbox(store, "webapp", clock=stepping_clock())
    mb.create_project("/work/webapp", name="webapp")
    for agent, name in (("planner", "Planner"), ("coder", "Coder"), ("tester", "Tester")):
        mb.register_agent(agent, name=name)
        mb.assign(agent)
    planner, coder, tester = (mb.authenticate(a) for a in ("planner", "coder", "tester"))
    ask = mb.send(planner, "coder", "Please make parse() accept semicolons.",
                  related_task_id="T-12")
    mb.pending(coder)
    mb.reply(coder, ask.id, "Done: parse() splits on both separators now.")
    mb.broadcast(planner, "Release candidate at 16:00; please finish by then.")
    mb.send(tester, "coder", "test_parse_quoted fails on the new branch.")
    return mb


def fill(store: Store) -> Sessions:
    demo = record_demo(store)
    fork_seq = 41
    fork = demo.fork(at=fork_seq)
    hostile = record_hostile(store)
    record_mailbox(store)
    return Sessions(demo.id, fork.id, fork_seq, hostile.id)


@pytest.fixture
def viewer_store(tmp_path: Path) -> Iterator[tuple[Store, Sessions]]:
    store = open_store(f"sqlite:///{tmp_path / 'view.db'}")
    try:
        yield store, fill(store)
    finally:
        store.close()


# Package scope, not session: while Playwright's sync API is open, its event loop runs
# in this thread, and any later test calling asyncio.run() would fail. The loop ends
# with this package (tests/viewer/test_isolation.py runs an asyncio test after it).
#
# Without a chromium the browser tests skip, saying how to install one, except with
# CI=true, where they must run: there a missing browser fails them.
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        try:
            b = launch(pw)
        except NoBrowser as exc:
            if IN_CI:
                pytest.fail(f"CI=true but {exc}")
            pytest.skip(str(exc))
        try:
            yield b
        finally:
            b.close()
