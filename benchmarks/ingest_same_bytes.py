"""Same log for the same stream: provider streams ingested by this tree and by another
checkout (the base of an ingest change), every stored event's bytes and chain compared.

Usage (from the repository root)::

    git archive main | tar -x -C /tmp/base     # or: git worktree add /tmp/base main
    .venv/bin/python benchmarks/ingest_same_bytes.py /tmp/base
    .venv/bin/python benchmarks/ingest_same_bytes.py /tmp/base --examples 50

The streams are drawn here, once, from the test suite's hypothesis generators
(Anthropic, OpenAI Chat, Responses; seeded), plus damaged Anthropic streams (an
event dropped, repeated or swapped: refusals and settling). Each tree then ingests
every stream with its own ``engine`` (a child process started in that tree) at
batch sizes 1, 5 and 64, with and without coalescing, with a step clock and the
id generators' randomness fixed, completes the messages left waiting, and hashes
every stored event's canonical bytes, the chain hashes, the ingest results and the
errors raised. Exit 1 when the two digests differ.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r'''
import hashlib, logging, os, pickle, sys, types
root, path = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
os.urandom = lambda n: bytes(range(n))  # the event id generators' random bases
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
import engine.ids as ids
ids.time = types.SimpleNamespace(time=lambda: 1_700_000_000.0)  # part ids' clock
import engine
assert engine.__file__.startswith(root), engine.__file__
from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session, StepClock
from engine.store import MemoryStore
from engine.store.door import admit
adapters = {"anthropic": AnthropicIngest, "damaged": AnthropicIngest,
            "chat": OpenAIChatIngest, "responses": OpenAIResponsesIngest}
total, count = hashlib.sha256(), 0
for name, streams in pickle.load(open(path, "rb")).items():
    for i, stream in enumerate(streams):
        for batch in (1, 5, 64):
            for coalesce in (0, 16):
                ids._RNG.seed(i * 1000 + batch + coalesce)
                ids._MONO.__init__()
                ids._HEAD[0] = (-1, "")
                session = Session.create(MemoryStore(), clock=StepClock())
                ing = adapters[name](session, batch=batch, coalesce_chars=coalesce)
                try:
                    r = ing.ingest(stream)
                    out = repr((r.message_id, r.stop_reason, r.tokens, r.completed,
                                r.tool_calls))
                    if not r.completed:
                        try:
                            ing.complete()
                        except Exception as exc:
                            out += f" complete: {type(exc).__name__}"
                except Exception as exc:
                    out = f"{type(exc).__name__}: {exc}"
                total.update(out.encode("utf-8", "surrogatepass"))
                for e in session.store.read(session.id):
                    total.update(admit(e))
                    count += 1
                total.update(bytes(session.store.recorder._own[session.id].hashes))
print(total.hexdigest(), count)
'''


def draw(examples: int) -> dict[str, list[Any]]:
    from hypothesis import HealthCheck, given, seed, settings  # noqa: PLC0415

    from tests.adapters.test_ingest_openai_chat import chat_streams  # noqa: PLC0415
    from tests.support.anthropic_streams import anthropic_streams  # noqa: PLC0415
    from tests.support.responses_streams import responses_streams  # noqa: PLC0415

    out: dict[str, list[Any]] = {}
    for name, strategy, n in (("anthropic", anthropic_streams(), examples),
                              ("chat", chat_streams(), examples // 2),
                              ("responses", responses_streams(), examples // 2)):
        found: list[Any] = []

        @seed(12345)
        @settings(max_examples=n, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(stream: Any) -> None:
            found.append(stream)  # noqa: B023 - called before the loop moves on

        collect()
        out[name] = found
    rng = random.Random(7)
    damaged = []
    for stream in out["anthropic"][: examples // 2]:
        s = list(stream)
        k = rng.randrange(len(s))
        op = rng.choice(["drop", "repeat", "swap"])
        if op == "drop":
            del s[k]
        elif op == "repeat":
            s.insert(k, s[k])
        elif k + 1 < len(s):
            s[k], s[k + 1] = s[k + 1], s[k]
        damaged.append(s)
    out["damaged"] = damaged
    return out


def digest(root: Path, streams: Path) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), str(streams)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    if done.returncode:
        raise SystemExit(f"the child in {root} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="the other checkout's root")
    parser.add_argument("--examples", type=int, default=300,
                        help="Anthropic streams (half as many of the others)")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "streams.pkl"
        path.write_bytes(pickle.dumps(draw(args.examples)))
        mine, theirs = digest(here, path), digest(args.base.resolve(), path)
    print(f"this tree: {mine}\nbase:      {theirs}")
    same = mine.split()[0] == theirs.split()[0]
    print("same events, bytes, hashes, results and errors" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
