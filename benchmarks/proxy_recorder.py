"""The recorder's CPU per proxied call, and the same log for the same traffic.

Usage (from the repository root)::

    .venv/bin/python benchmarks/proxy_recorder.py                 # this tree
    git archive <base> | tar -x -C /tmp/base
    .venv/bin/python benchmarks/proxy_recorder.py /tmp/base .     # trees side by side

``convlog proxy``'s recorder child gets, for every proxied call, the jobs the
forwarder hands it (the request, its body, the response head, each body chunk,
the end) and records them. Here those jobs are fed to a tree's
:class:`~engine.proxy.recorder.Recorder` directly, in a child process started in
that tree, into a SQLite store, committing as the recorder child does (the
events of a commit window, here every ``--window`` jobs, as one append). Two
workloads:

- ``bench``: the calls of ``benchmarks/proxy.py`` (the same one-message request
  every time, each answered by 20 text deltas streamed one per chunk): each call
  is a sibling answer of the same conversation;
- ``agent``: one agent session the way Claude Code drives it (its session header,
  a long system prompt, a few dozen tools, the conversation growing by an
  answer and a tool result per call, each answer streamed as text deltas and a
  tool call's input), to see what grows with the conversation.

Printed per tree and workload: the recorder's CPU time per call (process time,
the median of ``--repeats`` runs), and a digest of everything the store holds
(each session's info and every stored event's bytes) with the ids' randomness
and the clocks fixed: the digests of two trees must be equal (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import hashlib, itertools, json, logging, os, random, sys, tempfile, time, types
root, workload, calls, window, repeats, profile = sys.argv[1:7]
calls, window, repeats = int(calls), int(window), int(repeats)
sys.path.insert(0, root)
os.urandom = random.Random(7).randbytes  # the id generators' random bases, seeded
_step = itertools.count(1)
_real_time = time.time
def _fixed_ns():
    return 1_700_000_000_000_000_000 + next(_step) * 1_000_000
time.time_ns = _fixed_ns  # the clocks ids and events read, one ms a reading
time.time = lambda: _fixed_ns() / 1e9
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
import engine
assert engine.__file__.startswith(root), engine.__file__
import engine.ids as ids
from engine.proxy.recorder import BODY, CHUNK, END, REQUEST, RESPONSE, Recorder
from engine.proxy.routes import route
from engine.store import open_store
from engine.store.door import admit

def sse(kind, data):
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

def answer(i, text_chunks, tool):
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "bench",
        "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}) +
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}})]
    for k in range(text_chunks):
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": f"<{1700000000000 + k}> word{k} "}}))
    tail = sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    if tool:
        args = json.dumps({"command": f"ls -la /tmp/dir{i}", "timeout": 120})
        out.append(tail + sse("content_block_start", {"type": "content_block_start",
                   "index": 1, "content_block": {"type": "tool_use", "id": f"toolu_{i}",
                                                 "name": "Bash", "input": {}}}))
        for at in range(0, len(args), 16):
            out.append(sse("content_block_delta", {"type": "content_block_delta",
                       "index": 1, "delta": {"type": "input_json_delta",
                                             "partial_json": args[at:at + 16]}}))
        tail = sse("content_block_stop", {"type": "content_block_stop", "index": 1})
    out.append(tail + sse("message_delta", {"type": "message_delta",
               "delta": {"stop_reason": "tool_use" if tool else "end_turn"},
               "usage": {"output_tokens": text_chunks}}) +
               sse("message_stop", {"type": "message_stop"}))
    return out

HEADERS = {"host": "127.0.0.1", "content-type": "application/json", "x-bench": "1"}
SSE_HEAD = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}

def bench_calls():
    body = json.dumps({"model": "bench", "max_tokens": 10, "stream": True,
                       "messages": [{"role": "user", "content": "go"}]}).encode()
    for i in range(calls):
        yield HEADERS, body, answer(i, 20, False)

def agent_calls():
    system = [{"type": "text", "text": "You are an agent. " * 400,
               "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": f"Tool{t}", "description": "Does a thing. " * 40,
              "input_schema": {"type": "object", "properties": {
                  f"arg{a}": {"type": "string", "description": "an argument " * 5}
                  for a in range(6)}, "required": ["arg0"]}} for t in range(30)]
    headers = {**HEADERS, "x-claude-code-session-id": "3f1e0c4a-0000-4000-8000-000000000001"}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}]
    for i in range(calls):
        body = {"model": "claude-x", "max_tokens": 32000, "stream": True,
                "system": system, "tools": tools, "messages": list(messages)}
        yield headers, json.dumps(body).encode(), answer(i, 20, True)
        text = "".join(f"<{1700000000000 + k}> word{k} " for k in range(20))
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
             "input": {"command": f"ls -la /tmp/dir{i}", "timeout": 120}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}",
             "content": "total 0\n" + "-rw-r--r-- 1 root root 0 file\n" * 30}]})

def jobs_of(n, headers, body, chunks):
    found = route("POST", "/v1/messages")
    return [(REQUEST, n, found, "POST", "/v1/messages", "", dict(headers)),
            (BODY, n, body), (RESPONSE, n, 200, dict(SSE_HEAD)),
            *((CHUNK, n, c) for c in chunks), (END, n, None)]

def run(path):
    os.urandom = random.Random(7).randbytes
    ids._RNG.seed(7)
    ids._MONO.__init__()
    made = bench_calls() if workload == "bench" else agent_calls()
    all_jobs = [jobs_of(n, *spec) for n, spec in enumerate(made, start=1)]
    recorder = Recorder(f"sqlite:///{path}")
    recorder.open()
    cpu = time.process_time()
    for jobs in all_jobs:
        for k, job in enumerate(jobs, start=1):
            recorder.handle(job)
            if k % window == 0:
                recorder.commit()
        recorder.commit()
    cpu = time.process_time() - cpu
    recorder.close()
    return cpu, recorder.failures

def digest(path):
    store = open_store(f"sqlite:///{path}")
    total, count = hashlib.sha256(), 0
    for info in sorted(store.sessions(), key=lambda s: s.id):
        total.update(repr((info.id, info.parent, info.fork_seq, info.created)).encode())
        for e in store.read(info.id):
            total.update(admit(e))
            count += 1
    store.close()
    return total.hexdigest(), count

results = []
with tempfile.TemporaryDirectory() as tmp:
    for r in range(repeats):
        path = os.path.join(tmp, f"r{r}.db")
        if profile and r == repeats - 1:
            import cProfile, pstats
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            cpu, failures = run(path)
            prof.disable()
            stats = pstats.Stats(prof, stream=sys.stderr)
            stats.sort_stats(os.environ.get("SORT", "cumulative")).print_stats(45)
        else:
            cpu, failures = run(path)
        assert not failures, failures
        results.append(cpu)
        last = digest(path)
results.sort()
print(json.dumps({"cpu_per_call_us": results[len(results) // 2] / calls * 1e6,
                  "all_us": [c / calls * 1e6 for c in results],
                  "digest": last[0], "events": last[1]}))
'''


def run_tree(root: Path, workload: str, calls: int, *, window: int, repeats: int,
             profile: bool) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), workload, str(calls),
                          str(window), str(repeats), "1" if profile else ""],
                         check=True, capture_output=True, text=True,
                         env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin",
                              "SORT": os.environ.get("SORT", "cumulative")})
    if profile:
        print(out.stderr)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", default=["."], help="checkouts to run")
    parser.add_argument("--workload", action="append", choices=("bench", "agent"))
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--window", type=int, default=13,
                        help="jobs per commit (as in convlog proxy's 20 ms window: a "
                        "20-chunk call 2 ms apart is committed twice)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the last run")
    args = parser.parse_args()
    same = True
    for workload in args.workload or ["bench", "agent"]:
        digests = set()
        for tree in args.trees:
            result = run_tree(Path(tree).resolve(), workload, args.calls,
                              window=args.window, repeats=args.repeats, profile=args.profile)
            digests.add(result["digest"])
            runs = ", ".join(f"{v:.0f}" for v in result["all_us"])  # type: ignore[attr-defined]
            print(f"{workload:6} {tree:24} CPU per call {result['cpu_per_call_us']:8.0f} us "
                  f"(runs {runs}); {result['events']} events, digest "
                  f"{str(result['digest'])[:16]}")
        same = same and len(digests) == 1
    if len(args.trees) > 1:
        print("same log in every tree" if same else "THE LOGS DIFFER")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
