"""Time travel by example: at(), at_time(), diff(), Timeline, Snapshotter and forks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import events as ev
from engine.events import Event
from engine.session import PartRef, Session, StepClock
from engine.store import MemoryStore, SQLiteStore, Store
from projections import views as v
from projections.timetravel import (
    INDEX_NAME,
    Change,
    Diff,
    Snapshotter,
    Timeline,
    at,
    at_time,
    diff,
    latest_snapshot,
    message_snapshot_name,
    write_snapshots,
)
from projections.withparts import WithPartsProjection

USER = "0190a2b4-0000-7000-8000-00000000000a"
ASSISTANT = "0190a2b4-0000-7000-8000-00000000000b"


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(str(tmp_path / "t.db"))
    try:
        yield s
    finally:
        s.close()


def replay(store: Store, session_id: str, k: int | None = None) -> WithPartsProjection:
    events = list(store.read(session_id))
    return WithPartsProjection(session_id).apply_all(events[:k] if k is not None else events)


def text_of(proj: WithPartsProjection, index: int = 0) -> v.TextPart:
    part = proj.message(ASSISTANT).parts[index]
    assert isinstance(part, v.TextPart)
    return part


def tool_of(proj: WithPartsProjection, index: int = 1) -> v.ToolPart:
    part = proj.message(ASSISTANT).parts[index]
    assert isinstance(part, v.ToolPart)
    return part


def as_text(p: WithPartsProjection) -> str:
    return json.dumps(p.to_json(), sort_keys=True)


def assert_same(got: WithPartsProjection, want: WithPartsProjection) -> None:
    assert got.seq == want.seq
    assert got.messages() == want.messages()
    assert as_text(got) == as_text(want)


class Story:
    """A small recorded session; ``marks`` names the seq after each stage."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.clock = StepClock(1_000, 10)
        self.session = Session.create(store, clock=self.clock)
        s = self.session
        self.marks: dict[str, int] = {"empty": 0}
        s.user_message("Read README.md please", message_id=USER)
        self.marks["user"] = s.version
        s.start_message("assistant", message_id=ASSISTANT)
        self.text = s.add_text(ASSISTANT, "Hel", part_id="prt_text")
        self.marks["text"] = s.version
        s.text_delta(self.text, "lo")
        self.marks["grown"] = s.version
        self.tool = s.add_tool(ASSISTANT, "call_1", "read", input={"path": "README.md"},
                               part_id="prt_tool")
        s.start_tool(self.tool, title="Reading README.md")
        self.marks["running"] = s.version
        s.end_part(self.text)
        s.complete_tool(self.tool, "# convlog", title="README.md")
        s.complete_message(ASSISTANT, finish="stop")
        self.marks["done"] = s.version

    @property
    def sid(self) -> str:
        return self.session.id


# --------------------------------------------------------------------------- at()


def test_at_every_seq_equals_a_replay(any_store: Store) -> None:
    story = Story(any_store)
    version = story.session.version
    assert version == story.marks["done"] == 12
    for k in range(version + 1):
        assert_same(at(any_store, story.sid, k), replay(any_store, story.sid, k))
        assert_same(at(any_store, story.sid, k, use_snapshots=False),
                    replay(any_store, story.sid, k))
    assert_same(at(any_store, story.sid), replay(any_store, story.sid))
    assert at(any_store, story.sid, 0).messages() == []


def test_at_shows_the_state_of_that_moment(any_store: Store) -> None:
    story = Story(any_store)
    running = at(any_store, story.sid, story.marks["running"])
    assert len(running.message(ASSISTANT).parts) == 2
    text = text_of(running)
    assert text.text == "Hello"
    assert text.time is not None
    assert text.time.end is None
    assert tool_of(running).state.TAG == "running"
    assert running.message(ASSISTANT).info.time.completed is None
    done = at(any_store, story.sid)
    assert tool_of(done).state.TAG == "completed"
    assert done.message(ASSISTANT).info.time.completed is not None


def test_at_is_read_only_and_checks_its_range(any_store: Store) -> None:
    story = Story(any_store)
    before = list(any_store.read(story.sid))
    past = at(any_store, story.sid, 7)
    past.apply(ev.TextDelta(message_id=ASSISTANT, part_id="prt_text", delta="!", seq=8))
    assert text_of(past).text == "Hello!"
    assert list(any_store.read(story.sid)) == before
    assert_same(at(any_store, story.sid, 7), replay(any_store, story.sid, 7))
    for bad in (-1, story.session.version + 1):
        with pytest.raises(ValueError, match="outside"):
            at(any_store, story.sid, bad)


# --------------------------------------------------------------------------- at_time()


def test_at_time_with_monotonic_times(any_store: Store) -> None:
    story = Story(any_store)
    events = list(any_store.read(story.sid))
    times = [e.time for e in events]
    assert times == sorted(times)
    assert at_time(any_store, story.sid, times[0] - 1).seq == 0
    for i, t in enumerate(times, start=1):
        # Exactly at an event's time includes it; just before excludes it.
        assert_same(at_time(any_store, story.sid, t), replay(any_store, story.sid, i))
        assert at_time(any_store, story.sid, t - 1).seq == i - 1
    assert at_time(any_store, story.sid, times[-1] + 10**9).seq == len(events)


def _skewed(store: Store) -> Session:
    """Four raw events whose times are 100, 300, 200, 400 (clock skew)."""
    session = Session.create(store, clock=StepClock(1_000, 10))
    batch: list[Event] = [
        ev.MessageStarted(message_id=ASSISTANT, role="assistant", time=100),
        ev.TextAdded(message_id=ASSISTANT, part_id="prt_t", text="a", time=300),
        ev.TextDelta(message_id=ASSISTANT, part_id="prt_t", delta="b", time=200),
        ev.PartEnded(message_id=ASSISTANT, part_id="prt_t", time=400),
    ]
    assert session.append(batch) == [1, 2, 3, 4]
    assert [e.time for e in store.read(session.id)] == [100, 300, 200, 400]
    return session


@pytest.mark.parametrize(("t", "k"), [(99, 0), (100, 1), (199, 1), (250, 1), (299, 1),
                                      (300, 3), (350, 3), (399, 3), (400, 4), (10**6, 4)])
def test_at_time_with_non_monotonic_times(any_store: Store, t: int, k: int) -> None:
    """The longest prefix whose times are all <= T, not every event up to T."""
    session = _skewed(any_store)
    assert any_store.seq_at_time(session.id, t) == k
    assert_same(at_time(any_store, session.id, t), replay(any_store, session.id, k))
    assert_same(at_time(any_store, session.id, t, use_snapshots=False),
                replay(any_store, session.id, k))
    timeline = Timeline(any_store, session.id, every=2)
    assert timeline.seq_at_time(t) == k
    assert_same(timeline.at_time(t), replay(any_store, session.id, k))


def test_timeline_at_time_with_monotonic_times(any_store: Store) -> None:
    story = Story(any_store)
    timeline = Timeline(any_store, story.sid, every=4)
    for e in any_store.read(story.sid):
        assert_same(timeline.at_time(e.time), replay(any_store, story.sid, e.seq))
    assert timeline.at_time(0).seq == 0


# --------------------------------------------------------------------------- diff()


def _kinds(d: Diff) -> list[tuple[str, str | None]]:
    return [(c.kind, c.part_id) for c in d.changes]


def test_diff_added_messages_and_parts(any_store: Store) -> None:
    story = Story(any_store)
    d = diff(any_store, story.sid, story.marks["user"], story.marks["running"])
    assert (d.a, d.b) == (story.marks["user"], story.marks["running"])
    assert _kinds(d) == [("message-added", None), ("part-added", "prt_text"),
                         ("part-added", "prt_tool")]
    added = d.changes[0]
    assert added.message_id == ASSISTANT
    assert added.after == "assistant"
    assert added.detail == "2 part(s)"
    assert [c.after for c in d.changes[1:]] == ["text", "tool read running"]


def test_diff_text_grown(any_store: Store) -> None:
    story = Story(any_store)
    d = diff(any_store, story.sid, story.marks["text"], story.marks["grown"])
    assert d.changes == (Change("text-grown", ASSISTANT, "prt_text",
                                detail="+2 chars, now 5"),)


def test_diff_tool_state_part_ended_message_completed(any_store: Store) -> None:
    story = Story(any_store)
    d = diff(any_store, story.sid, story.marks["running"], story.marks["done"])
    assert sorted(_kinds(d), key=str) == sorted(
        [("message-completed", None), ("part-ended", "prt_text"), ("tool-state", "prt_tool")],
        key=str)
    tool = next(c for c in d.changes if c.kind == "tool-state")
    assert (tool.before, tool.after) == ("running", "completed")


def test_diff_from_empty_includes_completed_messages(any_store: Store) -> None:
    story = Story(any_store)
    d = diff(any_store, story.sid, 0, story.marks["user"])
    assert [c.kind for c in d.changes] == ["message-added", "part-added", "message-completed"]
    assert d.changes[0].message_id == USER
    assert d.changes[0].after == "user"


def test_diff_tool_failure_carries_the_error(any_store: Store) -> None:
    session = Session.create(any_store, clock=StepClock(1_000, 10))
    session.start_message("assistant", message_id=ASSISTANT)
    tool = session.add_tool(ASSISTANT, "call_9", "bash", part_id="prt_bash")
    a = session.version
    session.fail_tool(tool, "cancelled by the user", kind="cancelled")
    d = diff(any_store, session.id, a, session.version)
    assert d.changes == (Change("tool-state", ASSISTANT, "prt_bash", "pending", "error",
                                "cancelled by the user"),)


def test_diff_of_a_point_with_itself_is_empty(any_store: Store) -> None:
    story = Story(any_store)
    for k in range(story.session.version + 1):
        d = diff(any_store, story.sid, k, k)
        assert d.changes == ()
        assert d.render() == f"diff {k} -> {k}: 0 change(s)"


def test_diff_render_and_json(any_store: Store) -> None:
    story = Story(any_store)
    d = diff(any_store, story.sid, story.marks["text"], story.marks["running"])
    lines = d.render().splitlines()
    assert lines[0] == f"diff {story.marks['text']} -> {story.marks['running']}: 2 change(s)"
    where = ASSISTANT[-12:]
    assert lines[1:] == [
        f"  {'text-grown':<18} {where}/prt_text (+2 chars, now 5)",
        f"  {'part-added':<18} {where}/prt_tool - -> tool read running",
    ]
    data = d.as_json()
    assert json.loads(json.dumps(data)) == data
    assert data["a"] == story.marks["text"]
    assert data["b"] == story.marks["running"]
    assert [c["kind"] for c in data["changes"]] == ["text-grown", "part-added"]
    assert data["changes"][1] == {"kind": "part-added", "message_id": ASSISTANT,
                                  "part_id": "prt_tool", "before": None,
                                  "after": "tool read running", "detail": ""}


# --------------------------------------------------------------------------- Timeline


@pytest.mark.parametrize("every", [1, 2, 3, 5, 100])
def test_timeline_equals_replay_everywhere(any_store: Store, every: int) -> None:
    story = Story(any_store)
    timeline = Timeline(any_store, story.sid, every=every)
    assert timeline.version == story.session.version
    assert_same(timeline.latest, replay(any_store, story.sid))
    for k in range(timeline.version + 1):
        assert_same(timeline.at(k), replay(any_store, story.sid, k))
    with pytest.raises(ValueError, match="outside"):
        timeline.at(timeline.version + 1)
    with pytest.raises(ValueError, match="every"):
        Timeline(any_store, story.sid, every=0)


def test_timeline_states_are_independent(any_store: Store) -> None:
    """Folding on from one returned state never leaks into the next one."""
    story = Story(any_store)
    timeline = Timeline(any_store, story.sid, every=2)
    first = timeline.at(6)
    first.apply(ev.TextDelta(message_id=ASSISTANT, part_id="prt_text", delta="XYZ", seq=7))
    assert_same(timeline.at(6), replay(any_store, story.sid, 6))
    assert_same(timeline.at(7), replay(any_store, story.sid, 7))


# --------------------------------------------------------------------------- snapshots


class CountingReads:
    """Wraps store.read (and the bulk store.read_runs, which at() uses where a store
    has it) to record which ranges are read."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int, int | None]] = []
        for name in ("read", "read_runs"):
            if hasattr(store, name):
                monkeypatch.setattr(store, name, self._counting(getattr(store, name)))

    def _counting(self, original: Any) -> Any:
        def read(session_id: str, first: int = 1, last: int | None = None,
                 **options: Any) -> Iterator[Any]:
            self.calls.append((session_id, first, last))
            events: Iterator[Any] = original(session_id, first, last, **options)
            return events
        return read


def test_snapshotter_writes_every_k_and_at_uses_them(
        any_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session.create(any_store, clock=StepClock(1_000, 10))
    snapshotter = Snapshotter(any_store, WithPartsProjection(session.id), every=4)
    session.subscribe(snapshotter)
    session.start_message("assistant", message_id=ASSISTANT)
    text = session.add_text(ASSISTANT, "", part_id="prt_text")
    for chunk in ["a", "β", "", "😀", "d", "e", "f", "g", "h"]:
        session.text_delta(text, chunk)
    session.end_part(text)
    assert session.version == 12
    assert_same(snapshotter.projection, replay(any_store, session.id))
    for seq in (4, 8, 12):
        found = any_store.latest_snapshot(session.id, INDEX_NAME, seq)
        assert found is not None
        assert found[0] == seq
        # A snapshot always equals a replay to that point.
        restored = latest_snapshot(any_store, session.id, seq)
        assert restored is not None
        assert restored.seq == seq
        assert_same(restored, replay(any_store, session.id, seq))
    assert any_store.latest_snapshot(session.id, INDEX_NAME, 3) is None
    assert latest_snapshot(any_store, session.id, 3) is None
    found = any_store.latest_snapshot(session.id, INDEX_NAME, 11)
    assert found is not None
    assert found[0] == 8

    reads = CountingReads(any_store, monkeypatch)
    for k in range(session.version + 1):
        reads.calls.clear()
        assert_same(at(any_store, session.id, k), replay(any_store, session.id, k))
        # The replay() above reads from 1; at() read only after its snapshot.
        first_read = reads.calls[0]
        expected_start = (k // 4) * 4 + 1
        if k % 4:
            assert first_read == (session.id, expected_start, k), (k, reads.calls)
        else:
            assert first_read[1] == 1  # replay(): at() needed no event at all
    reads.calls.clear()
    at(any_store, session.id, 11, use_snapshots=False)
    assert reads.calls == [(session.id, 1, 11)]


def test_write_snapshots_counts_and_equals_replay(any_store: Store) -> None:
    story = Story(any_store)
    assert write_snapshots(any_store, story.sid, every=3) == story.session.version // 3
    for k in range(story.session.version + 1):
        assert_same(at(any_store, story.sid, k), replay(any_store, story.sid, k))
    with pytest.raises(ValueError, match="every"):
        Snapshotter(any_store, WithPartsProjection(story.sid), every=0)


def test_restore_continues_folding_like_the_original(any_store: Store) -> None:
    story = Story(any_store)
    events = list(any_store.read(story.sid))
    for k in range(len(events) + 1):
        original = WithPartsProjection(story.sid).apply_all(events[:k])
        restored = WithPartsProjection.restore(story.sid, original.snapshot())
        thawed = WithPartsProjection.thaw(story.sid, original.freeze())
        for p in (restored, thawed):
            p.apply_all(events[k:])
            assert_same(p, replay(any_store, story.sid))


# --------------------------------------------------------------------------- forks


def test_fork_shares_the_prefix_and_diverges(any_store: Store) -> None:
    story = Story(any_store)
    parent = story.session
    child = parent.fork(at=6)
    info = any_store.session_info(child.id)
    assert (info.parent, info.fork_seq) == (parent.id, 6)
    assert child.version == 6
    parent_events = list(any_store.read(parent.id))
    assert list(any_store.read(child.id)) == parent_events[:6]
    # The fork's state at k equals the parent's (with the fork's session id).
    for k in range(7):
        mine, theirs = at(any_store, child.id, k), at(any_store, parent.id, k)
        assert as_text(mine) == as_text(theirs).replace(parent.id, child.id)
        assert_same(mine, replay(any_store, child.id, k))
    # The fork continues on its own: the text part was still streaming at 6.
    child.text_delta(PartRef(ASSISTANT, "prt_text"), " world")
    assert child.version == 7
    assert parent.version == story.marks["done"]
    assert list(any_store.read(parent.id)) == parent_events
    assert text_of(at(any_store, child.id)).text == "Hel world"
    assert text_of(at(any_store, parent.id)).text == "Hello"
    with pytest.raises(ValueError, match="outside"):
        parent.fork(at=parent.version + 1)
    assert parent.fork(at=0).version == 0


def test_fork_stores_only_its_own_events() -> None:
    store = MemoryStore()
    story = Story(store)
    child = story.session.fork(at=10)
    child.add_text(ASSISTANT, "more", part_id="prt_more")
    assert [e.seq for e in store._own_read(child.id, 1, 100)] == [11]


def test_forks_of_forks(any_store: Store) -> None:
    story = Story(any_store)
    parent = story.session
    write_snapshots(any_store, parent.id, every=2)
    child = parent.fork(at=7)  # the text part streams "Hello"
    child.text_delta(PartRef(ASSISTANT, "prt_text"), " there")  # 8
    child.end_part(PartRef(ASSISTANT, "prt_text"))  # 9
    child.complete_message(ASSISTANT)  # 10
    grandchild = child.fork(at=9)
    grandchild.abort(ASSISTANT, "stop")  # 10 in the grandchild
    assert any_store.lineage(grandchild.id) == [(parent.id, 7), (child.id, 9),
                                                (grandchild.id, None)]
    p_events = list(any_store.read(parent.id))
    c_events = list(any_store.read(child.id))
    g_events = list(any_store.read(grandchild.id))
    assert c_events[:7] == p_events[:7]
    assert c_events[7:] != p_events[7:10]
    assert g_events[:9] == c_events[:9]
    assert len(g_events) == 10
    assert [e.seq for e in g_events] == list(range(1, 11))
    completed = g_events[-1]
    assert isinstance(completed, ev.MessageCompleted)
    assert completed.error is not None
    assert completed.error.kind == "aborted"
    for sid, events in ((child.id, c_events), (grandchild.id, g_events)):
        for k in range(len(events) + 1):
            # Parent snapshots (every 2) are used through the lineage, renamed.
            assert_same(at(any_store, sid, k), WithPartsProjection(sid).apply_all(events[:k]))
            assert_same(Timeline(any_store, sid, every=3).at(k),
                        WithPartsProjection(sid).apply_all(events[:k]))
    assert text_of(at(any_store, grandchild.id)).text == "Hello there"
    # A fork's lifecycle is the rebuilt prefix: the grandchild's message is completed.
    assert grandchild.lifecycle.messages[ASSISTANT].state == "completed"
    assert Session.open(any_store, grandchild.id).version == 10


def test_fork_snapshot_keeps_user_data_named_like_envelope_fields(any_store: Store) -> None:
    """Metadata keys such as "sessionID" are user data: a fork must not rename them."""
    session = Session.create(any_store, clock=StepClock(1_000, 10))
    session.start_message("assistant", message_id=ASSISTANT)
    tool = session.add_tool(ASSISTANT, "call_1", "read", part_id="prt_tool",
                            metadata={"sessionID": "external-1"})
    session.start_tool(tool, metadata={"sessionID": "external-2"})
    session.complete_tool(tool, "ok", attachments=[
        ev.Attachment(part_id="prt_att", mime="text/plain", url="file:///a")])
    write_snapshots(any_store, session.id, every=1)
    child = session.fork()
    got = at(any_store, child.id)
    assert_same(got, WithPartsProjection(child.id).apply_all(any_store.read(session.id)))
    part = tool_of(got, 0)
    assert part.metadata == {"sessionID": "external-1"}
    assert isinstance(part.state, v.ToolStateCompleted)
    assert part.state.metadata["sessionID"] == "external-2"
    assert part.state.attachments is not None
    assert part.state.attachments[0].session_id == child.id
    assert part.session_id == child.id


def test_stored_snapshots_write_an_unchanged_message_once(any_store: Store) -> None:
    session = Session.create(any_store, clock=StepClock(1_000, 10))
    snapshotter = Snapshotter(any_store, WithPartsProjection(session.id), every=3)
    session.subscribe(snapshotter)
    first = session.user_message("first question")  # 4 events, completed
    answer = session.start_message("assistant", message_id=ASSISTANT)
    text = session.add_text(answer, "", part_id="prt_text")
    for chunk in "streaming text":
        session.text_delta(text, chunk)
    versions = [seq for seq in range(1, session.version + 1)
                if (hit := any_store.latest_snapshot(session.id, message_snapshot_name(first), seq))
                and hit[0] == seq]
    # The completed user message was written by the first snapshot only; later
    # snapshots point at that version.
    assert versions == [3, 6]  # seq 3: still open (3 of its 4 events), seq 6: completed
    name = message_snapshot_name(answer)
    growing = {hit[0] for seq in range(1, session.version + 1)
               if (hit := any_store.latest_snapshot(session.id, name, seq))}
    assert len(growing) == session.version // 3 - 1  # the streaming message changes each time
    for k in range(session.version + 1):
        assert_same(at(any_store, session.id, k), replay(any_store, session.id, k))
