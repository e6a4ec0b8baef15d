"""One self-contained HTML file for a session: the page, its data, no server.

The scrubber works offline without folding events in JavaScript, and the file stays
linear in the log's size: each event stores only what it changed, and its work is
proportional to that (one part, or one message's info).

- ``infos``: message infos, one JSON per info change (a message start or completion).
- ``parts``: part JSONs, one each time an event that is not an append changes a part
  (added, tool input ready, running, completed, ended, ...). A text, reasoning or
  tool-input delta only appends to one part, so a delta stores nothing: the page
  appends the deltas' text (already in ``events``) to the part's last stored JSON.
  Storing the whole message at each such event made a message with many tool calls
  cost its size per event (the square of its calls); storing it per delta made a
  stream cost the square of its deltas.
- A message is ``{"info": info index, "parts": [entry, ...]}`` in part order. An
  entry is a part index, or ``[part, since]``: that part plus its deltas in events
  ``since+1 .. seq``.
- ``changes[seq]``: what event ``seq`` changed, as ``[message id, change]``, or null
  for nothing. A change is a new message, whole (it has a ``parts`` key), or
  ``{"info": i}`` or ``{"at": position, "part": entry}``: the message's info, or its
  part at that position (``at`` equal to its number of parts appends one).
- ``usage``, in the last piece only: the usage chart's rows (``Viewer.usage``'s answer).
- ``frames``: ``[seq, [[message id, message], ...]]``, the whole state in message
  order, at seq 0 and whenever as many events as the state has messages and parts (at
  least ``FRAME_EVERY``) have passed: the page rebuilds any seq from the frame before
  it in bounded time, and frames cost O(events) in all.

This rests on the fold: only message events change a WithParts state (it ignores the
rest), a message event changes only its message's info (checked here, by identity),
and a part event only its own part. ``tests/viewer/test_export.py`` checks the first
and that the page's state equals the fold at every seq of generated sessions.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from importlib import resources
from typing import Any, TextIO, cast

from engine import events as ev
from engine.codec import json_text
from engine.store.base import Store
from projections import views as v
from projections.json import converter
from projections.serve.state import WINDOW, Viewer, event_json, session_json, usage_row
from projections.serve.titles import usage
from projections.withparts import WithPartsProjection

FRAME_EVERY = 256
CHUNK = 8192  # events per piece of the file's data: what the writer holds at a time
PIECE_KEYS = ("infos", "parts", "changes", "frames", "events")
APPENDS: frozenset[type[ev.Event]] = frozenset({ev.TextDelta, ev.ReasoningDelta,
                                                 ev.ToolInputDelta})
UNCHANGING = WithPartsProjection.IGNORES  # events that change no message

Entry = int | list[int]
Change = dict[str, Any] | None


def static_text(name: str) -> str:
    return resources.files("projections.serve").joinpath("static", name).read_text("utf-8")


def script_json(data: Any) -> str:
    """JSON that cannot close its <script> element nor open a comment in it."""
    text = json_text(data).decode()  # a lone surrogate: its escape (engine.codec)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class _Message:
    """One message as the file holds it, with the views its entries were stored from."""

    __slots__ = ("entries", "info", "info_view", "position", "since", "views")

    def __init__(self) -> None:
        self.info = -1
        self.info_view: v.MessageInfo | None = None
        self.entries: list[Entry] = []
        self.views: list[v.Part] = []  # the view each entry was stored from
        self.since: list[int] = []  # the seq each entry's part was stored at
        self.position: dict[str, int] = {}  # part id -> its index in entries

    def json(self) -> dict[str, Any]:
        return {"info": self.info, "parts": list(self.entries)}  # a copy: entries change


class _States:
    """The infos, parts and state changes of one session, event by event."""

    def __init__(self) -> None:
        # What is not yet written; the *_base counts are what was written before, so an
        # index into the file's infos or parts stays global across chunks.
        self.infos: list[Any] = []
        self.parts: list[Any] = []
        self.infos_base = self.parts_base = 0
        self.messages: dict[str, _Message] = {}  # in message order
        self.size = 0  # messages and parts in the state: a frame's entries
        self.changes: list[list[Any] | None] = [None]
        self.frames: list[list[Any]] = [[0, []]]
        self.last_frame = 0

    def take(self) -> dict[str, Any]:
        """The infos, parts, changes and frames gathered since the last take."""
        out = {"infos": self.infos, "parts": self.parts, "changes": self.changes,
               "frames": self.frames}
        self.infos_base += len(self.infos)
        self.parts_base += len(self.parts)
        self.infos, self.parts, self.changes, self.frames = [], [], [], []
        return out

    def _put(self, seq: int, m: _Message, at: int, view: v.Part) -> int:
        """Store ``view`` as the part at ``at`` (appended when ``at`` is past the end)."""
        k = self.parts_base + len(self.parts)
        self.parts.append(converter.unstructure(view, v.Part))
        if at == len(m.entries):
            m.entries.append(k)
            m.views.append(view)
            m.since.append(seq)
            self.size += 1
        else:
            m.entries[at], m.views[at], m.since[at] = k, view, seq
        return k

    def append(self, seq: int, e: ev.PartEvent, proj: WithPartsProjection) -> Change:
        """A delta: its part's entry becomes (or stays) its stored JSON plus deltas."""
        m = self.messages.get(e.message_id)
        at = m.position.get(e.part_id) if m is not None else None
        if m is None or at is None:
            return self.part(seq, e, proj)
        entry = m.entries[at]
        if not isinstance(entry, int):
            return None  # already [part, since]: the page reads the new delta itself
        m.entries[at] = [entry, m.since[at]]
        return {"at": at, "part": m.entries[at]}

    def part(self, seq: int, e: ev.PartEvent, proj: WithPartsProjection) -> Change:
        """Any other part event: only its part changed, so only its part is stored."""
        m = self.messages.get(e.message_id)
        if m is None:
            raise TypeError(f"part event {seq} names message {e.message_id}, not started")
        at = m.position.setdefault(e.part_id, len(m.entries))
        return {"at": at, "part": self._put(seq, m, at, proj.part(e.message_id, e.part_id))}

    def message(self, mid: str, proj: WithPartsProjection) -> Change:
        """A message event (a start or a completion): the message's info. It changes no
        part, which the walk over the parts checks (once or twice a message)."""
        view = proj.message(mid)
        m = self.messages.get(mid)
        new = m is None
        if m is None:
            m = self.messages[mid] = _Message()
            self.size += 1
        if len(view.parts) != len(m.views) or any(  # a part with deltas has a new view
                a is not b and isinstance(entry, int)
                for a, b, entry in zip(view.parts, m.views, m.entries, strict=True)):
            raise TypeError(f"a message event changed the parts of {mid}: the export "
                            "stores parts only at part events")
        if view.info is m.info_view:
            return None
        m.info, m.info_view = self.infos_base + len(self.infos), view.info
        self.infos.append(converter.unstructure(view.info, v.MessageInfo))
        return m.json() if new else {"info": m.info}

    def event(self, seq: int, e: ev.Event, proj: WithPartsProjection) -> list[Any] | None:
        """``[message id, change]`` for event ``seq`` (folded into ``proj``), or None."""
        change: Change
        if type(e) in APPENDS:  # the most frequent: the first test
            delta = cast(ev.PartEvent, e)
            change = self.append(seq, delta, proj)
            return None if change is None else [delta.message_id, change]
        if type(e) in UNCHANGING:  # before the message events: mail events name one too
            return None
        if isinstance(e, ev.PartEvent):
            change = self.part(seq, e, proj)
        elif isinstance(e, ev.MessageEvent):
            change = self.message(e.message_id, proj)
        else:
            raise TypeError(f"the export cannot place {type(e).__name__}: WithParts folds "
                            "it, but it names no message")
        return None if change is None else [e.message_id, change]

    def frame(self, seq: int) -> None:
        self.frames.append([seq, [[mid, m.json()] for mid, m in self.messages.items()]])
        self.last_frame = seq


def export_pieces(store: Store, session_id: str, *, frame_every: int = FRAME_EVERY,
                  chunk: int = CHUNK) -> Iterator[dict[str, Any]]:
    """The page's data in pieces of ``chunk`` events, in one pass over the log.

    Each piece holds its events, their changes and marks, and the infos, parts and
    frames first stored in it; the page concatenates them. Only the current state
    (the fold's, and one entry per part) is held between pieces, so memory does not
    grow with the log."""
    proj = WithPartsProjection(session_id)
    st = _States()
    events: list[dict[str, Any]] = []
    marks: list[int] = []
    starts: dict[str, int] = {}  # message id -> the seq it starts at (the usage chart)
    for e in store.read(session_id):
        proj.apply(e)
        events.append(event_json(e))
        seq = e.seq
        if isinstance(e, ev.MessageStarted):
            marks.append(seq)
            starts.setdefault(e.message_id, seq)
        st.changes.append(st.event(seq, e, proj))
        if seq - st.last_frame >= max(frame_every, st.size):
            st.frame(seq)
        if len(events) >= chunk:
            yield {**st.take(), "events": events, "marks": marks}
            events, marks = [], []
    yield {**st.take(), "events": events, "marks": marks, "usage": export_usage(proj, starts)}


def export_usage(proj: WithPartsProjection, starts: dict[str, int]) -> dict[str, Any]:
    """The usage chart's data, as ``Viewer.usage`` answers it, for the final state: one
    row per message (whose view the export has built already), so it costs a few
    numbers per message, not the log."""
    messages = proj.messages()
    rows = [{**row, "seq": starts.get(m.info.id)} for i, m in enumerate(messages)
            if (row := usage_row(i, m)) is not None]
    return {"version": proj.seq, "ready": True, "messages": rows, "total": usage(messages)}


def export_head(store: Store, session_id: str) -> dict[str, Any]:
    """What the page needs before the pieces: the session's row and its verification."""
    return {"session": {"info": session_json(store, session_id)},
            "verify": Viewer(store).verify(session_id), "window": WINDOW}


def export_data(store: Store, session_id: str, *, frame_every: int = FRAME_EVERY
                ) -> dict[str, Any]:
    """The page's data as one object (the pieces joined, as the page joins them)."""
    data = export_head(store, session_id)
    whole: dict[str, list[Any]] = {k: [] for k in (*PIECE_KEYS, "marks")}
    for piece in export_pieces(store, session_id, frame_every=frame_every):
        for k, items in whole.items():
            items.extend(piece[k])
        if "usage" in piece:  # the last piece's
            data["usage"] = piece["usage"]
    data["session"].update(whole)
    return data


_APP_CSS = '<link rel="stylesheet" href="/static/app.css">'
_APP_JS = '<script src="/static/app.js"></script>'
_MD_JS = '<script src="/static/md.js"></script>'


def write_html(store: Store, session_id: str, out: TextIO, *,
               frame_every: int = FRAME_EVERY, chunk: int = CHUNK) -> None:
    """Write the viewer page with the session's data inlined (opens from a file,
    offline), streaming: each piece of the data is written as it is made."""
    page = static_text("index.html")
    css, js = static_text("app.css"), static_text("app.js")
    before, after = page.split(_APP_JS)
    before = before.replace(_MD_JS, f"<script>\n{static_text('md.js')}</script>")
    out.write(before.replace(_APP_CSS, f"<style>\n{css}</style>"))
    out.write('<script type="application/json" id="convlog-export">'
              f"{script_json(export_head(store, session_id))}</script>\n")
    for piece in export_pieces(store, session_id, frame_every=frame_every, chunk=chunk):
        out.write(f'<script type="application/json" class="convlog-piece">'
                  f"{script_json(piece)}</script>\n")
    out.write(f"<script>\n{js}</script>")
    out.write(after)


def render_html(store: Store, session_id: str, *, frame_every: int = FRAME_EVERY,
                chunk: int = CHUNK) -> str:
    """:func:`write_html` into a string."""
    buf = io.StringIO()
    write_html(store, session_id, buf, frame_every=frame_every, chunk=chunk)
    return buf.getvalue()
