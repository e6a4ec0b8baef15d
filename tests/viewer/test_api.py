"""The JSON API, through Starlette's test client: every answer checked against the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.serve.app import create_app
from projections.serve.state import WINDOW, Viewer
from projections.timetravel import at, diff
from tests.support.browser import LOOPBACK
from tests.viewer.conftest import Sessions

TOKEN = "s3cret-token"


def client(store: Store, **kw: object) -> TestClient:
    return TestClient(create_app(store, **kw), base_url=LOOPBACK)  # type: ignore[arg-type]


def state(c: TestClient, sid: str, seq: int, **q: int) -> dict[str, Any]:
    params = {"seq": seq, **q}
    r = c.get(f"/api/sessions/{sid}/state", params=params)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def test_sessions_carry_their_lineage(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    rows = {r["id"]: r for r in client(store).get("/api/sessions").json()}
    assert set(rows) == {s.demo, s.fork, s.hostile}
    assert rows[s.fork]["parent"] == s.demo
    assert rows[s.fork]["fork_seq"] == s.fork_seq
    assert rows[s.demo]["parent"] is None
    assert rows[s.demo]["version"] == store.version(s.demo)
    assert rows[s.fork]["version"] == store.version(s.fork)


def test_state_at_every_seq_equals_at(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = client(store, every=8)
    for sid in (s.demo, s.fork):
        for seq in range(store.version(sid) + 1):
            got = state(c, sid, seq)
            assert got["messages"] == at(store, sid, seq, use_snapshots=False).to_json()
            assert got["seq"] == seq
            event = got["event"]
            if seq:
                assert isinstance(event, dict)
                assert event["seq"] == seq
            else:
                assert event is None


def test_state_answers_a_window_of_messages(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'long.db'}")
    s = Session.create(store)
    for i in range(100):
        s.user_message(f"message {i}")
    c = client(store)
    last = store.version(s.id)
    got = state(c, s.id, last)
    assert got["total"] == 100
    assert len(got["messages"]) == got["window"] == WINDOW
    full = at(store, s.id).to_json()
    assert got["messages"] == full[100 - WINDOW:]  # centred on the last event's message, clamped
    mid = state(c, s.id, last, start=10)
    assert mid["start"] == 10
    assert mid["messages"] == full[10:10 + WINDOW]
    starts = [e.seq for e in store.read(s.id) if type(e).__name__ == "MessageStarted"]
    assert got["marks"] == starts
    assert len(starts) == 100
    early = state(c, s.id, starts[30])  # the 31st message starts: it is the newest
    assert early["total"] == 31
    assert early["start"] == 31 - WINDOW  # the window ends with the newest message
    assert early["messages"] == at(store, s.id, starts[30]).to_json()[31 - WINDOW:]
    few = state(c, s.id, starts[WINDOW - 2])
    assert few["start"] == 0  # fewer messages than a window: all of them
    assert few["messages"] == at(store, s.id, starts[WINDOW - 2]).to_json()
    store.close()


def test_the_window_centres_on_the_message_the_event_touched(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'centre.db'}")
    s = Session.create(store)
    for i in range(30):
        s.user_message(f"before {i}")
    slow = s.start_message("assistant")
    for i in range(30):
        s.user_message(f"after {i}")
    s.complete_message(slow, finish="stop")  # touches message 30 of 61
    got = state(client(store), s.id, store.version(s.id))
    assert got["focus"] == 30
    assert got["start"] == 30 - WINDOW // 2
    assert got["messages"] == at(store, s.id).to_json()[got["start"]:got["start"] + WINDOW]
    store.close()


def test_events_in_a_range(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    got = client(store).get(f"/api/sessions/{s.demo}/events", params={"from": 5, "to": 9}).json()
    assert [e["seq"] for e in got] == [5, 6, 7, 8, 9]
    assert [e["id"] for e in got] == [e.id for e in store.read(s.demo, 5, 9)]


def test_diff_of_two_points_matches_the_engine(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    got = client(store).get(f"/api/sessions/{s.demo}/diff", params={"a": 10, "b": 40}).json()
    want = diff(store, s.demo, 10, 40).as_json()["changes"]
    assert [(c["kind"], c["part_id"]) for c in got["changes"]] == [
        (c["kind"], c["part_id"]) for c in want]
    grown = [c for c in got["changes"] if c["kind"] == "text-grown"]
    assert grown
    for c in grown:  # the added text is exactly what the part gained
        before = _text(store, s.demo, 10, c["message_id"], c["part_id"])
        after = _text(store, s.demo, 40, c["message_id"], c["part_id"])
        assert before + c["grown"] == after


def _text(store: Store, sid: str, seq: int, mid: str, pid: str) -> str:
    msg = at(store, sid, seq).message(mid)
    return str(next(getattr(p, "text") for p in msg.parts if p.id == pid))  # noqa: B009


def test_diff_between_a_parent_and_its_fork(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = client(store)
    last = store.version(s.demo)
    got = c.get(f"/api/sessions/{s.demo}/diff",
                params={"a": last, "b": store.version(s.fork), "b_session": s.fork}).json()
    assert got["a_session"] == s.demo
    assert got["b_session"] == s.fork
    assert got["changes"]  # the fork ended another way
    unrelated = c.get(f"/api/sessions/{s.demo}/diff",
                      params={"a": 1, "b": 1, "b_session": s.hostile})
    assert unrelated.status_code == 400


def test_fork_is_off_by_default_and_needs_the_token(
        viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    before = len(store.sessions())
    assert client(store).post(f"/api/sessions/{s.demo}/fork", json={"seq": 5}).status_code == 403
    c = client(store, allow_writes=True, token=TOKEN)
    assert c.get("/api/config").json() == {"writes": True, "anchors": []}
    assert c.post(f"/api/sessions/{s.demo}/fork", json={"seq": 5}).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert c.post(f"/api/sessions/{s.demo}/fork", json={"seq": 5}, headers=bad).status_code == 401
    assert len(store.sessions()) == before
    ok = c.post(f"/api/sessions/{s.demo}/fork", json={"seq": 5},
                headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    child = ok.json()["id"]
    assert store.lineage(child) == [(s.demo, 5), (child, None)]
    with pytest.raises(ValueError, match="token"):
        create_app(store, allow_writes=True)


def test_verify_badge_data(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    got = client(store).get(f"/api/sessions/{s.fork}/verify").json()
    assert got == {"ok": True, "version": store.version(s.fork),
                   "verified_upto": store.version(s.fork), "problem": None, "anchor": None}


def test_search_finds_text_and_tool_output(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = client(store)
    hits = c.get("/api/search", params={"q": "SEMICOLONS"}).json()
    assert {h["session"] for h in hits} == {s.demo}  # the fork was aborted before the answer
    assert "semicolons" in hits[0]["snippet"]
    assert [h["session"] for h in c.get("/api/search", params={"q": "output: <scr"}).json()] == [
        s.hostile]
    assert c.get("/api/search", params={"q": "no such words anywhere"}).json() == []


def test_no_path_reaches_the_filesystem(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = client(store)
    for path in ("/static/../app.py", "/static/..%2Fapp.py", "/static/%2e%2e%2fstate.py",
                 "/static/state.py", "/static/__init__.py", "/etc/passwd"):
        assert c.get(path).status_code == 404, path
    assert c.get("/api/sessions/..%2F..%2Fetc%2Fpasswd/state").status_code in (400, 404)
    page = c.get("/")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert c.get("/api/sessions/nope/state").status_code == 404
    assert c.get(f"/api/sessions/{s.demo}/state", params={"seq": 10_000}).status_code == 400
    assert c.get(f"/api/sessions/{s.demo}/state", params={"seq": "x"}).status_code == 400


def test_live_stream_reports_the_version(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    c = client(store)
    with c.stream("GET", f"/api/sessions/{s.demo}/live") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data:"):
                assert line == f'data: {{"version": {store.version(s.demo)}}}'
                break


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=12))
def test_appends_after_the_timeline_are_seen(ops: list[tuple[int, int]]) -> None:
    """The cached Timeline never hides events appended after it was built."""
    with open_store("sqlite:///:memory:") as store:
        s = Session.create(store)
        viewer = Viewer(store, every=4)
        for kind, n in ops:
            if kind == 0:
                for i in range(n + 1):
                    s.user_message(f"m{i}")
            version = store.version(s.id)
            seq = version if kind != 2 else version // 2
            got = viewer.state(s.id, seq, start=0, count=10_000)
            assert got["messages"] == at(store, s.id, seq, use_snapshots=False).to_json()
            assert got["marks"] == [e.seq for e in store.read(s.id)
                                    if type(e).__name__ == "MessageStarted"]
