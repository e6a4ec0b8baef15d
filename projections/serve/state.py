"""The viewer's read model: JSON-ready answers over a store's public API.

Nothing here knows HTTP; the ASGI app (app.py) and the static export
(export.py) both call these functions, so the page and the exported file show
the same data.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from engine.codec import to_builtins
from engine.events import AnyEvent, MessageStarted, tag_of
from engine.store.base import Store
from engine.store.verify import verify
from projections import views as v
from projections.json import converter
from projections.timetravel import Timeline, diff_states
from projections.withparts import WithPartsProjection

# Messages per state answer: the page renders a window (a screenful and some), never the
# whole session; a bigger one costs scrub latency (benchmarks/viewer.py).
WINDOW = 16
REBUILD_AFTER = 2048  # new events folded on top of a Timeline before it is rebuilt
SEARCH_LIMIT = 50


def event_json(e: AnyEvent) -> dict[str, Any]:
    """An event as the page shows it: its tag and seq first, then every field."""
    data = to_builtins(e)
    assert isinstance(data, dict)
    return {"tag": tag_of(type(e)), **data}


def session_json(store: Store, sid: str) -> dict[str, Any]:
    info = store.session_info(sid)
    version = store.version(sid)
    last = next(iter(store.read(sid, version, version)), None) if version else None
    return {"id": info.id, "created": info.created, "parent": info.parent,
            "fork_seq": info.fork_seq, "version": version,
            "updated": last.time if last is not None else info.created}


def sessions_json(store: Store) -> list[dict[str, Any]]:
    """Every session with its lineage; the page draws the tree from ``parent``."""
    return [session_json(store, info.id) for info in store.sessions()]


class _Cached:
    """A session's Timeline plus the seqs where messages start (PgUp/PgDn stops)."""

    def __init__(self, store: Store, sid: str, every: int) -> None:
        self.timeline = Timeline(store, sid, every=every)
        self.marks: list[int] = []
        for e in store.read(sid, 1, self.timeline.version):
            if isinstance(e, MessageStarted):
                self.marks.append(e.seq)


class Viewer:
    """Answers the page's questions about one store, caching a Timeline per session.

    ``at(seq)`` is a Timeline lookup (a thaw plus at most ``every - 1`` events);
    events appended after the Timeline was built are folded on top until there
    are ``REBUILD_AFTER`` of them, then the Timeline is rebuilt.
    """

    def __init__(self, store: Store, *, every: int = 64) -> None:
        self.store = store
        self.every = every
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def _cached(self, sid: str) -> _Cached:
        version = self.store.version(sid)
        with self._lock:
            c = self._cache.get(sid)
            if c is None or version - c.timeline.version > REBUILD_AFTER:
                c = self._cache[sid] = _Cached(self.store, sid, self.every)
            elif version > c.timeline.version:
                # Only the marks of new events; the state is folded on demand.
                first = max(c.timeline.version, c.marks[-1] if c.marks else 0) + 1
                for e in self.store.read(sid, first, version):
                    if isinstance(e, MessageStarted) and (not c.marks or e.seq > c.marks[-1]):
                        c.marks.append(e.seq)
            return c

    def projection(self, sid: str, seq: int) -> WithPartsProjection:
        c = self._cached(sid)
        version = self.store.version(sid)
        if not 0 <= seq <= version:
            raise ValueError(f"seq {seq} is outside 0..{version}")
        tl = c.timeline
        if seq <= tl.version:
            return tl.at(seq)
        proj = tl.at(tl.version)
        return proj.apply_all(self.store.read(sid, tl.version + 1, seq))

    def state(self, sid: str, seq: int | None = None, *, start: int | None = None,
              count: int = WINDOW) -> dict[str, Any]:
        """The state as of ``seq``: a window of messages, the event at ``seq``, the marks.

        Without ``start`` the window is centred on the message the event touched.
        """
        version = self.store.version(sid)
        seq = version if seq is None else seq
        proj = self.projection(sid, seq)
        messages = proj.messages()
        event = next(iter(self.store.read(sid, seq, seq)), None) if seq else None
        focus = len(messages) - 1
        mid = getattr(event, "message_id", None)
        if mid is not None:
            focus = next((i for i, m in enumerate(messages) if m.info.id == mid), focus)
        if start is None:
            start = max(0, focus - count // 2)
        start = max(0, min(start, max(0, len(messages) - count)))
        window = messages[start:start + count]
        return {
            "session": sid, "seq": seq, "version": version, "total": len(messages),
            "start": start, "focus": focus, "window": count,
            "messages": converter.unstructure(window, list[v.WithParts]),
            "event": None if event is None else event_json(event),
            "marks": self._cached(sid).marks,
        }

    def events(self, sid: str, first: int, last: int) -> list[dict[str, Any]]:
        version = self.store.version(sid)
        first, last = max(1, first), min(last, version, first + 999)
        return [event_json(e) for e in self.store.read(sid, first, last)] if first <= last else []

    def diff(self, a_sid: str, a: int, b_sid: str, b: int) -> dict[str, Any]:
        """Two points of one session, or of two sessions of one lineage (parent vs fork)."""
        if a_sid != b_sid and not self._related(a_sid, b_sid):
            raise ValueError("the two sessions do not share a lineage")
        before = self.projection(a_sid, a).messages()
        after = self.projection(b_sid, b).messages()
        out = diff_states(before, after, seq_a=a, seq_b=b).as_json()
        texts_a, texts_b = _part_texts(before), _part_texts(after)
        for change in out["changes"]:
            if change["kind"] == "text-grown":  # the page highlights what was added
                key = (change["message_id"], change["part_id"])
                old, new = texts_a.get(key, ""), texts_b.get(key, "")
                change["grown"] = new[len(old):] if new.startswith(old) else new
        out.update(a_session=a_sid, b_session=b_sid)
        return out

    def _related(self, x: str, y: str) -> bool:
        return bool({s for s, _ in self.store.lineage(x)} & {s for s, _ in self.store.lineage(y)})

    def verify(self, sid: str) -> dict[str, Any]:
        """How far the hash chain checks out: every event, or up to the first problem."""
        report = verify(self.store, sid)
        version = self.store.version(sid)
        first = report.first
        return {"ok": report.ok, "version": version,
                "verified_upto": version if first is None else first.seq - 1,
                "problem": None if first is None else str(first)}

    def search(self, query: str) -> list[dict[str, Any]]:
        """Sessions whose latest state mentions ``query`` (case-insensitive)."""
        needle = query.casefold()
        hits: list[dict[str, Any]] = []
        if not needle:
            return hits
        for info in self.store.sessions():
            for m in self.projection(info.id, self.store.version(info.id)).messages():
                text = next((t for t in _texts(m) if needle in t.casefold()), None)
                if text is not None:
                    i = text.casefold().index(needle)
                    hits.append({"session": info.id, "message": m.info.id,
                                 "snippet": text[max(0, i - 40):i + len(needle) + 40]})
                    break
            if len(hits) >= SEARCH_LIMIT:
                break
        return hits


def _part_texts(messages: list[v.WithParts]) -> dict[tuple[str, str], str]:
    return {(m.info.id, p.id): p.text for m in messages for p in m.parts
            if isinstance(p, v.TextPart | v.ReasoningPart)}


def _texts(m: v.WithParts) -> Iterator[str]:
    for p in m.parts:
        if isinstance(p, v.TextPart | v.ReasoningPart):
            yield p.text
        elif isinstance(p, v.ToolPart):
            st = p.state
            if isinstance(st, v.ToolStateCompleted):
                yield st.output
            elif isinstance(st, v.ToolStateError):
                yield st.error
