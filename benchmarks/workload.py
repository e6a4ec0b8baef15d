"""A realistic, deterministic agent session, driven through real ``Session`` commands.

Each turn is a user message (sometimes with an attached file) and an assistant
message of one to five steps. A step streams reasoning and text as short deltas
(1-20 characters, some of them non-ASCII, like a provider's stream), and all
but the last step call tools: the arguments arrive as raw JSON fragments, some
calls need approval (a few are denied), running tools report progress, most
complete and some fail. Steps finish with token counts; now and then a step
leaves a patch or a snapshot part, a completed tool's output is compacted, a
retry is recorded, or the turn is aborted while a tool runs.

The shape is driven by a seeded ``random.Random`` and a stepping clock, so two
runs with the same seed and size produce the same events (ids aside, which come
from the engine's id generators). Per delta the generator only takes the next
chunk from a precomputed pool, so its own cost stays small next to the engine's.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from engine import events as ev
from engine.ids import part_id
from engine.session import PartRef, Session, StepClock
from engine.store.base import Store

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

_TEXT = (
    "the parser reads each line and splits it on commas before the fixtures run "
    "so the new semicolon format breaks every test that loads a table we should "
    "accept both separators keep the old behaviour for quoted fields and add a "
    "regression test déjà vu naïve café façade über straße 変更 テスト 修正 "
    "函数 参数 返回 错误 — \u201cquoted\u201d \u2018text\u2019 … ✓ → ⚠ 🙂 🚀 λ π ∑ ≤ ≥"
)
_WORDS = tuple(_TEXT.split())

_MODEL = ev.ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
_PATH = ev.PathInfo(cwd="/work/app", root="/work/app")
_TOOLS = ("read", "edit", "bash", "grep", "glob", "webfetch", "write", "list")


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:chars]


def _chunk_pool(rng: random.Random, size: int = 8192) -> list[str]:
    """Streaming chunks of 1-20 characters cut from prose (mostly ASCII, some not)."""
    text = _prose(rng, size * 12)
    pool: list[str] = []
    i = 0
    while len(pool) < size:
        n = rng.randint(1, 20) if rng.random() < 0.9 else rng.randint(1, 4)
        chunk = text[i:i + n]
        i += n
        if len(text) - i < 40:
            i = 0
        if chunk:
            pool.append(chunk)
    return pool


class Workload:
    """Records turns into a session until it holds at least ``target`` events."""

    def __init__(self, session: Session, *, seed: int = 7) -> None:
        self.s = session
        self.rng = random.Random(seed)
        self._pool = _chunk_pool(self.rng)
        self._next = 0
        self._call = 0
        self.turns = 0

    # ------------------------------------------------------------------ helpers

    def _chunk(self) -> str:
        i = self._next
        self._next = i + 1 if i + 1 < len(self._pool) else 0
        return self._pool[i]

    def _stream(self, ref: PartRef, count: int, delta: Callable[[PartRef, str], int]) -> None:
        chunk = self._chunk
        for _ in range(count):
            delta(ref, chunk())

    def _tokens(self) -> ev.Tokens:
        r = self.rng
        return ev.Tokens(input=r.randint(800, 60_000), output=r.randint(20, 2_000),
                         reasoning=r.randint(0, 800),
                         cache=ev.CacheTokens(read=r.randint(0, 50_000), write=r.randint(0, 4_000)))

    def _args(self, tool: str) -> dict[str, Any]:
        r = self.rng
        n = r.randint(1, 400)
        if tool == "bash":
            return {"command": r.choice(["pytest -x -q", "ls -la src", "git diff --stat",
                                         "make lint", "python -m build"]),
                    "description": _prose(r, r.randint(10, 60)), "timeout": 120_000}
        if tool in ("edit", "write"):
            return {"filePath": f"/work/app/src/module_{n}.py",
                    "oldString": _prose(r, r.randint(20, 200)),
                    "newString": _prose(r, r.randint(20, 300))}
        if tool in ("grep", "glob"):
            return {"pattern": r.choice(["def parse", "TODO", "*.py", "import re"]),
                    "path": "/work/app/src"}
        if tool == "webfetch":
            return {"url": f"https://docs.example.com/page/{n}", "format": "markdown"}
        return {"filePath": f"/work/app/src/module_{n}.py", "offset": 0, "limit": 2000}

    # ------------------------------------------------------------------ one tool call

    def _tool(self, m: str, step_tools: list[PartRef]) -> bool:
        """One tool call. Returns False when the turn was aborted while it ran."""
        s, r = self.s, self.rng
        tool = r.choice(_TOOLS)
        self._call += 1
        ref = s.add_tool(m, f"toolu_{self._call:08d}", tool)
        args = self._args(tool)
        raw = json.dumps(args)
        i = 0
        while i < len(raw):  # the arguments stream as raw JSON fragments
            n = r.randint(2, 24)
            s.tool_input_delta(ref, raw[i:i + n])
            i += n
        s.tool_input_ready(ref, args)
        if tool == "bash" and r.random() < 0.3:
            s.request_approval(ref, reason="runs a shell command")
            if r.random() < 0.15:
                s.deny(ref, "not in this repository")
                return True
            s.approve(ref)
        s.start_tool(ref, title=str(next(iter(args.values())))[:60],
                     timeout_ms=120_000 if tool == "bash" else None)
        for _ in range(r.randint(2, 6) if tool == "bash" else r.randint(0, 1)):
            s.tool_progress(ref, metadata={"output": _prose(r, r.randint(10, 120))})
        if r.random() < 0.004:  # the user interrupts while the tool runs
            s.abort(m, "The user pressed escape")
            return False
        if r.random() < 0.12:
            s.fail_tool(ref, f"exit status 1: {_prose(r, r.randint(20, 200))}")
            return True
        attachments: list[ev.Attachment] = []
        if tool == "read" and r.random() < 0.03:
            attachments.append(ev.Attachment(part_id=part_id(), mime="image/png",
                                             url="file:///work/app/docs/diagram.png",
                                             filename="diagram.png"))
        s.complete_tool(ref, _prose(r, r.randint(40, 1_500)), title=tool,
                        metadata={"lines": r.randint(1, 400), "truncated": False},
                        attachments=attachments)
        step_tools.append(ref)
        return True

    # ------------------------------------------------------------------ one turn

    def turn(self) -> None:
        s, r = self.s, self.rng
        self.turns += 1
        prompt = _prose(r, r.randint(30, 400))
        if r.random() < 0.05:
            user = s.start_message("user", agent="build", model=_MODEL)
            s.add_text(user, prompt, streaming=False)
            s.add_file(user, "text/plain", "file:///work/app/notes.txt", filename="notes.txt",
                       source=ev.FileSource(path="notes.txt"))
            s.complete_message(user)
        else:
            user = s.user_message(prompt, agent="build", model=_MODEL)
        m = s.start_message("assistant", agent="build", model=_MODEL, parent_id=user,
                            path=_PATH, system="You are a careful coding agent.")
        steps = r.choices((1, 2, 3, 4, 5), weights=(25, 30, 25, 12, 8))[0]
        completed: list[PartRef] = []
        for step in range(steps):
            last = step == steps - 1
            s.start_step(m, snapshot=f"{r.getrandbits(40):010x}" if r.random() < 0.5 else None)
            if step == 0 and self.turns % 97 == 0:
                s.add_retry(m, 1, ev.MessageError(kind="api", message="overloaded",
                                                  status_code=529, retryable=True))
            if r.random() < 0.6:
                thought = s.add_reasoning(m)
                self._stream(thought, r.randint(10, 120), s.reasoning_delta)
                s.end_part(thought, metadata={"signature": "sig"})
            text = s.add_text(m)
            self._stream(text, r.randint(40, 400) if last else r.randint(5, 60), s.text_delta)
            s.end_part(text)
            if not last:
                for _ in range(r.choices((1, 2, 3), weights=(55, 30, 15))[0]):
                    if not self._tool(m, completed):
                        return  # aborted: the message is completed
            if r.random() < 0.15:
                s.add_patch(m, f"{r.getrandbits(40):010x}",
                            [f"src/module_{r.randint(1, 400)}.py"])
            if r.random() < 0.05:
                s.add_snapshot(m, f"{r.getrandbits(40):010x}")
            s.finish_step(m, "stop" if last else "tool-calls", cost=r.random() / 100,
                          tokens=self._tokens())
        if completed and r.random() < 0.05:
            s.compact_tool_output(completed[0])
        if self.turns % 250 == 0:
            s.add_compaction(m, auto=True, overflow=False)
        s.complete_message(m, cost=r.random() / 50, finish="stop", tokens=self._tokens())

    def run(self, target: int) -> int:
        """Record turns until the log holds at least ``target`` events; returns the count."""
        while self.s.version < target:
            self.turn()
        return self.s.version


def record(store: Store, target: int, *, seed: int = 7,
           clock: Callable[[], int] | None = None) -> tuple[Session, Workload]:
    """Create a session on ``store`` and record about ``target`` events into it."""
    session = Session.create(store, clock=clock or StepClock(START_MS))
    work = Workload(session, seed=seed)
    work.run(target)
    return session, work


def mix(events: list[ev.Event] | Any) -> Counter[str]:
    """How many events of each type."""
    return Counter(ev.tag_of(type(e)) for e in events)
