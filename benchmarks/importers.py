"""Import benchmark: generated Claude Code and Codex transcripts of a given size, MB/s and memory.

Usage (from the repository root)::

    .venv/bin/python benchmarks/importers.py             # 50 MB per format
    .venv/bin/python benchmarks/importers.py --mb 5      # quicker
    .venv/bin/python benchmarks/importers.py --store sqlite   # write to SQLite, not memory
    .venv/bin/python benchmarks/importers.py --no-linear      # skip the doubled files

The generated files look like real ones where it matters for speed: Claude Code
turns of one line per content block, big ``progress`` lines (they dominate real
files' size), tool results with typed ``toolUseResult``; Codex turns with
reasoning, ``function_call``/``function_call_output`` pairs and the duplicated
``event_msg`` copies. What is timed: reading the file into a plan (parse, DAG,
events), checking it on a scratch store and writing it to the target store,
i.e. everything ``convlog import`` does. Peak memory is the process's peak RSS
growth during the import, next to the file size. Each shape is then imported again
at twice the size, and the CPU-time ratio printed (2.00 is linear: a cost that grows
with the square of the tool calls shows as 3 and more).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.importers.base import Plan
from engine.importers.claude_code import plan_claude_code
from engine.importers.codex import plan_codex
from engine.importers.write import write_plan
from engine.store import MemoryStore, open_store
from engine.store.base import Store

MB = 1024 * 1024


def claude_code_lines(target: int) -> Iterator[str]:
    """Lines of one long Claude Code session, about ``target`` bytes in all."""
    env = {"isSidechain": False, "userType": "external", "cwd": "/home/me/app",
           "sessionId": "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f", "version": "2.0.1",
           "gitBranch": "main"}
    written, turn, parent = 0, 0, None
    filler = "lorem ipsum dolor sit amet " * 40
    while written < target:
        turn += 1
        ts = f"2025-08-01T10:{turn // 3600 % 60:02d}:{turn % 60:02d}.000Z"
        recs: list[dict[str, object]] = []

        def rec(uuid: str, kind: str, ts: str = ts, recs: list[dict[str, object]] = recs,
                **fields: object) -> None:
            nonlocal parent
            recs.append({**env, "type": kind, "uuid": uuid, "parentUuid": parent,
                         "timestamp": ts, **fields})
            parent = uuid

        msg = {"id": f"msg_{turn}", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "stop_reason": None,
               "usage": {"input_tokens": 100, "output_tokens": 50}}
        rec(f"u{turn}", "user", message={"role": "user", "content": f"step {turn}: {filler}"})
        rec(f"a{turn}.1", "assistant", message={**msg, "content": [
            {"type": "thinking", "thinking": filler, "signature": "sig" * 30}]})
        rec(f"a{turn}.2", "assistant", message={**msg, "content": [
            {"type": "text", "text": filler}]})
        rec(f"a{turn}.3", "assistant", message={**msg, "stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash",
             "input": {"command": "pytest -q", "description": "run"}}]})
        for k in range(4):
            rec(f"p{turn}.{k}", "progress", data={"type": "bash_progress",
                                                   "output": filler * 6}, toolUseID=f"toolu_{turn}")
        rec(f"r{turn}", "user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": filler}]},
            toolUseResult={"stdout": filler, "stderr": "", "interrupted": False})
        rec(f"e{turn}", "assistant", message={**msg, "id": f"msg_{turn}b",
                                               "stop_reason": "end_turn",
                                               "content": [{"type": "text", "text": "done"}]})
        for r in recs:
            line = json.dumps(r) + "\n"
            written += len(line)
            yield line


def codex_lines(target: int) -> Iterator[str]:
    """Lines of one long Codex rollout, about ``target`` bytes in all."""
    filler = "lorem ipsum dolor sit amet " * 40
    head = [{"type": "session_meta", "payload": {
        "id": "0199a0b1-1111-7222-8333-444455556666", "cwd": "/home/me/app",
        "originator": "codex_cli_rs", "cli_version": "0.63.0", "model_provider": "openai"}},
        {"type": "turn_context", "payload": {"cwd": "/home/me/app", "model": "gpt-5-codex"}}]
    written, turn = 0, 0
    for h in head:
        line = json.dumps({"timestamp": "2025-09-03T14:00:00.000Z", **h}) + "\n"
        written += len(line)
        yield line
    while written < target:
        turn += 1
        ts = f"2025-09-03T14:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z"
        text = f"step {turn}: {filler}"
        items = [
            ("event_msg", {"type": "task_started"}),
            ("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": text}]}),
            ("event_msg", {"type": "user_message", "message": text}),
            ("response_item", {"type": "reasoning", "summary": [
                {"type": "summary_text", "text": filler}], "encrypted_content": "g" * 800}),
            ("response_item", {"type": "function_call", "name": "shell", "call_id": f"c{turn}",
                               "arguments": json.dumps({"command": ["bash", "-lc", "ls"]})}),
            ("response_item", {"type": "function_call_output", "call_id": f"c{turn}",
                               "output": json.dumps({"output": filler * 4, "metadata": {
                                   "exit_code": 0, "duration_seconds": 0.1}})}),
            ("event_msg", {"type": "token_count", "info": {"last_token_usage": {
                "input_tokens": 100, "output_tokens": 20}}}),
            ("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": f"done {turn}"}]}),
            ("event_msg", {"type": "agent_message", "message": f"done {turn}"}),
            ("event_msg", {"type": "task_complete"}),
        ]
        for kind, payload in items:
            line = json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"
            written += len(line)
            yield line


def claude_code_tool_lines(target: int) -> Iterator[str]:
    """A tool-heavy Claude Code session as real ones are (few ``progress`` lines): per
    turn a prompt, thinking, four parallel ``tool_use`` lines (each the child of the
    one before, each result the child of its own call's line: a tree), typed results
    of a few KB, and the answer the child of the first result."""
    env = {"isSidechain": False, "userType": "external", "cwd": "/home/me/app",
           "sessionId": "7c2a0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f", "version": "2.1.230",
           "gitBranch": "main"}
    written, turn = 0, 0
    last: str | None = None
    body = "def f(x):\n    return x * 2  # some source text a Read returns\n" * 40
    while written < target:
        turn += 1
        ts = f"2026-08-01T10:{turn // 3600 % 60:02d}:{turn % 60:02d}.000Z"
        recs: list[dict[str, object]] = []

        def rec(uuid: str, parent: str | None, kind: str, *, ts: str = ts,
                recs: list[dict[str, object]] = recs, request: str = f"req_{turn}",
                **fields: object) -> None:
            recs.append({**env, "type": kind, "uuid": uuid, "parentUuid": parent,
                         "timestamp": ts, "requestId": request, **fields})

        msg = {"id": f"msg_{turn}", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "stop_reason": None,
               "usage": {"input_tokens": 1200, "output_tokens": 80,
                         "cache_read_input_tokens": 30000, "cache_creation_input_tokens": 0}}
        rec(f"u{turn}", last, "user", message={"role": "user",
                                               "content": f"step {turn}: look at the code"})
        rec(f"t{turn}", f"u{turn}", "assistant", message={**msg, "content": [
            {"type": "thinking", "thinking": "I should read the files. " * 20,
             "signature": "sig" * 60}]})
        parent = f"t{turn}"
        for k in range(4):
            rec(f"c{turn}.{k}", parent, "assistant", message={
                **msg, "stop_reason": "tool_use" if k == 3 else None, "content": [
                    {"type": "tool_use", "id": f"toolu_{turn}_{k}", "name": "Read",
                     "input": {"file_path": f"/home/me/app/src/m{k}.py"}}]})
            parent = f"c{turn}.{k}"
        for k in range(4):
            rec(f"r{turn}.{k}", f"c{turn}.{k}", "user", message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{turn}_{k}", "content": body}]},
                toolUseResult={"type": "text", "file": {
                    "filePath": f"/home/me/app/src/m{k}.py", "content": body,
                    "numLines": 80, "startLine": 1, "totalLines": 80}})
        if turn % 10 == 0:
            rec(f"p{turn}", f"r{turn}.0", "progress", data={"type": "hook_progress",
                                                             "hookEvent": "PostToolUse"})
        rec(f"a{turn}", f"r{turn}.0", "assistant", message={
            **msg, "id": f"msg_{turn}b", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "The four modules double their input. " * 8}]})
        last = f"a{turn}"
        for r in recs:
            line = json.dumps(r) + "\n"
            written += len(line)
            yield line


def codex_tool_lines(target: int) -> Iterator[str]:
    """A tool-heavy Codex rollout: per turn reasoning and six shell calls, each output a
    few KB of plain text, a token_count per request, the event_msg copies."""
    head = [{"type": "session_meta", "payload": {
        "id": "0199a0b1-1111-7222-8333-444455557777", "cwd": "/home/me/app",
        "originator": "codex_cli_rs", "cli_version": "0.171.0", "model_provider": "openai"}}]
    written, turn = 0, 0
    for h in head:
        line = json.dumps({"timestamp": "2026-09-03T14:00:00.000Z", **h}) + "\n"
        written += len(line)
        yield line
    out = "src/app.py:12: def handler(event):\n" * 60
    while written < target:
        turn += 1
        ts = f"2026-09-03T14:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z"
        text = f"step {turn}: find the handlers"
        items: list[tuple[str, dict[str, object]]] = [
            ("event_msg", {"type": "task_started", "turn_id": str(turn)}),
            ("turn_context", {"cwd": "/home/me/app", "model": "gpt-5.1-codex",
                              "approval_policy": "on-request", "turn_id": str(turn)}),
            ("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": text}]}),
            ("event_msg", {"type": "user_message", "message": text})]
        for k in range(6):
            items += [
                ("response_item", {"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": f"**Searching {k}**"}],
                    "encrypted_content": "g" * 600}),
                ("response_item", {"type": "function_call", "name": "shell_command",
                                   "call_id": f"c{turn}.{k}", "arguments": json.dumps(
                                       {"command": f"rg -n handler src/{k}", "workdir": "/a"})}),
                ("response_item", {"type": "function_call_output", "call_id": f"c{turn}.{k}",
                                   "output": f"Exit code: 0\nWall time: 0.1 seconds\n{out}"}),
                ("event_msg", {"type": "token_count", "info": {
                    "last_token_usage": {"input_tokens": 9000, "cached_input_tokens": 8000,
                                         "output_tokens": 60, "reasoning_output_tokens": 20},
                    "total_token_usage": {"input_tokens": 9000 * (turn * 6 + k)}}})]
        items += [
            ("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": f"done {turn}"}]}),
            ("event_msg", {"type": "agent_message", "message": f"done {turn}"}),
            ("event_msg", {"type": "task_complete", "turn_id": str(turn)})]
        for kind, payload in items:
            line = json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"
            written += len(line)
            yield line


def json_floor(path: Path) -> float:
    """CPU seconds ``json.loads`` takes over the file's lines: the floor an import is
    measured against in the same run."""
    with path.open("rb") as f:
        lines = f.readlines()
    c0 = time.process_time()
    for line in lines:
        json.loads(line)
    return time.process_time() - c0


def generate(path: Path, lines: Iterator[str]) -> int:
    with path.open("w") as f:
        for line in lines:
            f.write(line)
    return path.stat().st_size


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def measure(name: str, path: Path, size: int, planner: Callable[[Path], Plan],
            store: Callable[[], Store]) -> dict[str, float]:
    before = peak_rss()
    c0 = time.process_time()
    t0 = time.perf_counter()
    plan = planner(path)
    t1 = time.perf_counter()
    target = store()
    try:
        write_plan(target, plan)
    finally:
        target.close()
    t2 = time.perf_counter()
    cpu = time.process_time() - c0  # robust on a shared machine, where wall time is not
    events = sum(len(s.events) for s in plan.sessions)
    assert plan.report.written == events, "every planned event must be written"
    total = t2 - t0
    floor = json_floor(path)
    row = {"mb": size / MB, "events": events, "read_s": t1 - t0, "write_s": t2 - t1,
           "total_s": total, "mb_per_s": size / MB / total,
           "cpu_s": cpu, "cpu_mb_per_s": size / MB / cpu,
           "json_loads_cpu_s": floor, "x_json_loads": cpu / floor if floor else 0.0,
           "peak_rss_growth_mb": (peak_rss() - before) / MB}
    print(f"{name:18} {row['mb']:6.1f} MB  {events:8d} events  read {row['read_s']:6.2f}s  "
          f"check+write {row['write_s']:6.2f}s  => {row['mb_per_s']:6.1f} MB/s "
          f"({row['cpu_mb_per_s']:.1f} MB/s of CPU; {row['x_json_loads']:.1f}x json.loads "
          f"of the same lines, {size / MB / floor if floor else 0:.0f} MB/s)  "
          f"peak RSS +{row['peak_rss_growth_mb']:.0f} MB")
    return row


# name -> (lines generator, planner, file name)
SHAPES: dict[str, tuple[Callable[[int], Iterator[str]], Callable[[Path], Plan], str]] = {
    "claude-code": (claude_code_lines, plan_claude_code, "session.jsonl"),
    "codex": (codex_lines, plan_codex, "rollout-bench.jsonl"),
    "claude-code-tools": (claude_code_tool_lines, plan_claude_code, "tools.jsonl"),
    "codex-tools": (codex_tool_lines, plan_codex, "rollout-tools.jsonl"),
}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of each generated file")
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--only", choices=sorted(SHAPES), action="append",
                        help="only these shapes (repeatable; default all)")
    parser.add_argument("--linear", action=argparse.BooleanOptionalAction, default=True,
                        help="also import each file at twice the size and print the CPU-time "
                             "ratio (about 2 when the import is linear in the file, tool "
                             "calls included); on by default, --no-linear skips it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    target = int(args.mb * MB)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        def store() -> Store:
            if args.store == "memory":
                return MemoryStore()
            db = Path(tmp) / "bench.db"
            db.unlink(missing_ok=True)
            return open_store(f"sqlite:///{db}")

        for name in args.only or list(SHAPES):
            lines, planner, file_name = SHAPES[name]
            path = Path(tmp) / file_name
            size = generate(path, lines(target))
            results[name] = measure(name, path, size, planner, store)
            if args.linear:
                size2 = generate(path, lines(2 * target))
                double = measure(f"{name} x2", path, size2, planner, store)
                ratio = double["cpu_s"] / results[name]["cpu_s"]
                results[name]["x2_cpu_ratio"] = ratio
                print(f"{'':18} twice the file: {ratio:.2f}x the CPU time "
                      f"(2.00 is linear)")
            path.unlink()
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    return results


if __name__ == "__main__":
    main()
