"""The scripted model server: 127.0.0.1 only, bounded, every request and every event
it sends written to a JSONL log (the ground truth the CLIs' transcripts are held to).

Routes: ``POST /v1/messages`` (Anthropic, SSE), ``POST /v1/responses`` (OpenAI
Responses, SSE with ``sequence_number``), ``POST /v1/chat/completions`` (SSE or one
JSON), ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` and
``:generateContent`` (Gemini). Anything else is a 404 (Claude Code's ``HEAD /``).
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.realclients import wire
from tests.realclients.script import Reply, Turn, reply

# Request headers worth keeping: they carry the CLIs' session and agent ids.
KEPT_HEADERS = ("x-claude-code-session-id", "x-claude-code-agent-id", "session-id",
                "session_id", "thread-id", "x-codex-parent-thread-id", "x-openai-subagent",
                "x-session-id", "x-parent-session-id", "conversation_id", "user-agent")


class ScriptedServer:
    def __init__(self, log_path: Path, *, max_requests: int = 200,
                 bodies_dir: Path | None = None) -> None:
        self.log_path = log_path
        self.max_requests = max_requests
        self.bodies_dir = bodies_dir
        self.count = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> ScriptedServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_number(self) -> int:
        with self.lock:
            self.count += 1
            return self.count

    def log(self, entry: dict[str, Any]) -> None:
        with self.lock, self.log_path.open("a") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the JSONL log is the record

        def do_HEAD(self) -> None:
            self._status(404, b"")

        def do_GET(self) -> None:
            self._status(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            n = server.next_number()
            url = urlsplit(self.path)
            route = url.path
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._status(400, b'{"error": "not json"}')
                return
            if server.bodies_dir is not None:
                server.bodies_dir.mkdir(parents=True, exist_ok=True)
                (server.bodies_dir / f"{n:03}.json").write_bytes(raw)
            entry: dict[str, Any] = {
                "n": n, "path": route,
                "headers": {k: v for k, v in self.headers.items()
                            if k.lower() in KEPT_HEADERS}}
            if n > server.max_requests:
                entry["refused"] = "over the request budget"
                server.log(entry)
                self._status(429, b'{"error": {"message": "request budget spent"}}')
                return
            if route.endswith("/messages"):
                self._anthropic(n, body, entry)
            elif route.endswith("/responses"):
                self._responses(n, body, entry)
            elif route.endswith("/chat/completions"):
                self._chat(n, body, entry)
            elif ":streamGenerateContent" in route or ":generateContent" in route:
                self._gemini(n, body, entry, route)
            else:
                entry["refused"] = "unknown route"
                server.log(entry)
                self._status(404, b'{"error": "not found"}')

        def _record(self, entry: dict[str, Any], turn: Turn, r: Reply) -> None:
            entry.update(wire=turn.wire, model=turn.model, step=r.step, prompt=turn.prompt,
                         rounds=turn.rounds, tools=turn.tools,
                         results=[vars(x) for x in turn.results])

        def _error(self, entry: dict[str, Any], body: dict[str, Any]) -> None:
            entry["status"] = 400
            entry["error_body"] = body
            server.log(entry)
            self._status(400, json.dumps(body).encode())

        def _anthropic(self, n: int, body: dict[str, Any], entry: dict[str, Any]) -> None:
            turn = wire.anthropic_turn(body)
            r = reply(turn, n)
            self._record(entry, turn, r)
            if r.error:
                self._error(entry, wire.anthropic_error(r.error))
                return
            events = list(wire.anthropic_events(r, n, turn.model))
            self._sse(entry, ((e["type"], e) for e in events))

        def _responses(self, n: int, body: dict[str, Any], entry: dict[str, Any]) -> None:
            turn = wire.responses_turn(body)
            r = reply(turn, n)
            self._record(entry, turn, r)
            if r.error:
                self._error(entry, wire.responses_error(r.error))
                return
            events = [{**e, "sequence_number": i}
                      for i, e in enumerate(wire.responses_events(r, n, turn.model))]
            self._sse(entry, ((e["type"], e) for e in events))

        def _chat(self, n: int, body: dict[str, Any], entry: dict[str, Any]) -> None:
            turn = wire.chat_turn(body)
            r = reply(turn, n)
            self._record(entry, turn, r)
            if r.error:
                self._error(entry, wire.openai_error(r.error))
                return
            if not body.get("stream"):
                whole = wire.chat_whole(r, n, turn.model)
                entry["events"] = [whole]
                server.log(entry)
                self._status(200, json.dumps(whole).encode())
                return
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = list(wire.chat_events(r, n, turn.model, usage))
            self._sse(entry, ((None, e) for e in events), done=True)

        def _gemini(self, n: int, body: dict[str, Any], entry: dict[str, Any],
                    route: str) -> None:
            model = unquote(route.rsplit("/", 1)[-1].split(":", 1)[0])
            turn = wire.gemini_turn(body, model)
            r = reply(turn, n)
            self._record(entry, turn, r)
            if r.error:
                self._error(entry, wire.gemini_error(r.error))
                return
            if ":generateContent" in route:
                whole = wire.gemini_whole(r, n, model)
                entry["events"] = [whole]
                server.log(entry)
                self._status(200, json.dumps(whole).encode())
                return
            self._sse(entry, ((None, e) for e in wire.gemini_chunks(r, n, model)))

        def _sse(self, entry: dict[str, Any], events: Iterable[tuple[str | None, Any]],
                 done: bool = False) -> None:
            sent = []
            chunks = []
            for name, data in events:
                sent.append(data)
                head = f"event: {name}\n" if name else ""
                chunks.append(f"{head}data: {json.dumps(data)}\n\n".encode())
            if done:
                chunks.append(b"data: [DONE]\n\n")
            entry["status"] = 200
            entry["events"] = sent
            server.log(entry)  # before sending: a CLI may hang up as soon as it has all
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("content-length", str(sum(map(len, chunks))))
            self.end_headers()
            for c in chunks:
                self.wfile.write(c)
            self.wfile.flush()

        def _status(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def serve(log_path: Path, bodies: Path | None = None) -> None:
    """``python -m tests.realclients.server LOG``: run until interrupted (by hand)."""
    with ScriptedServer(log_path, bodies_dir=bodies) as s:
        print(s.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
