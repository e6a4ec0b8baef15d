"""The replay server: a raw ASGI app answering model calls from a recording.

A request is matched to a recorded call of the same API by its conversation
(:func:`engine.proxy.conversation.match`): the recorded call whose entries the
request holds in order, with as many assistant turns, answers; when several
do, the one naming the most entries, then one not served yet. The answer is
the recorded one: its stream (``stream: true``, Gemini's
``streamGenerateContent``), its whole object, or the HTTP error it was.

No match is a 404 whose JSON names the nearest recorded call and where the
request left it (``convlog.diverged``): the first recorded entry the request
does not hold, and what the request has there.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from engine.proxy.conversation import Entry, Match, conversation, entries, match
from engine.proxy.routes import GEMINI, route
from projections.replay.catalog import RecordedCall
from projections.replay.streams import sse, whole

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
JSON = dict[str, Any]


def choose(calls: Sequence[RecordedCall], provider: str, request: Sequence[Entry],
           served: dict[str, int]) -> tuple[RecordedCall | None, RecordedCall | None, Match | None]:
    """(the call that answers, else None; the nearest call; its match)."""
    best: tuple[tuple[int, int, int], RecordedCall] | None = None
    nearest: tuple[tuple[int, int, int], RecordedCall, Match] | None = None
    for index, call in enumerate(calls):
        if call.provider != provider:
            continue
        m = match(call.entries, request)
        if m.complete:
            rank = (m.total, -min(served.get(call.context_id, 0), 1), -index)
            if best is None or rank > best[0]:
                best = (rank, call)
        closeness = (m.matched, int(m.turns_equal), -abs(m.total - len(request)))
        if nearest is None or closeness > nearest[0]:
            nearest = (closeness, call, m)
    if best is not None:
        return best[1], None, None
    if nearest is None:
        return None, None, None
    return None, nearest[1], nearest[2]


def divergence(call: RecordedCall, m: Match, request: Sequence[Entry]) -> JSON:
    if m.matched < m.total:
        expected = call.entries[m.matched].summary()
        got = request[m.request_at].summary() if m.request_at < len(request) else \
            "the end of the request"
        return {"entry": m.matched, "expected": expected, "got": got}
    recorded = sum(e.assistant for e in call.entries)
    sent = sum(e.assistant for e in request)
    return {"entry": m.total, "expected": f"{recorded} assistant turns",
            "got": f"{sent} assistant turns"}


class ReplayApp:
    def __init__(self, calls: Sequence[RecordedCall]) -> None:
        self.calls = list(calls)
        self.served: dict[str, int] = {}
        self.log: list[JSON] = []  # each request: what answered it (or the 404)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        found = route(scope["method"], scope["path"])
        if found is None:
            await _json(send, 404, {"type": "error", "error": {
                "type": "not_found_error",
                "message": f"convlog replay serves model calls only, not "
                           f"{scope['method']} {scope['path']}"}})
            return
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = None
        if not isinstance(request, dict):
            await _json(send, 400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "the body is not a JSON object"}})
            return
        provider = found.provider
        asked = entries(provider, conversation(provider, request))
        call, nearest, m = choose(self.calls, provider, asked, self.served)
        if call is None:
            report: JSON = {"type": "error", "error": {
                "type": "not_found_error", "code": "no_recorded_call",
                "message": "convlog replay: no recorded call matches this request"}}
            if nearest is not None and m is not None:
                where = divergence(nearest, m, asked)
                report["error"]["message"] += (
                    f"; nearest: message {nearest.context_id} of session "
                    f"{nearest.session_id} (seq {nearest.seq}), diverged at entry "
                    f"{where['entry']}: expected {where['expected']}, got {where['got']}")
                report["convlog"] = {"nearest": nearest.describe(), "diverged": where}
            self.log.append({"matched": None, **report.get("convlog", {})})
            await _json(send, 404, report)
            return
        self.served[call.context_id] = self.served.get(call.context_id, 0) + 1
        self.log.append({"matched": call.describe()})
        answer = call.answer
        if answer is None:
            await _json(send, 502, {"type": "error", "error": {
                "type": "api_error", "message": "the recorded call has no answer"}})
            return
        if answer.status >= 400:
            await _json(send, answer.status, answer.body)
            return
        streaming = found.streaming if provider == GEMINI else bool(request.get("stream"))
        if not streaming:
            await _json(send, 200, whole(provider, answer))
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache")]})
        for chunk in sse(provider, answer):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _json(send: Send, status: int, value: Any) -> None:
    body = (value if isinstance(value, str) else json.dumps(value)).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
