"""Forks a tool made by copying messages under new ids, linked to what they copied.

OpenCode's ``--fork`` (``Session.fork``) writes a new session whose first messages are
copies of the original's, each with a new id and everything else kept (times, text,
calls, usage). Nothing in the copy names the original: the shared content does. A
session whose messages begin with another session's (the longest shared run of
whole messages, the earlier-created session the original) is read as a **fork** of it
at that point, holding only what it added; its copies would otherwise repeat the
original's turns as a conversation of their own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import msgspec

from engine import events as ev
from engine.importers.base import ImportReport, PlannedSession

# Fields that differ between a message and its copy: the ids the copy was given.
_ID_FIELDS = frozenset({"id", "sessionID", "messageID", "parentID"})


def content_digest(previous: str, message: Any) -> str:
    """The digest of the messages so far, chained with one more (ids left out)."""
    text = json.dumps(_without_ids(message), sort_keys=True, default=str)
    return hashlib.blake2b(f"{previous}\0{text}".encode(), digest_size=16).hexdigest()


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _ID_FIELDS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def link_copies(sessions: list[PlannedSession], report: ImportReport) -> None:
    """Turn each sealed main session that begins with copies of an earlier session's
    messages into a fork of it (in place): its copied events leave it, its own stay,
    and a parent link into the copies names the original's message instead."""
    ranked = sorted((s for s in sessions if s.copies and s.kind in ("main", "fork")),
                    key=lambda s: (s.created, s.id))
    for n, later in enumerate(ranked):
        if later.kind != "main":
            continue
        best: tuple[int, PlannedSession] | None = None
        for earlier in ranked[:n]:
            shared = _shared(earlier.copies, later.copies)
            if shared and (best is None or shared > best[0]):
                best = (shared, earlier)
        if best is not None:
            _make_fork(later, *best)
            report.note("a session whose first messages copy another's (OpenCode's "
                        "--fork): a fork of it at the shared messages", later.source or None)
    _parents_first(sessions)


def _shared(a: list[tuple[str, int, str]], b: list[tuple[str, int, str]]) -> int:
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x[0] != y[0]:
            break
        shared += 1
    return shared


def _make_fork(copy: PlannedSession, shared: int, original: PlannedSession) -> None:
    # Both are sealed: session.imported is each one's first event, so its events after
    # message k start at copies[k][1] + 1.
    cut = copy.copies[shared - 1][1] + 1
    renamed = {copy_id: orig_id for (_, _, copy_id), (_, _, orig_id)
               in zip(copy.copies[:shared], original.copies[:shared], strict=True)}
    own = [msgspec.structs.replace(e, parent_id=renamed[e.parent_id])
           if isinstance(e, ev.MessageStarted) and e.parent_id in renamed else e
           for e in copy.events[cut:]]
    copy.events = own
    copy.kind, copy.parent = "fork", original.id
    copy.fork_seq = original.copies[shared - 1][1] + 1
    copy.copies = []


def _parents_first(sessions: list[PlannedSession]) -> None:
    """Order ``sessions`` so that each comes after the session it forks or descends from."""
    by_id = {s.id: s for s in sessions}
    placed: set[str] = set()
    out: list[PlannedSession] = []

    def place(s: PlannedSession, seen: Iterable[str] = ()) -> None:
        if s.id in placed:
            return
        parent = by_id.get(s.parent or "")
        if parent is not None and parent.id not in seen:
            place(parent, (*seen, s.id))
        placed.add(s.id)
        out.append(s)

    for s in sessions:
        place(s)
    sessions[:] = out
