"""The recorded calls of a store: each context message with its answer."""

from __future__ import annotations

from typing import Any

import attrs

from engine import events as ev
from engine.proxy.context import KEY, full_requests
from engine.proxy.conversation import Entry, conversation, entries
from engine.store import Store
from projections import views as v
from projections.withparts import WithPartsProjection

JSON = dict[str, Any]


@attrs.frozen
class Answer:
    """A recorded answer: its events (the message's, in order) and its final view."""

    events: tuple[ev.Event, ...]
    message: v.WithParts
    status: int = 200
    body: Any = None  # the error body of an HTTP error answer


@attrs.frozen
class RecordedCall:
    session_id: str
    context_id: str
    seq: int  # the context message's seq
    provider: str
    request: JSON
    entries: tuple[Entry, ...]
    answer: Answer | None

    def describe(self) -> JSON:
        return {"session": self.session_id, "message": self.context_id, "seq": self.seq,
                "provider": self.provider}


def load(store: Store, session: str | None = None) -> list[RecordedCall]:
    """Every recorded call of ``session`` (its fork lineage included), or of every
    session of the store (a fork's shared prefix is read once, from its parent)."""
    ids = [session] if session is not None else [s.id for s in store.sessions()]
    calls: list[RecordedCall] = []
    seen: set[str] = set()
    for sid in ids:
        for call in _session_calls(store, sid):
            if call.context_id not in seen:
                seen.add(call.context_id)
                calls.append(call)
    return calls


def _session_calls(store: Store, sid: str) -> list[RecordedCall]:
    events = list(store.read(sid))
    contexts = full_requests(events)
    view = WithPartsProjection(sid).apply_all(events)
    answers: dict[str, str] = {}  # context id -> answer message id
    by_message: dict[str, list[ev.Event]] = {}
    seqs: dict[str, int] = {}
    for e in events:
        if isinstance(e, ev.MessageStarted):
            if e.message_id in contexts:
                seqs[e.message_id] = e.seq
            elif e.role == "assistant" and e.parent_id in contexts \
                    and e.parent_id not in answers:
                answers[e.parent_id] = e.message_id
        if isinstance(e, ev.MessageEvent):
            by_message.setdefault(e.message_id, []).append(e)
    out = []
    for cid, record in contexts.items():
        provider = record["provider"]
        answer = None
        mid = answers.get(cid)
        if mid is not None:
            message = view.message(mid)
            started = by_message[mid][0]
            meta = started.metadata.get(KEY) if isinstance(
                started, ev.MessageStarted) and isinstance(started.metadata, dict) else None
            if isinstance(meta, dict) and "status" in meta:
                answer = Answer(tuple(by_message[mid]), message, int(meta["status"]),
                                meta.get("body"))
            else:
                answer = Answer(tuple(by_message[mid]), message)
        request = record["request"]
        out.append(RecordedCall(sid, cid, seqs[cid], provider, request,
                                tuple(entries(provider, conversation(provider, request))),
                                answer))
    return out
