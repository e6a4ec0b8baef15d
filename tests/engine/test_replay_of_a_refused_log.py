"""A stored log its tables would refuse (edited, or written around the door)
fails replay with a typed ``CorruptLog`` that names the event and the refusal,
never a bare ``KeyError``, whichever event of a valid log is dropped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.errors import CorruptLog
from engine.lifecycle import Lifecycle
from engine.session import Session, StepClock
from engine.store import MemoryStore


def _log() -> list[ev.Event]:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock())
    s.append([ev.ProjectCreated(project_id="p", working_directory="/w"),
              ev.AgentRegistered(agent_id="a")])
    mid = s.start_message("assistant")
    text = s.add_text(mid)
    s.text_delta(text, "hello")
    tool = s.add_tool(mid, "call-1", "bash")
    s.start_tool(tool, input={"command": "ls"})
    s.complete_tool(tool, "out")
    s.append([ev.AgentAssigned(project_id="p", agent_id="a")])
    return list(store.read(s.info.id))


def test_a_valid_log_replays() -> None:
    lc = Lifecycle("s")
    for e in _log():
        lc.replay(e)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_dropping_an_event_others_need_is_a_typed_refusal(data: st.DataObject) -> None:
    log = _log()
    n = data.draw(st.integers(0, len(log) - 1))
    rest = log[:n] + log[n + 1:]
    lc = Lifecycle(log[0].session_id)
    raised: Exception | None = None
    try:
        for e in rest:
            lc.replay(e)
    except Exception as err:  # the defect this test closes: any other type
        raised = err
    if raised is not None:  # replay does not judge, so a drop may also pass
        assert isinstance(raised, CorruptLog), f"{type(raised).__name__}: {raised}"
        assert raised.seq > log[n].seq  # a later event, the one that needed the dropped one
        assert "its tables refuse here" in raised.reason
