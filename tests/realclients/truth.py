"""What a fixture's server log says was sent (the ground truth), and what convlog
recorded when it imported the fixture's transcripts (the path of ``convlog import``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.importers.base import Plan
from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-cli"


@dataclass
class SentCall:
    id: str
    name: str
    input: Any


@dataclass
class Sent:
    """One answer of the scripted model, read back from the events it sent."""

    n: int
    step: str
    session: str  # the session header the request carried
    texts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: list[SentCall] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    error: str = ""
    whole: bool = False  # answered with one JSON body, not a stream


@dataclass
class Truth:
    name: str  # the fixture's folder, "<tool>-<version>"
    sent: list[Sent]
    results: dict[str, tuple[str, bool | None]]  # call id -> (output, is_error) seen
    steps: list[dict[str, Any]]

    @property
    def tool(self) -> str:
        return self.name.rsplit("-", 1)[0]

    def answers(self) -> list[Sent]:
        """The answers to the conversation (not the CLIs' side calls)."""
        return [s for s in self.sent if s.step not in ("json", "title")]


def load(folder: Path) -> Truth:
    sent: list[Sent] = []
    results: dict[str, tuple[str, bool | None]] = {}
    for line in (folder / "server.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if "wire" not in entry:
            continue
        for r in entry.get("results", []):
            results.setdefault(r["call_id"], (r["output"], r["is_error"]))
        headers = {k.lower(): val for k, val in entry.get("headers", {}).items()}
        s = Sent(entry["n"], entry["step"], headers.get("x-claude-code-session-id")
                 or headers.get("session-id") or headers.get("x-session-id") or "")
        if entry.get("status") == 400:
            s.error = json.dumps(entry["error_body"])
        else:
            events = entry.get("events", [])
            s.whole = len(events) == 1 and events[0].get("object") in (
                "chat.completion", None) and "candidates" not in events[0]
            _READ[entry["wire"]](s, events)
        sent.append(s)
    steps = json.loads((folder / "steps.json").read_text())
    return Truth(folder.name, sent, results, steps)


def _anthropic(s: Sent, events: list[dict[str, Any]]) -> None:
    blocks: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["type"] == "message_start":
            s.input_tokens = e["message"]["usage"]["input_tokens"]
        elif e["type"] == "content_block_start":
            blocks[e["index"]] = {**e["content_block"], "json": ""}
        elif e["type"] == "content_block_delta":
            b, d = blocks[e["index"]], e["delta"]
            b["text"] = b.get("text", "") + d.get("text", "")
            b["thinking"] = b.get("thinking", "") + d.get("thinking", "")
            b["json"] += d.get("partial_json", "")
        elif e["type"] == "message_delta":
            s.output_tokens = e["usage"]["output_tokens"]
    for b in blocks.values():
        if b["type"] == "text":
            s.texts.append(b["text"])
        elif b["type"] == "thinking":
            s.thinking.append(b["thinking"])
        elif b["type"] == "tool_use":
            s.calls.append(SentCall(b["id"], b["name"], json.loads(b["json"])))


def _responses(s: Sent, events: list[dict[str, Any]]) -> None:
    done = next(e["response"] for e in events if e["type"] == "response.completed")
    s.input_tokens = done["usage"]["input_tokens"]
    s.output_tokens = done["usage"]["output_tokens"]
    for item in done["output"]:
        if item["type"] == "message":
            s.texts += [c["text"] for c in item["content"]]
        elif item["type"] == "reasoning":
            s.thinking += [c["text"] for c in item["summary"]]
        elif item["type"] == "function_call":
            s.calls.append(SentCall(item["call_id"], item["name"],
                                    json.loads(item["arguments"])))


def _chat(s: Sent, events: list[dict[str, Any]]) -> None:
    text, calls = "", dict[int, dict[str, str]]()
    for e in events:
        if e.get("usage"):
            s.input_tokens = e["usage"]["prompt_tokens"]
            s.output_tokens = e["usage"]["completion_tokens"]
        for choice in e.get("choices", []):
            delta = choice.get("delta") or choice.get("message") or {}
            text += delta.get("content") or ""
            if delta.get("reasoning_content"):
                s.thinking.append(delta["reasoning_content"])
            for i, tc in enumerate(delta.get("tool_calls") or []):
                c = calls.setdefault(tc.get("index", i), {"id": "", "name": "", "args": ""})
                c["id"] = tc.get("id") or c["id"]
                c["name"] = tc["function"].get("name") or c["name"]
                c["args"] += tc["function"].get("arguments") or ""
    if text:
        s.texts.append(text)
    s.calls = [SentCall(c["id"], c["name"], json.loads(c["args"])) for c in calls.values()]


def _gemini(s: Sent, events: list[dict[str, Any]]) -> None:
    text = ""
    for e in events:
        s.input_tokens = e["usageMetadata"]["promptTokenCount"]
        s.output_tokens = e["usageMetadata"]["candidatesTokenCount"]
        for p in e["candidates"][0]["content"]["parts"]:
            if p.get("thought"):
                s.thinking.append(p["text"])
            elif "functionCall" in p:
                fc = p["functionCall"]
                s.calls.append(SentCall(fc.get("id", ""), fc["name"], fc["args"]))
            else:
                text += p.get("text", "")
    if text:
        s.texts.append(text)


_READ = {"anthropic": _anthropic, "responses": _responses, "chat": _chat, "gemini": _gemini}


@dataclass
class Recorded:
    """convlog's import of the fixture: its plan and each session's history."""

    plan: Plan
    history: dict[str, list[v.WithParts]]

    def kinds(self) -> dict[str, str]:
        return {s.id: s.kind for s in self.plan.sessions}

    def parts(self, session: str | None = None) -> list[tuple[str, v.Part]]:
        """(role, part) of every message, of one session or of all."""
        out: list[tuple[str, v.Part]] = []
        for sid, messages in self.history.items():
            if session is None or sid == session:
                out += [(m.info.role, p) for m in messages for p in m.parts]
        return out

    def texts(self, role: str, session: str | None = None) -> list[str]:
        return [p.text for r, p in self.parts(session)
                if r == role and isinstance(p, v.TextPart)]

    def tools(self) -> dict[str, v.ToolPart]:
        """Tool parts by call id; a fork repeats its parent's, the first one is kept."""
        out: dict[str, v.ToolPart] = {}
        for _, p in self.parts():
            if isinstance(p, v.ToolPart):
                out.setdefault(p.call_id, p)
                # Gemini CLI saves the model's call id as "<tool>__<id>" (it sends the
                # model back the id as it was)
                if p.call_id.startswith(f"{p.tool}__"):
                    out.setdefault(p.call_id[len(p.tool) + 2:], p)
        return out

    def holding(self, text: str) -> list[str]:
        """The sessions whose history has a user text containing ``text``."""
        return [sid for sid in self.history if any(text in t for t in self.texts("user", sid))]


def record(folder: Path) -> Recorded:
    plan = plan_path(folder / "transcripts")
    store = written(plan)
    return Recorded(plan, {s.id: at(store, s.id).messages() for s in plan.sessions})


def fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "server.jsonl").exists())
