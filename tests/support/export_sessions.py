"""Hypothesis sessions for the offline export: long streams of interleaved text,
reasoning and tool-input deltas, aborts, compactions, conversation events that name
no message, forks (whose log starts with the parent's events), every kind of part,
tools through approvals and progress, and an agent's step loop: many tool calls in
one message (the export stores one part per event, so each event of each part
kind must change only its own part)."""

from __future__ import annotations

from hypothesis import strategies as st

from engine import events as ev
from engine.session import PartRef, Session
from engine.store.base import Store
from projections.demo import stepping_clock

# Text that survives JSON in both Python and JavaScript byte for byte (no lone surrogates).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
FORK_STEPS = 8


def _end(draw: st.DrawFn, s: Session, kind: str, ref: PartRef) -> None:
    if kind != "tool":
        s.end_part(ref)
        return
    s.tool_input_ready(ref, {"command": draw(TEXT)})
    if draw(st.integers(0, 3)) == 0:
        s.request_approval(ref, reason=draw(TEXT))
        if draw(st.booleans()):
            s.deny(ref, draw(TEXT))
            return
        s.approve(ref)
    s.start_tool(ref, metadata={"n": 1})
    for flag in draw(st.lists(st.sampled_from([1, True, 1.5, "1"]), max_size=2)):
        s.tool_progress(ref, title=draw(TEXT), metadata={"n": flag})  # 1 == True in Python
    if draw(st.booleans()):
        s.complete_tool(ref, "out " + draw(TEXT), attachments=[
            ev.Attachment(part_id=f"att_{s.version}_{i}", mime="text/plain", url=draw(TEXT))
            for i in range(draw(st.integers(0, 1)))])
        if draw(st.booleans()):
            s.compact_tool_output(ref)
    else:
        s.fail_tool(ref, "error " + draw(TEXT))


def _calls(draw: st.DrawFn, s: Session, m: str) -> None:
    """An agent's step loop: tool calls one after another, a short text before each."""
    for i in range(draw(st.integers(1, 40))):
        text = s.add_text(m)
        s.text_delta(text, f"call {i}")
        s.end_part(text)
        tool = s.add_tool(m, f"call_{s.version}", "bash")
        s.tool_input_delta(tool, '{"command": ')
        s.tool_input_delta(tool, f'"ls {i}"}}')
        s.tool_input_ready(tool, {"command": f"ls {i}"})
        s.start_tool(tool, metadata={"done": 0})
        if i % 3 == 0:
            s.tool_progress(tool, metadata={"done": i % 2 == 0})  # False == 0 in Python
        s.complete_tool(tool, f"file{i}\n" * (i % 7 + 1))


def _part(draw: st.DrawFn, s: Session, m: str) -> None:
    """A part that never changes after it is added."""
    kind = draw(st.sampled_from(["file", "snapshot", "patch", "agent", "subtask", "retry"]))
    if kind == "file":
        s.add_file(m, "text/plain", "file:///" + draw(TEXT), filename=draw(TEXT))
    elif kind == "snapshot":
        s.add_snapshot(m, draw(TEXT))
    elif kind == "patch":
        s.add_patch(m, "h" + draw(TEXT), [draw(TEXT)])
    elif kind == "agent":
        s.add_agent(m, "a" + draw(TEXT))
    elif kind == "subtask":
        s.add_subtask(m, draw(TEXT), draw(TEXT), "general")
    else:
        s.add_retry(m, 1, ev.MessageError(kind="api", message=draw(TEXT)))


def _turn(draw: st.DrawFn, s: Session) -> None:
    s.user_message(draw(TEXT))
    m = s.start_message("assistant")
    s.start_step(m)
    streams: list[tuple[str, PartRef]] = []
    for _ in range(draw(st.integers(0, 14))):
        op = draw(st.sampled_from(["text", "reasoning", "tool", "delta", "delta", "delta",
                                   "end", "compaction", "conversation", "calls", "part"]))
        if op == "text":
            streams.append(("text", s.add_text(m)))
        elif op == "reasoning":
            streams.append(("reasoning", s.add_reasoning(m)))
        elif op == "tool":
            call = f"call_{s.version}"  # a call id names one call per session
            streams.append(("tool", s.add_tool(m, call, "bash", raw=draw(TEXT))))
        elif op == "delta" and streams:
            kind, ref = draw(st.sampled_from(streams))
            for _ in range(draw(st.integers(1, 5))):
                if kind == "text":
                    s.text_delta(ref, draw(TEXT))
                elif kind == "reasoning":
                    s.reasoning_delta(ref, draw(TEXT))
                else:
                    s.tool_input_delta(ref, draw(TEXT))
        elif op == "end" and streams:
            kind, ref = streams.pop(draw(st.integers(0, len(streams) - 1)))
            _end(draw, s, kind, ref)
        elif op == "compaction":
            s.add_compaction(m, auto=draw(st.booleans()))
        elif op == "conversation":
            s.add_context_file("f" + draw(TEXT))
        elif op == "calls":
            _calls(draw, s, m)
        elif op == "part":
            _part(draw, s, m)
    how = draw(st.sampled_from(["complete", "abort", "open"]))
    if how == "complete":
        for kind, ref in streams:
            _end(draw, s, kind, ref)
        s.finish_step(m, "stop")
        s.complete_message(m)
    elif how == "abort":
        s.abort(m, reason=draw(TEXT))


@st.composite
def streamed_session(draw: st.DrawFn, store: Store) -> str:
    """A session in ``store`` (or a fork of one, continued): its id."""
    s = Session.create(store, clock=stepping_clock())
    s.create_conversation()  # so conversation events (naming no message) are accepted
    for _ in range(draw(st.integers(1, 3))):
        _turn(draw, s)
    if draw(st.booleans()):
        fork = s.fork(at=draw(st.integers(1, s.version)))  # keeps the conversation
        _turn(draw, fork)
        return fork.id
    return s.id
