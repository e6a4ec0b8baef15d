"""Integrations benchmark: the Agents SDK's memory in convlog vs its own SQLiteSession,
and what recording costs a live SDK stream.

Usage (from the repository root)::

    .venv/bin/python benchmarks/integrations.py               # 500 turns, 2,000 events
    .venv/bin/python benchmarks/integrations.py --turns 100 --json

1. Memory per turn: the same turns go into ``ConvlogSession`` on a convlog
   SQLite store file and into the SDK's ``SQLiteSession`` on a file. A turn is
   what the Runner does with a session: ``get_items()`` (the whole history, sent
   to the model), then ``add_items`` of the turn's items (a user message, a
   function call, its output, an assistant message). Measured: time per turn
   (mean over all turns, and over the last tenth, where the history is longest),
   bytes on disk at the end, and that both return the same items.
2. Recording: one Anthropic stream of ``--events`` text deltas served by a fake
   HTTP transport and consumed through the real SDK client, plain and through
   ``record_anthropic`` (into a memory store); time per event, best of
   ``--repeat``. The recorded text is checked against what was streamed.
3. A streamed Agents SDK run (``Runner.run_streamed`` with a fake streaming
   model: a tool call, then an answer of ``--events`` / 4 deltas), consumed
   plain and through ``record_run``; CPU time per stream event, best of ``--repeat``.
4. pydantic-ai's own memory is the message list the caller keeps (serialized
   with ``ModelMessagesTypeAdapter``): ``--turns`` / 10 recorded runs of a
   ``FunctionModel`` agent kept as that JSON and as a convlog SQLite store
   (``record_messages``); bytes, and the time to load the history for the next
   run (``validate_json`` vs ``history(session)``), checked equal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from engine.integrations.agents_run import record_run
from engine.integrations.anthropic import record_anthropic
from engine.integrations.pydantic_ai import record_messages
from engine.session import Session
from engine.store import MemoryStore, open_store
from projections import views as v
from projections.integrations.openai_agents import ConvlogSession
from projections.integrations.pydantic_ai import history
from projections.withparts import WithPartsProjection
from tests.support.agents_fake import StreamingModel, call, text
from tests.support.fake_sse import FakeServer, Reply

set_tracing_disabled(True)  # no trace export: nothing leaves the machine


def turn_items(i: int) -> list[Any]:
    return [
        {"role": "user", "content": f"question {i}: what does file_{i}.py do?"},
        {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "read_file",
         "arguments": json.dumps({"path": f"file_{i}.py"}), "status": "completed"},
        {"type": "function_call_output", "call_id": f"call_{i}",
         "output": f"def f{i}():\n    return {i}\n" * 4},
        {"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "annotations": [],
                      "text": f"file_{i}.py defines f{i}, which returns {i}."}]},
    ]


async def drive(session: Any, turns: int) -> tuple[list[float], list[Any]]:
    times: list[float] = []
    for i in range(turns):
        t0 = time.perf_counter()
        await session.get_items()
        await session.add_items(turn_items(i))
        times.append(time.perf_counter() - t0)
    return times, await session.get_items()


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def memory_run(turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ours_path = Path(tmp) / "convlog.db"
        theirs_path = Path(tmp) / "agents.db"
        store = open_store(f"sqlite:///{ours_path}")
        ours = ConvlogSession(store, "bench")
        theirs = SQLiteSession("bench", db_path=theirs_path)
        ours_times, ours_items = asyncio.run(drive(ours, turns))
        theirs_times, theirs_items = asyncio.run(drive(theirs, turns))
        if ours_items != theirs_items:
            raise AssertionError("ConvlogSession and SQLiteSession hold different items")
        close = getattr(store, "close", None)
        if callable(close):
            close()
        theirs.close()
        tail = max(1, turns // 10)
        return {
            "turns": turns, "items": len(ours_items),
            "convlog": {"ms_per_turn": 1000 * sum(ours_times) / turns,
                        "ms_per_turn_last_tenth": 1000 * sum(ours_times[-tail:]) / tail,
                        "bytes": disk_bytes(ours_path)},
            "sqlite_session": {"ms_per_turn": 1000 * sum(theirs_times) / turns,
                               "ms_per_turn_last_tenth": 1000 * sum(theirs_times[-tail:]) / tail,
                               "bytes": disk_bytes(theirs_path)},
        }


def text_stream(deltas: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": "msg_b", "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [{"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": f"w{i} "}} for i in range(deltas)]
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                   "stop_sequence": None},
                "usage": {"output_tokens": deltas}},
               {"type": "message_stop"}]
    return events


def consume(client: Any) -> int:
    n = 0
    for _ in client.messages.create(model="m", max_tokens=1, messages=[], stream=True):
        n += 1
    return n


def recording_run(deltas: int, repeat: int) -> dict[str, Any]:
    events = text_stream(deltas)
    plain: list[float] = []
    recorded: list[float] = []
    for _ in range(repeat):
        client = FakeServer([Reply(events)]).anthropic()
        t0 = time.perf_counter()
        consume(client)
        plain.append(time.perf_counter() - t0)

        session = Session.create(MemoryStore())
        view = WithPartsProjection(session.id)
        session.subscribe(view)
        wrapped = record_anthropic(FakeServer([Reply(events)]).anthropic(), session)
        t0 = time.perf_counter()
        consume(wrapped)
        recorded.append(time.perf_counter() - t0)
        [msg] = view.messages()
        text = "".join(p.text for p in msg.parts if isinstance(p, v.TextPart))
        if text != "".join(f"w{i} " for i in range(deltas)):
            raise AssertionError("the recorded text differs from the stream")
    n = len(events)
    return {"events": n, "plain_us_per_event": 1e6 * min(plain) / n,
            "recorded_us_per_event": 1e6 * min(recorded) / n,
            "ratio": min(recorded) / min(plain)}


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


async def agents_stream_once(answer: str, recorded: bool) -> tuple[float, int]:
    model = StreamingModel([[call("read_file", {"path": "a.py"})], [text(answer)]])
    agent = Agent(name="helper", model=model, tools=[read_file])
    session = Session.create(MemoryStore())
    t0 = time.process_time()  # CPU time: the run is all CPU, and the machine may be shared
    result = Runner.run_streamed(agent, "What does a.py do?")
    events = record_run(result, session) if recorded else result.stream_events()
    n = sum([1 async for _ in events])
    took = time.process_time() - t0
    if result.final_output != answer:
        raise AssertionError("the run did not finish")
    return took, n


def agents_stream_run(deltas: int, repeat: int) -> dict[str, Any]:
    answer = "word" * deltas  # the fake model streams 4 characters per delta
    for recorded_first in (False, True):  # warm up: the SDK's first run builds its caches
        asyncio.run(agents_stream_once("warm", recorded_first))
    plain = [asyncio.run(agents_stream_once(answer, False)) for _ in range(repeat)]
    recorded = [asyncio.run(agents_stream_once(answer, True)) for _ in range(repeat)]
    n = plain[0][1]
    best_plain, best_recorded = min(t for t, _ in plain), min(t for t, _ in recorded)
    return {"events": n, "plain_us_per_event": 1e6 * best_plain / n,
            "recorded_us_per_event": 1e6 * best_recorded / n,
            "ratio": best_recorded / best_plain}


def pydantic_ai_run(runs: int) -> dict[str, Any]:
    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):  # a prompt: call the tool
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": "a.py"})])
        return ModelResponse(parts=[TextPart("a.py defines f, which returns 1.")])

    agent = PydanticAgent(FunctionModel(model))

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"def f():\n    return 1\n  # {path}"

    kept: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "convlog.db"
        store = open_store(f"sqlite:///{path}")
        session = Session.create(store)
        for i in range(runs):
            result = agent.run_sync(f"question {i}", message_history=kept)
            record_messages(session, result.new_messages())
            kept = result.all_messages()
        own = ModelMessagesTypeAdapter.dump_json(kept)
        history(session)  # warm up both ways (first-use caches)
        ModelMessagesTypeAdapter.validate_json(own)
        t0 = time.perf_counter()
        theirs = ModelMessagesTypeAdapter.validate_json(own)
        t_theirs = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = history(session)
        t_ours = time.perf_counter() - t0
        if ours != theirs:
            raise AssertionError("the history from convlog differs from pydantic-ai's")
        close = getattr(store, "close", None)
        if callable(close):
            close()
        return {"runs": runs, "messages": len(kept),
                "convlog": {"bytes": disk_bytes(path), "ms_load": 1000 * t_ours},
                "message_list_json": {"bytes": len(own), "ms_load": 1000 * t_theirs}}


def render(results: dict[str, Any]) -> str:
    m, r = results["memory"], results["recording"]
    lines = [f"Agents SDK memory: {m['turns']} turns, {m['items']} items",
             f"{'':16}{'ms/turn':>10}{'last 10%':>10}{'bytes':>12}"]
    for name in ("convlog", "sqlite_session"):
        row = m[name]
        lines.append(f"{name:16}{row['ms_per_turn']:10.3f}{row['ms_per_turn_last_tenth']:10.3f}"
                     f"{row['bytes']:12,}")
    lines += ["", f"Recording an Anthropic stream through the real SDK: {r['events']} events",
              f"plain {r['plain_us_per_event']:.1f} us/event, recorded "
              f"{r['recorded_us_per_event']:.1f} us/event, ratio {r['ratio']:.2f}x"]
    a = results["agents_stream"]
    lines += ["", f"A streamed Agents SDK run, recorded by record_run: {a['events']} events",
              f"plain {a['plain_us_per_event']:.1f} us/event, recorded "
              f"{a['recorded_us_per_event']:.1f} us/event, ratio {a['ratio']:.2f}x"]
    p = results["pydantic_ai"]
    lines += ["", f"pydantic-ai history: {p['runs']} runs, {p['messages']} messages",
              f"{'':20}{'bytes':>12}{'ms to load':>12}"]
    for name in ("convlog", "message_list_json"):
        row = p[name]
        lines.append(f"{name:20}{row['bytes']:12,}{row['ms_load']:12.1f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=500)
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = {"memory": memory_run(args.turns),
               "recording": recording_run(args.events, args.repeat),
               "agents_stream": agents_stream_run(args.events // 4, args.repeat),
               "pydantic_ai": pydantic_ai_run(max(1, args.turns // 10))}
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
