"""Shared by the provider ingest tests: a live session, and what a settled message is."""

from __future__ import annotations

from engine.adapters.ingest import StreamIngest
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection


def fresh() -> tuple[Session, WithPartsProjection]:
    """A session on a memory store with a WithParts projection subscribed."""
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    return session, proj


def assert_settled(session: Session, proj: WithPartsProjection, mid: str) -> v.WithParts:
    """The message is complete (aborted), nothing is left open, the text streamed is kept."""
    assert not dict(session.lifecycle.unsettled(mid))
    wp = proj.message(mid)
    info = wp.info
    assert isinstance(info, v.AssistantInfo)
    assert info.time.completed is not None
    assert info.error is not None
    assert info.error.kind == "aborted"
    for p in wp.parts:
        if isinstance(p, v.ToolPart):
            assert isinstance(p.state, v.ToolStateError)
            assert p.state.metadata is not None
            assert p.state.metadata["kind"] == "aborted"
    # The same history, read back from the store, folds to the same state.
    replay = WithPartsProjection(session.id).apply_all(session.store.read(session.id))
    assert replay.message(mid) == wp
    return wp


def run_tools(session: Session, ingest: StreamIngest) -> None:
    """Answer the calls a finished stream made and complete its message, as an agent does.

    The stream's final envelope (usage, stop sequence, ...) is recorded with the
    message's completion, so an SDK comparison reads the completed message.
    """
    result = ingest.result()
    for call in result.tool_calls:
        session.start_tool(call.ref)
        session.complete_tool(call.ref, "ok")
    if not ingest.completed:
        ingest.complete()
