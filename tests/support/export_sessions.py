"""Hypothesis sessions for the offline export: long streams of interleaved text,
reasoning and tool-input deltas, aborts, compactions, conversation events that name
no message, and forks (whose log starts with the parent's events)."""

from __future__ import annotations

from hypothesis import strategies as st

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
    s.start_tool(ref)
    if draw(st.booleans()):
        s.complete_tool(ref, "out " + draw(TEXT))
        if draw(st.booleans()):
            s.compact_tool_output(ref)
    else:
        s.fail_tool(ref, "error " + draw(TEXT))


def _turn(draw: st.DrawFn, s: Session) -> None:
    s.user_message(draw(TEXT))
    m = s.start_message("assistant")
    s.start_step(m)
    streams: list[tuple[str, PartRef]] = []
    for _ in range(draw(st.integers(0, 14))):
        op = draw(st.sampled_from(["text", "reasoning", "tool", "delta", "delta", "delta",
                                   "end", "compaction", "conversation"]))
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
