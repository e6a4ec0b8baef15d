"""Long strings are clipped and read back by line; the mailbox and windows over HTTP."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine.session import Session
from engine.store import MemoryStore
from engine.store.base import Store
from projections.mailbox import Mailbox
from projections.mailbox.mailbox import MAILBOX_SESSION
from projections.serve.app import create_app
from projections.serve.state import (
    HEAD_LINES,
    LINE_CHARS,
    LONG_CHARS,
    LONG_LINES,
    MAX_COUNT,
    Viewer,
    clip_message,
    is_long,
)
from projections.timetravel import at
from tests.support.browser import LOOPBACK
from tests.viewer.conftest import Sessions

# Text a tool can output: no newline inside a line, and no lone surrogate (the door refuses
# those before the viewer could ever see them).
line_chars = st.characters(codec="utf-8", blacklist_characters="\n")
lines_of = st.lists(st.text(alphabet=line_chars, max_size=60), min_size=1, max_size=400)


def tool_session(output: str) -> tuple[MemoryStore, str, int, tuple[str, str]]:
    store = MemoryStore()
    s = Session.create(store)
    m = s.start_message("assistant")
    tool = s.add_tool(m, "call", "bash")
    s.tool_input_ready(tool, {})
    s.start_tool(tool)
    seq = s.complete_tool(tool, output)
    return store, s.id, seq, tool


@settings(max_examples=40, deadline=None)
@given(lines_of, st.integers(0, 300))
def test_a_long_output_reads_back_line_by_line(drawn: list[str], pad: int) -> None:
    lines = ["$ make", *drawn, *(f"pad {i}" for i in range(pad))]
    output = "\n".join(lines)
    store, sid, seq, (mid, pid) = tool_session(output)
    viewer = Viewer(store)
    (message,) = viewer.state(sid, seq)["messages"]
    part = message["parts"][0]
    shown = part["state"]["output"]
    if not is_long(output):
        assert shown == output
        assert "clipped" not in part
        return
    assert part["clipped"] == {"output": len(lines)}
    assert shown.split("\n") == lines[:HEAD_LINES]
    got: list[str] = []
    for first in range(0, len(lines), 97):  # pages of any size put the string back
        page = viewer.lines(sid, seq, (mid, pid, "output"), first=first, count=97)
        assert page["total"] == len(lines)
        got += page["lines"]
    assert got == lines


def test_clipping_cuts_long_lines_and_leaves_short_messages_alone() -> None:
    one_line = "x" * (LONG_CHARS + 5)
    assert is_long(one_line)
    assert not is_long("y\n" * (LONG_LINES - 1))
    message: dict[str, Any] = {"info": {}, "parts": [
        {"type": "text", "id": "p1", "text": one_line},
        {"type": "text", "id": "p2", "text": "short"}]}
    clipped = clip_message(message)
    left = LONG_CHARS + 5 - LINE_CHARS
    assert clipped["parts"][0]["text"] == "x" * LINE_CHARS + f"… (+{left} chars)"
    assert clipped["parts"][0]["clipped"] == {"text": 1}
    assert clipped["parts"][1] is message["parts"][1]
    assert message["parts"][0]["text"] == one_line  # the answer is a copy
    short = {"info": {}, "parts": [{"type": "text", "id": "p", "text": "hi"}]}
    assert clip_message(short) is short


def test_lines_over_http() -> None:
    output = "\n".join(f"row {i}" for i in range(LONG_LINES * 3))
    mem, sid, seq, (mid, pid) = tool_session(output)
    c = TestClient(create_app(mem), base_url=LOOPBACK)
    q: dict[str, str | int] = {"seq": seq, "message": mid, "part": pid, "field": "output",
                               "from": 590, "count": 50}
    got = c.get(f"/api/sessions/{sid}/lines", params=q).json()
    assert got == {"total": 600, "first": 590, "lines": [f"row {i}" for i in range(590, 600)]}
    bads: list[dict[str, str | int]] = [{"field": "title"}, {"part": "nope"}, {"seq": 1}]
    for bad in bads:
        r = c.get(f"/api/sessions/{sid}/lines", params={**q, **bad})
        assert r.status_code == 400, bad


def test_windows_of_any_size_up_to_a_cap(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = TestClient(create_app(store), base_url=LOOPBACK)
    full = at(store, s.demo).to_json()
    for start, count in ((0, 1), (1, 1), (0, 2), (0, 500)):
        got = c.get(f"/api/sessions/{s.demo}/state",
                    params={"seq": store.version(s.demo), "start": start, "count": count,
                            "marks": 0}).json()
        assert got["window"] == min(count, MAX_COUNT)
        assert got["messages"] == full[got["start"]:got["start"] + got["window"]]
        assert got["marks"] is None


def test_the_mailbox_over_the_viewers_api() -> None:
    store = MemoryStore()
    c = TestClient(create_app(store, public_mailbox=True), base_url=LOOPBACK)
    assert c.get("/api/mailbox").json()["present"] is False
    assert MAILBOX_SESSION not in {i.id for i in store.sessions()}  # looking wrote nothing
    mb = Mailbox(store, "p1")
    mb.create_project("/w", name="one")
    for a in ("a", "b", "c"):
        mb.register_agent(a, name=a.upper())
        mb.assign(a)
    ta, tb = mb.authenticate("a"), mb.authenticate("b")
    first = mb.send(ta, "b", "question")
    reply = mb.reply(tb, first.id, "answer")
    again = mb.reply(ta, reply.id, "thanks")
    other = mb.broadcast(tb, "to all")
    mb.unassign("c")
    summary = c.get("/api/mailbox").json()
    assert summary["present"] is True
    assert summary["projects"] == [{"id": "p1", "name": "one", "working_directory": "/w",
                                    "messages": 4, "agents": 2}]
    got = c.get("/api/mailbox/p1").json()
    assert got["version"] == store.version(MAILBOX_SESSION)
    assert [(a["id"], a["assigned"]) for a in got["agents"]] == [
        ("a", True), ("b", True), ("c", False)]
    view = mb.refresh()
    assert {a["id"]: a["unread"] for a in got["agents"]} == {
        a: len(view.unread("p1", a)) for a in "abc"}
    rows = {m["id"]: m for m in got["messages"]}
    assert [m["id"] for m in got["messages"]] == [first.id, reply.id, again.id, other.id]
    assert {m: rows[m]["thread"] for m in rows} == {
        first.id: first.id, reply.id: first.id, again.id: first.id, other.id: other.id}
    assert rows[first.id]["receipts"] == {"b": "read"}  # answering marks read
    assert rows[other.id]["receipts"] == view.receipts(other.id)
    only_c = c.get("/api/mailbox/p1", params={"agent": "c"}).json()
    assert [m["id"] for m in only_c["messages"]] == [other.id]
    paged = c.get("/api/mailbox/p1", params={"before": again.cursor, "limit": 1}).json()
    assert [m["id"] for m in paged["messages"]] == [reply.id]
    assert paged["total"] == 2
    assert c.get("/api/mailbox/nope").status_code == 404


def test_reading_a_mailbox_project_needs_its_token() -> None:
    """Issue 29: without a token, /api/mailbox/{project} showed every project's
    messages and receipts to anything on the machine."""
    store = MemoryStore()
    c = TestClient(create_app(store), base_url=LOOPBACK)
    for pid in ("p1", "p2"):
        mb = Mailbox(store, pid)
        mb.create_project("/w")
        for a in (f"{pid}-a", f"{pid}-b"):
            mb.register_agent(a)
            mb.assign(a)
        mb.send(mb.authenticate(f"{pid}-a"), f"{pid}-b", f"secret of {pid}")
    t1 = Mailbox(store, "p1").authenticate("p1-a")
    assert c.get("/api/mailbox/p1").status_code == 401
    assert c.get("/api/mailbox/p1").json()["error"] == "invalid_session_token"
    assert c.get("/api/mailbox/p2", headers={"Authorization": f"Bearer {t1}"}).status_code == 401
    got = c.get("/api/mailbox/p1", headers={"Authorization": f"Bearer {t1}"})
    assert [m["content"] for m in got.json()["messages"]] == ["secret of p1"]
    Mailbox(store, "p1").revoke(t1)
    assert c.get("/api/mailbox/p1", headers={"Authorization": f"Bearer {t1}"}).status_code == 401
