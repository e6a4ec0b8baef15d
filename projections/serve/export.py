"""One self-contained HTML file for a session: the page, its data, no server.

Every state is stored as a list of message versions (each distinct message JSON
once), so the scrubber works offline without folding events in JavaScript.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from engine.store.base import Store
from projections import views as v
from projections.json import converter
from projections.serve.state import WINDOW, Viewer, event_json, session_json
from projections.withparts import WithPartsProjection


def static_text(name: str) -> str:
    return resources.files("projections.serve").joinpath("static", name).read_text("utf-8")


def script_json(data: Any) -> str:
    """JSON that cannot close its <script> element nor open a comment in it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def export_data(store: Store, session_id: str) -> dict[str, Any]:
    viewer = Viewer(store)
    proj = WithPartsProjection(session_id)
    versions: list[Any] = []
    index: dict[str, int] = {}
    current: dict[str, int] = {}  # message id -> its version's index, in message order
    states: list[list[int]] = [[]]
    events: list[dict[str, Any]] = []
    marks: list[int] = []
    for e in store.read(session_id):
        proj.apply(e)
        ev = event_json(e)
        events.append(ev)
        if ev["tag"] == "message.started":
            marks.append(e.seq)
        touched = ev.get("message_id")
        ids = [touched] if isinstance(touched, str) else [m.info.id for m in proj.messages()]
        for mid in ids:
            try:
                data = converter.unstructure(proj.message(mid), v.WithParts)
            except KeyError:  # the event removed the message
                current.pop(mid, None)
                continue
            key = json.dumps(data, sort_keys=True)
            if key not in index:
                index[key] = len(versions)
                versions.append(data)
            current[mid] = index[key]
        states.append(list(current.values()))
    info = session_json(store, session_id)
    return {"session": {"info": info, "versions": versions, "states": states,
                        "events": events, "marks": marks},
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
