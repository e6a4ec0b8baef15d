"""The ASGI app behind ``convlog serve``: a JSON API under /api/ and the static page.

Paths never reach the filesystem: the store is fixed when the app is built,
session ids are checked by the store, and static files are read from this
package by name from a fixed list.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSON
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from engine.codec import json_text
from engine.errors import UnknownSession
from engine.session import Session
from engine.store.anchor import Anchor
from engine.store.base import Store
from projections.serve.export import static_text
from projections.serve.guard import MAX_BODY, Guard, TooLarge, allowed_hosts
from projections.serve.mailbox import MailboxPage
from projections.serve.state import WINDOW, Viewer, sessions_json


class JSONResponse(_StarletteJSON):
    """Starlette's, but a lone surrogate in the log's text (engine.codec holds them) is
    written as its escape instead of failing the UTF-8 encode."""

    def render(self, content: Any) -> bytes:
        try:  # msgspec first: a state answer is ~100 KB, 5x faster than the stdlib's
            return msgspec.json.encode(content)
        except (UnicodeEncodeError, TypeError, OverflowError):
            return json_text(content)

STATIC = {  # name -> media type; nothing else is served
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "md.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# The page loads only its own files and talks only to its own origin.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

Handler = Callable[[Request], Awaitable[Response]]


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer") from exc


def _held(raw: str | None) -> tuple[int, int] | None:
    if not raw:
        return None
    first, sep, last = raw.partition("-")
    if not (sep and first.isdigit() and last.isdigit()):
        raise ValueError("held must be first-last (two integers)")
    return int(first), int(last)


def server_timing(arrived: float, began: float, ready: float, encoded: float, *, cpu: float,
                  inline: bool) -> str:
    """A state answer's ``Server-Timing`` header (ms; the page reads it back through the
    request's Resource Timing, benchmarks/viewer.py splits a scrub with it): the wait
    from the request's arrival at the handler to the work's start (a worker thread's
    hand-over, ``desc=thread``; near 0 when made inline), the work (wall) and its CPU,
    and the JSON encoding."""
    return (f"queue;dur={(began - arrived) * 1000:.2f};desc={'inline' if inline else 'thread'}, "
            f"compute;dur={(ready - began) * 1000:.2f}, cpu;dur={cpu * 1000:.2f}, "
            f"encode;dur={(encoded - ready) * 1000:.2f}")


def create_app(store: Store, *, allow_writes: bool = False, token: str | None = None,
               poll: float = 0.2, every: int = 64,
               anchors: Iterable[Anchor] = (), public_mailbox: bool = False,
               host: str | None = None, max_body: int = MAX_BODY,
               inline: bool = True) -> Starlette:
    """The viewer for ``store``. Writes (fork) need ``allow_writes`` and ``token``;
    ``anchors`` (``convlog anchor``) are what the verify badge checks the log against.
    A mailbox project's messages need a session token of that project
    (``Authorization: Bearer``) unless ``public_mailbox`` (``serve --public``).

    It answers only requests for the loopback names or ``host`` (the address it is
    bound to; see guard.py), with bodies of at most ``max_body`` bytes. With ``inline``
    a state answer expected to be cheap is made on the thread that read the request
    (``Viewer.cheap``); without, every answer goes to a worker thread (the benchmark
    compares the two)."""
    if allow_writes and not token:
        raise ValueError("writes need a token")
    viewer = Viewer(store, every=every, anchors=anchors)
    mailbox = MailboxPage(store)

    def guarded(fn: Callable[[Request], Awaitable[Any]]) -> Handler:
        async def handler(request: Request) -> Response:
            try:
                result = await fn(request)
            except (UnknownSession, KeyError) as exc:
                what = "unknown session" if isinstance(exc, UnknownSession) else "not found"
                return JSONResponse({"error": f"{what}: {exc}"}, status_code=404)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            if isinstance(result, Response):
                return result
            return JSONResponse(result)
        return handler

    def sync(fn: Callable[..., Any], *args: Any, **kw: Any) -> Awaitable[Any]:
        return asyncio.to_thread(fn, *args, **kw)

    async def page(request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(static_text(name), media_type=STATIC[name],
                        headers={"Content-Security-Policy": CSP,
                                 "X-Content-Type-Options": "nosniff"})

    async def config(request: Request) -> Any:
        def answer() -> dict[str, Any]:
            known = {info.id for info in store.sessions()}
            return {"writes": allow_writes,
                    "anchors": [{"session": a.session_id, "seq": a.seq,
                                 "present": a.session_id in known}
                                for a in viewer.anchors.values()]}
        return await sync(answer)

    async def sessions(request: Request) -> Any:
        def answer() -> Response:
            # The log position is read before the list: a page compares it with the
            # store feed's positions (/api/live), so an append that lands between its
            # list and its feed's first message still lists the sessions again.
            position = store.last_position()
            return JSONResponse(sessions_json(store),
                                headers={"X-Convlog-Position": str(position)})
        return await sync(answer)

    async def search(request: Request) -> Any:
        return await sync(viewer.search, request.query_params.get("q", ""))

    async def state(request: Request) -> Any:
        arrived = time.perf_counter()
        sid, seq = request.path_params["sid"], _int(request, "seq")
        start, count = _int(request, "start"), _int(request, "count", WINDOW) or WINDOW
        marks = request.query_params.get("marks") != "0"
        # A delta against the messages the page holds: ``have`` (their seq) and
        # ``held=first-last`` (their indexes, last excluded); see Viewer.state.
        have, held = _int(request, "have"), _held(request.query_params.get("held"))
        if await request.is_disconnected():  # a scrub the page has moved past (aborted)
            return Response(status_code=499)
        began = cpu = 0.0

        def timed() -> dict[str, Any]:
            nonlocal began, cpu
            began, cpu = time.perf_counter(), time.thread_time()
            got = viewer.state(sid, seq, start=start, count=count, marks=marks, have=have,
                               held=held)
            cpu = time.thread_time() - cpu
            return got
        on_this_thread = inline and viewer.cheap(sid)
        # A cheap answer is made here, with no hand-over to a worker thread and back.
        answer = timed() if on_this_thread else await sync(timed)
        ready = time.perf_counter()
        body = JSONResponse(answer).body
        return Response(body, media_type="application/json", headers={
            "Server-Timing": server_timing(arrived, began, ready, time.perf_counter(), cpu=cpu,
                                           inline=on_this_thread)})

    async def lines(request: Request) -> Any:
        q = request.query_params
        seq = _int(request, "seq")
        if seq is None:
            raise ValueError("seq is required")
        where = (q.get("message", ""), q.get("part", ""), q.get("field", ""))
        return await sync(viewer.lines, request.path_params["sid"], seq, where,
                          first=_int(request, "from", 0) or 0,
                          count=_int(request, "count", 100) or 0)

    async def events(request: Request) -> Any:
        sid = request.path_params["sid"]
        first = _int(request, "from", 1) or 1
        last = _int(request, "to", first + 99)
        return await sync(viewer.events, sid, first, last if last is not None else first + 99)

    async def diff(request: Request) -> Any:
        q = request.query_params
        a_sid = q.get("a_session") or request.path_params["sid"]
        b_sid = q.get("b_session") or request.path_params["sid"]
        a, b = _int(request, "a"), _int(request, "b")
        if a is None or b is None:
            raise ValueError("a and b are required")
        return await sync(viewer.diff, a_sid, a, b_sid, b, start=_int(request, "start", 0) or 0,
                          count=_int(request, "count"))

    async def find(request: Request) -> Any:
        return await sync(viewer.find, request.path_params["sid"],
                          request.query_params.get("q", ""))

    async def spawner(request: Request) -> Any:
        child = request.query_params.get("child", "")
        if not child:
            raise ValueError("child is required")
        return await sync(viewer.spawner, request.path_params["sid"], child)

    async def usage(request: Request) -> Any:
        return await sync(viewer.usage, request.path_params["sid"])

    async def markers(request: Request) -> Any:
        return await sync(viewer.markers, request.path_params["sid"])

    async def verify(request: Request) -> Any:
        return await sync(viewer.verify, request.path_params["sid"])

    async def mailbox_summary(request: Request) -> Any:
        return await sync(mailbox.summary)

    async def mailbox_project(request: Request) -> Any:
        if not public_mailbox:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not await sync(mailbox.opens, given, request.path_params["project"]):
                return JSONResponse({"error": "invalid_session_token", "status": 401,
                                     "message": "reading a project needs a session token of "
                                                "that project (or serve --public)"},
                                    status_code=401)
        return await sync(mailbox.project, request.path_params["project"],
                          agent=request.query_params.get("agent") or None,
                          before=_int(request, "before"), limit=_int(request, "limit", 200) or 1)

    async def fork(request: Request) -> Any:
        if not allow_writes or token is None:
            return JSONResponse({"error": "writes are off (start with --allow-writes)"},
                                status_code=403)
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return JSONResponse({"error": "bad token"}, status_code=401)
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"the body is not JSON: {exc}") from None
        seq = body.get("seq") if isinstance(body, dict) else None
        # bool is an int in Python: `true` must not fork at seq 1.
        if type(seq) is not int:
            raise ValueError("seq must be an integer")
        sid = request.path_params["sid"]

        def do_fork() -> dict[str, Any]:
            child = Session.open(store, sid).fork(at=seq)
            return {"id": child.id, "parent": sid, "fork_seq": seq}
        return await sync(do_fork)

    async def live(request: Request) -> Response:
        sid = request.path_params["sid"]
        await sync(store.session_info, sid)  # 404 before the stream starts

        async def stream() -> AsyncIterator[str]:
            # Polls the version: cheap on every store, and a missed wake-up costs one poll.
            last = -1
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                try:
                    version = await sync(store.version, sid)
                except Exception:  # the store closed under a stopping server: end the stream
                    return
                if version != last:
                    last = version
                    yield f"data: {json.dumps({'version': version})}\n\n"
                await asyncio.sleep(poll)
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def store_live(request: Request) -> Response:
        """The store's log position as it moves: any append, to any session (a session
        another process imports with ``import --follow``, new or growing), tells the
        page to list the sessions again."""
        async def stream() -> AsyncIterator[str]:
            last = -1
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                try:
                    position = await sync(store.last_position)
                except Exception:  # the store closed under a stopping server: end the stream
                    return  # the page shows "offline" and its EventSource retries
                if position != last:
                    last = position
                    yield f"data: {json.dumps({'position': position})}\n\n"
                await asyncio.sleep(poll)
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page),
        Route("/api/live", guarded(store_live)),
        Route("/static/{name}", page),
        Route("/api/config", guarded(config)),
        Route("/api/sessions", guarded(sessions)),
        Route("/api/search", guarded(search)),
        Route("/api/sessions/{sid}/state", guarded(state)),
        Route("/api/sessions/{sid}/events", guarded(events)),
        Route("/api/sessions/{sid}/lines", guarded(lines)),
        Route("/api/sessions/{sid}/diff", guarded(diff)),
        Route("/api/sessions/{sid}/verify", guarded(verify)),
        Route("/api/sessions/{sid}/markers", guarded(markers)),
        Route("/api/sessions/{sid}/find", guarded(find)),
        Route("/api/sessions/{sid}/usage", guarded(usage)),
        Route("/api/sessions/{sid}/spawner", guarded(spawner)),
        Route("/api/sessions/{sid}/fork", guarded(fork), methods=["POST"]),
        Route("/api/sessions/{sid}/live", guarded(live)),
        Route("/api/mailbox", guarded(mailbox_summary)),
        Route("/api/mailbox/{project}", guarded(mailbox_project)),
    ]
    routes += _mailbox_routes(store, allow_writes=allow_writes)

    async def too_large(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"request bodies are limited to {max_body} bytes"},
                            status_code=413)
    return Starlette(routes=routes,
                     middleware=[Middleware(Guard, hosts=allowed_hosts(host),
                                            max_body=max_body)],
                     exception_handlers={TooLarge: too_large})


def _mailbox_routes(store: Store, *, allow_writes: bool) -> list[Route]:
    """The mailbox's HTTP API, when the store holds a mailbox (opening one would write).

    Listing needs an agent's token; sending is a write, so it is there only with writes on.
    """
    from projections.mailbox.mailbox import MAILBOX_SESSION  # noqa: PLC0415 - only if used

    if MAILBOX_SESSION not in {info.id for info in store.sessions()}:
        return []
    from projections.mailbox.http import mailbox_routes  # noqa: PLC0415

    return [r for r in mailbox_routes(store)
            if allow_writes or "POST" not in (r.methods or ())]
