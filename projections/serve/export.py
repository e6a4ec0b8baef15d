"""One self-contained HTML file for a session: the page, its data, no server.

The scrubber works offline without folding events in JavaScript, and the file stays
linear in the log's size:

- ``versions``: each distinct full message JSON once, stored only at events that are
  not appends. A text, reasoning or tool-input delta only appends to one part, so a
  delta stores nothing: the page appends the deltas' text (already in ``events``) to
  the message's base version. Storing a full version per delta made a streamed
  session's file (and the exporter's memory) grow with the square of its deltas.
- ``changes[seq]``: what event ``seq`` changed, as ``[message id, entry]`` pairs (or
  null for nothing). An entry is a version index, ``[version, since]`` (that version
  plus the message's deltas in events ``since+1 .. seq``), or null (removed).
- ``frames``: ``[seq, [[message id, entry], ...]]``, the whole state in message order,
  at seq 0, at every event that names no message, and whenever as many events as
  there are messages (at least ``FRAME_EVERY``) have passed: the page rebuilds any seq
  from the frame before it in bounded time, and frames cost O(events) in all.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from engine import events as ev
from engine.store.base import Store
from projections import views as v
from projections.json import converter
from projections.serve.state import WINDOW, Viewer, event_json, session_json
from projections.withparts import WithPartsProjection

FRAME_EVERY = 256
APPENDS = (ev.TextDelta, ev.ReasoningDelta, ev.ToolInputDelta)

Entry = int | list[int] | None


def static_text(name: str) -> str:
    return resources.files("projections.serve").joinpath("static", name).read_text("utf-8")


def script_json(data: Any) -> str:
    """JSON that cannot close its <script> element nor open a comment in it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class _States:
    """The message versions and state changes of one session, event by event."""

    def __init__(self) -> None:
        self.versions: list[Any] = []
        self.index: dict[str, int] = {}
        self.current: dict[str, Entry] = {}  # message id -> entry, in message order
        self.seen: dict[str, v.WithParts] = {}  # message id -> the view last stored
        self.since: dict[str, int] = {}  # message id -> seq its version was stored at
        self.changes: list[list[list[Any]] | None] = [None]
        self.frames: list[list[Any]] = [[0, []]]
        self.last_frame = 0

    def _version(self, view: v.WithParts) -> int:
        data = converter.unstructure(view, v.WithParts)
        key = json.dumps(data, sort_keys=True)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.versions)
            self.versions.append(data)
        return i

    def _store(self, seq: int, mid: str, view: v.WithParts) -> int:
        i = self._version(view)
        self.current[mid] = i
        self.seen[mid] = view
        self.since[mid] = seq
        return i

    def _drop(self, mid: str) -> None:
        self.current.pop(mid, None)
        self.seen.pop(mid, None)
        self.since.pop(mid, None)

    def append(self, seq: int, mid: str) -> list[list[Any]] | None:
        """A delta to ``mid``: its entry becomes (or stays) its base version plus deltas."""
        entry = self.current.get(mid)
        if not isinstance(entry, int):
            return None  # already [version, since]: the page reads the new delta itself
        self.current[mid] = [entry, self.since[mid]]
        return [[mid, self.current[mid]]]

    def message(self, seq: int, mid: str, proj: WithPartsProjection) -> list[list[Any]]:
        try:
            view = proj.message(mid)
        except KeyError:  # the event removed the message
            self._drop(mid)
            return [[mid, None]]
        return [[mid, self._store(seq, mid, view)]]

    def whole(self, seq: int, proj: WithPartsProjection) -> None:
        """An event naming no message may touch any: compare every view (by identity,
        unchanged ones are not serialized again) and store a frame."""
        views = proj.messages()
        ids = {m.info.id for m in views}
        for mid in [m for m in self.current if m not in ids]:
            self._drop(mid)
        order = [m.info.id for m in views]
        if order != [m for m in self.current if m in ids]:
            self.current = {}  # the order changed: rebuild it
        for view in views:
            mid = view.info.id
            if self.seen.get(mid) is not view or mid not in self.current:
                self._store(seq, mid, view)

    def frame(self, seq: int) -> None:
        self.frames.append([seq, [[mid, e] for mid, e in self.current.items()]])
        self.last_frame = seq


def export_data(store: Store, session_id: str) -> dict[str, Any]:
    viewer = Viewer(store)
    proj = WithPartsProjection(session_id)
    st = _States()
    events: list[dict[str, Any]] = []
    marks: list[int] = []
    for e in store.read(session_id):
        proj.apply(e)
        events.append(event_json(e))
        seq = e.seq
        if isinstance(e, ev.MessageStarted):
            marks.append(seq)
        mid = getattr(e, "message_id", None)
        if not isinstance(mid, str):
            st.whole(seq, proj)
            st.changes.append(None)
            st.frame(seq)
            continue
        if isinstance(e, APPENDS) and mid in st.current:
            st.changes.append(st.append(seq, mid))
        else:
            st.changes.append(st.message(seq, mid, proj))
        if seq - st.last_frame >= max(FRAME_EVERY, len(st.current)):
            st.frame(seq)
    info = session_json(store, session_id)
    return {"session": {"info": info, "versions": st.versions, "changes": st.changes,
                        "frames": st.frames, "events": events, "marks": marks},
            "verify": viewer.verify(session_id), "window": WINDOW}


def render_html(store: Store, session_id: str) -> str:
    """The viewer page with the session's data inlined; opens from a file, offline."""
    page = static_text("index.html")
    css, js = static_text("app.css"), static_text("app.js")
    data = script_json(export_data(store, session_id))
    page = page.replace('<link rel="stylesheet" href="/static/app.css">', f"<style>\n{css}</style>")
    page = page.replace(
        '<script src="/static/app.js"></script>',
        f'<script type="application/json" id="convlog-export">{data}</script>\n'
        f"<script>\n{js}</script>")
    return page
