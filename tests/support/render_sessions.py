"""Random valid sessions, written through the Session API (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from engine import events as ev
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection

TEXT = st.text(alphabet=st.sampled_from(list("ab é日🙂\n")), max_size=8)
TOOL_ENDS = ["pending", "running", "completed", "compacted", "error", "denied", "input"]
# A server tool (Anthropic web search) as AnthropicIngest records it: its result block
# in an ignored synthetic text part, an error result, none (pause_turn), a stray result.
SERVER_ENDS = ["result", "result", "error", "unanswered", "orphan"]
CITATION = {"type": "char_location", "cited_text": "a", "document_index": 0,
            "document_title": None, "start_char_index": 0, "end_char_index": 1}


@st.composite
def sessions(draw: st.DrawFn) -> tuple[Session, list[v.WithParts]]:
    session = Session.create(MemoryStore())
    proj = WithPartsProjection(session.id)
    session.subscribe(proj)
    n = draw(st.integers(1, 6))
    calls = 0
    for turn in range(n):
        mid = session.start_message("user")
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "text", "ignored", "file"]))
            if kind == "file":
                session.add_file(mid, draw(st.sampled_from(["image/png", "text/plain"])),
                                 "data:image/png;base64,AAAA", filename="f.png")
            else:
                text = f"IGNORED{turn}" if kind == "ignored" else draw(TEXT)
                session.add_text(mid, text, streaming=False, ignored=kind == "ignored")
        session.complete_message(mid)
        for _ in range(draw(st.integers(0, 2))):
            aid = session.start_message("assistant", parent_id=mid)
            session.start_step(aid)
            for _ in range(draw(st.integers(0, 4))):
                kind = draw(st.sampled_from(["text", "reasoning", "tool", "tool", "server",
                                             "other"]))
                if kind == "text":
                    ref = session.add_text(aid)
                    session.text_delta(ref, draw(TEXT))
                    cited = draw(st.integers(0, 3)) == 0
                    session.end_part(ref, metadata={"anthropic": {"citations": [CITATION]}}
                                     if cited else None)
                elif kind == "reasoning":
                    signed = draw(st.booleans())
                    ref = session.add_reasoning(aid, draw(TEXT))
                    session.end_part(ref, metadata={"anthropic": {"signature": "sig"}}
                                     if signed else None)
                elif kind == "tool":
                    calls += 1
                    direct = draw(st.integers(0, 3)) == 0  # a programmatic call's caller
                    ref = session.add_tool(aid, f"call_{calls}", draw(st.sampled_from(
                        ["read", "bash"])), raw="", metadata={"anthropic": {"fields": {
                            "caller": {"type": "direct"}}}} if direct else None)
                    end = draw(st.sampled_from(TOOL_ENDS))
                    if end == "input":
                        session.tool_input_delta(ref, '{"p": 1}')
                        session.tool_input_ready(ref, {"p": 1})
                    elif end == "denied":
                        session.request_approval(ref)
                        session.deny(ref, "no")
                    elif end != "pending":
                        session.start_tool(ref, input={"p": draw(TEXT)})
                        if end in ("completed", "compacted"):
                            session.complete_tool(ref, draw(TEXT) or "ok")
                            if end == "compacted":
                                session.compact_tool_output(ref)
                        elif end == "error":
                            session.fail_tool(ref, "boom")
                elif kind == "server":
                    calls += 1
                    _server_tool(draw, session, aid, f"srvtoolu_{calls}")
                else:
                    name, args = _other(draw)
                    getattr(session, name)(aid, *args)
            ending = draw(st.sampled_from(["ok", "ok", "aborted", "error", "open"]))
            last = turn == n - 1
            if ending == "open" and last:
                break
            if ending in ("aborted", "open"):
                session.abort(aid)
            elif ending == "error":
                unsettled = dict(session.lifecycle.unsettled(aid))
                if unsettled:
                    session.abort(aid)
                else:
                    session.complete_message(aid, error=ev.MessageError(kind="api"))
            elif dict(session.lifecycle.unsettled(aid)):
                session.abort(aid)
            else:
                session.finish_step(aid, "stop")
                session.complete_message(aid, finish="stop")
    return session, proj.messages()


def _server_tool(draw: st.DrawFn, session: Session, aid: str, call_id: str) -> None:
    ref = session.add_tool(aid, call_id, "web_search", input={"query": draw(TEXT)},
                           metadata={"anthropic": {"server": True, "type": "server_tool_use"}})
    end = draw(st.sampled_from(SERVER_ENDS))
    if end == "unanswered":
        session.fail_tool(ref, "no result", kind="cancelled")
        return
    content: Any = [{"type": "web_search_result", "url": "https://a.example", "title": "t",
                     "encrypted_content": "E"}]
    if end == "error":
        content = {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    block = {"type": "web_search_tool_result", "content": content,
             "tool_use_id": "srvtoolu_none" if end == "orphan" else call_id}
    session.add_text(aid, streaming=False, synthetic=True, ignored=True,
                     metadata={"anthropic": {"block": block}})
    if end == "orphan":
        session.fail_tool(ref, "no result", kind="cancelled")
        return
    session.start_tool(ref)
    if end == "error":
        session.fail_tool(ref, "unavailable")
    else:
        session.complete_tool(ref, "[]")


def _other(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """A part that is never sent: snapshot, patch, agent or retry."""
    options: list[tuple[str, tuple[Any, ...]]] = [
        ("add_snapshot", ("snap",)), ("add_patch", ("hash", ["a.py"])),
        ("add_agent", ("explore",)),
        ("add_retry", (1, ev.MessageError(kind="api", message="x")))]
    return options[draw(st.integers(0, 3))]
