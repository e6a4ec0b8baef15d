"""``convlog serve``: a time-travel viewer for sessions (needs the ``serve`` extra).

``render_html`` (the static export) needs only the core dependencies; the ASGI
app in ``projections.serve.app`` needs Starlette, and the command uvicorn.
"""

from projections.serve.export import render_html
from projections.serve.state import Viewer

__all__ = ["Viewer", "render_html"]
