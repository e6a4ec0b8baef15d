"""Conversation benchmark: Q CLI's ConversationState folded beside WithParts, with a
checkpoint every turn, and what those checkpoints cost on disk.

Usage (from the repository root)::

    .venv/bin/python benchmarks/conversation.py                # 10,000 history entries
    .venv/bin/python benchmarks/conversation.py --entries 2000 --json

The session is recorded through ``Session`` commands on a ``MemoryStore``: each
turn is a prompt and an answer; every fourth turn the answer first calls a tool
(one more history entry for the results). A ``checkpoint.created`` follows every
turn. Then, from the stored events:

1. the WithParts fold and the ConversationState fold, each over the whole log
   (events/s, best of ``--repeat``), and building the final state view;
2. bytes: each event encoded as msgpack (what a store keeps), the checkpoint
   events among them, bytes per checkpoint at each quarter of the run (flat:
   O(1) each, O(turns) in total), against what Q CLI's full-clone checkpoints
   would hold (each one a JSON copy of the history so far: O(turns^2)).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import events as ev
from engine.codec import encode_msgpack
from engine.events import Event
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections.qcli.fold import ConversationFold
from projections.qcli.serialize import converter
from projections.withparts import WithPartsProjection

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_WORDS = ("the", "parser", "splits", "each", "line", "on", "commas", "before", "the",
          "fixtures", "run", "so", "the", "new", "format", "breaks", "every", "test", "déjà",
          "vu", "変更", "テスト", "✓")


def _text(i: int, words: int) -> str:
    return " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(words))


def record(entries: int) -> tuple[MemoryStore, Session, int]:
    """A session with ``entries`` history entries and a checkpoint after every turn."""
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS, 7))
    s.create_conversation("bench", model_info=ev.ModelInfo(model_id="claude-sonnet-4"),
                          os="linux", cwd="/work/app")
    s.change_tools("builtin", [ev.ToolSpec(name="fs_read"), ev.ToolSpec(name="fs_write")])
    made = turns = 0
    while made < entries:
        s.user_message(_text(turns, 12))
        if turns % 4 == 3 and made + 2 <= entries:
            a = s.start_message("assistant")
            s.add_text(a, _text(turns, 8), streaming=False)
            ref = s.add_tool(a, f"tooluse_{turns}", "fs_read", input={"path": f"f{turns}.py"})
            s.start_tool(ref)
            s.complete_tool(ref, _text(turns + 1, 30))
            s.complete_message(a)
            made += 1
        a = s.start_message("assistant")
        s.add_text(a, _text(turns + 2, 40), streaming=False)
        s.complete_message(a)
        made += 1
        turns += 1
        s.create_checkpoint(str(turns), description=f"turn {turns}")
    return store, s, turns


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    store, session, turns = record(args.entries)
    record_s = time.perf_counter() - t0
    events: list[Event] = list(store.read(session.id))
    n = len(events)

    wp_s, _ = best_of(args.repeat, lambda: WithPartsProjection(session.id).apply_all(events))
    conv_s, fold = best_of(args.repeat, lambda: ConversationFold(session.id).apply_all(events))
    view_s, state = best_of(1, fold.state)
    assert len(state.history) == args.entries, len(state.history)
    assert state.checkpoint_manager is not None

    sizes = [len(encode_msgpack(e)) for e in events]
    checkpoint_sizes = [size for e, size in zip(events, sizes, strict=True)
                        if isinstance(e, ev.CheckpointCreated)]
    quarters = [checkpoint_sizes[max(len(checkpoint_sizes) * q // 4 - 1, 0)] for q in (1, 2, 3, 4)]

    # Q CLI clones the history into every checkpoint: the sum of the history's JSON size
    # at each checkpoint (computed from per-entry sizes, without building the copies).
    entry_bytes = [len(json.dumps(converter.unstructure(e), ensure_ascii=False).encode())
                   for e in state.history]
    prefix, clone_total, at_checkpoint = 0, 0, []
    ends = [len(c.history_snapshot) for c in state.checkpoint_manager.checkpoints]
    sums = [0]
    for size in entry_bytes:
        prefix += size
        sums.append(prefix)
    for end in ends:
        clone_total += sums[end]
        at_checkpoint.append(sums[end])

    return {
        "entries": args.entries, "turns": turns, "events": n,
        "record_s": record_s,
        "withparts_events_per_s": n / wp_s, "conversation_events_per_s": n / conv_s,
        "conversation_vs_withparts": conv_s / wp_s,
        "state_view_s": view_s,
        "log_bytes": sum(sizes), "checkpoint_events": len(checkpoint_sizes),
        "checkpoint_bytes_total": sum(checkpoint_sizes),
        "checkpoint_bytes_each_at_quarters": quarters,
        "checkpoint_bytes_mean": sum(checkpoint_sizes) / len(checkpoint_sizes),
        "history_json_bytes": sums[-1],
        "qcli_clone_bytes_total": clone_total,
        "qcli_clone_bytes_each_at_quarters": [
            at_checkpoint[max(len(at_checkpoint) * q // 4 - 1, 0)] for q in (1, 2, 3, 4)],
    }


def render(r: dict[str, Any]) -> str:
    mb = 1024 * 1024
    return "\n".join([
        f"session: {r['entries']:,} history entries, {r['turns']:,} turns, {r['events']:,} "
        f"events (recorded in {r['record_s']:.1f} s), a checkpoint after every turn",
        "",
        "fold over the whole log (best of runs)",
        f"  WithParts          {r['withparts_events_per_s']:>12,.0f} events/s",
        f"  ConversationState  {r['conversation_events_per_s']:>12,.0f} events/s "
        f"({r['conversation_vs_withparts']:.2f}x the WithParts time)",
        f"  state view built once: {r['state_view_s'] * 1000:.1f} ms",
        "",
        "bytes (msgpack, as stored)",
        f"  whole log              {r['log_bytes'] / mb:>10.2f} MB",
        f"  {r['checkpoint_events']:,} checkpoint events "
        f"{r['checkpoint_bytes_total'] / mb:>6.2f} MB ({r['checkpoint_bytes_mean']:.1f} B each)",
        "  bytes per checkpoint at 1/4, 1/2, 3/4, end of the run: "
        + ", ".join(str(x) for x in r["checkpoint_bytes_each_at_quarters"]),
        "",
        "Q CLI's full-clone checkpoints for the same history (JSON)",
        f"  history itself         {r['history_json_bytes'] / mb:>10.2f} MB",
        f"  all checkpoint copies  {r['qcli_clone_bytes_total'] / mb:>10.2f} MB",
        "  bytes per checkpoint at 1/4, 1/2, 3/4, end of the run: "
        + ", ".join(f"{x:,}" for x in r["qcli_clone_bytes_each_at_quarters"]),
        f"  ratio to convlog's checkpoint bytes: "
        f"{r['qcli_clone_bytes_total'] / r['checkpoint_bytes_total']:,.0f}x",
    ])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    p.add_argument("--entries", type=int, default=10_000, help="history entries (10,000)")
    p.add_argument("--repeat", type=int, default=3, help="best of N fold runs (3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
