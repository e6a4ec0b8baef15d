"""The seed's REST listing and a send endpoint, as starlette routes.

``mailbox_routes(store)`` returns the routes; the viewer's ASGI app (``convlog
serve``) mounts them beside its own. Auth: ``Authorization: Bearer <session
token>`` from ``authenticate``; a token only opens its own project.

- ``GET /projects/{id}/agents/{agentId}/chat/messages?after=CURSOR&since=TIME&limit=N``:
  the agent's sent and received messages in log order; ``next_cursor`` pages on.
- ``POST`` the same path with ``{"content", "related_task_id"?, "client_message_id"?}``:
  the token's agent sends to ``agentId`` (201).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine.mailbox import MailboxError, check_cursor, check_limit
from engine.store.base import Store
from projections.mailbox.aipm import parse_iso
from projections.mailbox.mailbox import Mailbox, MailboxLog
from projections.mailbox.wire import wire

PATH = "/projects/{project_id}/agents/{agent_id}/chat/messages"


def _token(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise MailboxError("invalid_session_token", "send Authorization: Bearer <token>")
    return token.strip()


def _error(err: MailboxError) -> JSONResponse:
    return JSONResponse({"error": err.code, "status": err.status, "message": err.detail},
                        status_code=err.status)


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        if name == "since":
            try:
                return parse_iso(value)
            except ValueError:
                pass
        raise MailboxError("invalid_request", f"{name} must be an integer") from None


def mailbox_routes(store: Store) -> list[Route]:
    log = MailboxLog(store)

    def listing(project_id: str, agent_id: str, token: str, *, after: int,
                since: int | None, limit: int) -> dict[str, Any]:
        box = Mailbox(log, project_id)
        box.agent_of(token)  # 401 unless the token is valid for this project
        page = box.messages(agent_id, after=after, since=since, limit=limit)
        return {"messages": [wire(m) for m in page],
                "next_cursor": page[-1].cursor if page else after}

    async def get(request: Request) -> JSONResponse:
        try:
            q = request.query_params
            limit = _int(q.get("limit"), "limit")
            after = _int(q.get("after"), "after")
            # Validated as at every door (engine.mailbox.check_limit): never clamped.
            body = await run_in_threadpool(
                listing, request.path_params["project_id"], request.path_params["agent_id"],
                _token(request), after=check_cursor(0 if after is None else after),
                since=_int(q.get("since"), "since"),
                limit=check_limit(100 if limit is None else limit))
        except MailboxError as err:
            return _error(err)
        return JSONResponse(body)

    def send(project_id: str, agent_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        content = body.get("content")
        related = body.get("related_task_id")
        client_id = body.get("client_message_id")
        if not isinstance(content, str) or not all(
                v is None or isinstance(v, str) for v in (related, client_id)):
            raise MailboxError("invalid_request", "content (a string) is required")
        msg = Mailbox(log, project_id).send(token, agent_id, content, related_task_id=related,
                                            client_message_id=client_id)
        return {"success": True, "message_id": msg.id, "target_agent_id": agent_id}

    async def post(request: Request) -> JSONResponse:
        try:
            try:
                body = await request.json()
            except ValueError:
                raise MailboxError("invalid_request", "the body must be JSON") from None
            if not isinstance(body, dict):
                raise MailboxError("invalid_request", "the body must be a JSON object")
            out = await run_in_threadpool(send, request.path_params["project_id"],
                                          request.path_params["agent_id"], _token(request),
                                          body)
        except MailboxError as err:
            return _error(err)
        return JSONResponse(out, status_code=201)

    return [Route(PATH, get, methods=["GET"]), Route(PATH, post, methods=["POST"])]
