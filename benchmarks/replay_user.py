"""Replay as a user meets it (issue 30, target 1), beside the bare path, in one run.

Usage (from the repository root; needs the ``bench`` extra for eventsourcing)::

    .venv/bin/python benchmarks/replay_user.py                  # 200,000 events
    .venv/bin/python benchmarks/replay_user.py --events 50000 --json
    .venv/bin/python benchmarks/replay_user.py --profile        # cProfile of the user path

One SQLite store of a realistic session (``benchmarks.workload``), no stored
snapshots, so every path below replays the whole log. CPU time (the machine may be
shared), best of ``--repeat``:

- **user path**: ``convlog.at(store, id).messages()`` in a fresh process, timed
  from the call (after ``import convlog`` and opening the store, which are printed
  apart): what a program that reads a session back pays, first-use compiles
  included;
- **bare path**: ``WithPartsProjection.replay(store, id)`` in this process, warm,
  without building the message views;
- **floor**: msgspec decoding each event's own msgpack bytes (as a per-event store
  holds them) into the event types, and nothing else;
- **eventsourcing**: ``Application.repository.get`` of one aggregate holding the
  same events, each a ``Happened(kind, data)`` whose ``data`` is the convlog
  event's payload *without* its envelope (id, session, seq, time, actor, v: the
  library keeps its own originator id, version and timestamp), its fold counting
  events: the peer's event carries what convlog's carries, no more. Warm, in this
  process (its best time: the stricter baseline).

Ratios: user-path events/s over eventsourcing's (target >= 50x) and user-path time
over the floor's (target <= 1.5x), and the same two for the bare path.
"""

from __future__ import annotations

import argparse
import json
import pstats
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replay import cpu_best_of
from benchmarks.stores import eventsourcing_aggregate
from benchmarks.workload import record
from engine.codec import encode_msgpack
from engine.events import AnyEvent, Event, tag_of
from engine.store import SQLiteStore
from projections.withparts import WithPartsProjection

ROOT = Path(__file__).resolve().parent.parent
TARGET_VS_ES = 50.0
TARGET_VS_FLOOR = 1.5
ENVELOPE = ("id", "session_id", "seq", "time", "actor", "v")

# The user's program, in a fresh interpreter: prints the CPU seconds of each step.
CHILD = r"""
import json, sys, time
t0 = time.process_time()
import convlog
t1 = time.process_time()
store = convlog.open_store(sys.argv[1])
t2 = time.process_time()
messages = convlog.at(store, sys.argv[2]).messages()
t3 = time.process_time()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "at_messages": t3 - t2,
                  "messages": len(messages), "parts": sum(len(m.parts) for m in messages)}))
"""


def user_path(path: str, sid: str, repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, f"sqlite:///{path}", sid],
                             check=True, capture_output=True, text=True, cwd=str(ROOT)).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    best: dict[str, Any] = min(runs, key=lambda r: r["at_messages"])
    best["import"] = min(r["import"] for r in runs)
    return best


def floor(blobs: list[bytes]) -> None:
    decode = msgspec.msgpack.Decoder(AnyEvent).decode
    for b in blobs:
        decode(b)


def comparable(events: Sequence[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Each event as the peer holds it: its kind and its payload, no envelope."""
    rows = []
    for e in events:
        data = msgspec.to_builtins(e)
        for key in ENVELOPE:
            data.pop(key, None)
        data.pop("type", None)
        rows.append((tag_of(type(e)), data))
    return rows


def eventsourcing_replay(rows: list[tuple[str, dict[str, Any]]], tmp: Path,
                         repeat: int) -> float | None:
    """CPU seconds of the peer's best replay of ``rows`` from SQLite, or None."""
    peer = eventsourcing_aggregate()
    if peer is None:
        return None
    Application, Conversation = peer  # noqa: N806 - classes
    app: Any = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                           "SQLITE_DBNAME": str(tmp / "es.db")})
    agg = Conversation()
    for i in range(0, len(rows), 1000):
        for kind, data in rows[i:i + 1000]:
            agg.happened(kind=kind, data=data)
        app.save(agg)
    got: Any = app.repository.get(agg.id)
    assert got.count == len(rows), got.count
    return cpu_best_of(repeat, lambda: app.repository.get(agg.id))


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="convlog-bench-user-") as name:
        return _run(args, Path(name))


def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    path = str(tmp / "user.db")
    with SQLiteStore(path, synchronous="NORMAL", durability="batched") as store:
        session, _ = record(store, args.events)
        store.flush()
        sid = session.id
    store = SQLiteStore(path)
    events = list(store.read(sid))
    n = len(events)
    blobs = [encode_msgpack(e) for e in events]
    out: dict[str, Any] = {"events": n}
    out["user"] = user_path(path, sid, args.repeat)
    out["bare"] = cpu_best_of(args.repeat, lambda: WithPartsProjection.replay(store, sid))
    bare = WithPartsProjection.replay(store, sid).messages()
    # Both paths read the same state (the user's is checked by its counts).
    if (len(bare), sum(len(m.parts) for m in bare)) != (out["user"]["messages"],
                                                        out["user"]["parts"]):
        raise AssertionError("the user path and the bare path read different states")
    out["floor"] = cpu_best_of(args.repeat, lambda: floor(blobs))
    rows = comparable(events[:args.es_events])
    del events
    es = eventsourcing_replay(rows, tmp, args.repeat)
    user = out["user"]["at_messages"]
    out["ratios"] = {"user_vs_floor": user / out["floor"],
                     "bare_vs_floor": out["bare"] / out["floor"]}
    if es is not None:
        es_rate = (len(rows) + 1) / es
        out["eventsourcing"] = {"events": len(rows) + 1, "seconds": es, "per_s": es_rate}
        out["ratios"]["user_vs_eventsourcing"] = n / user / es_rate
        out["ratios"]["bare_vs_eventsourcing"] = n / out["bare"] / es_rate
    store.close()
    return out


def render(res: dict[str, Any]) -> str:
    n, u, r = res["events"], res["user"], res["ratios"]
    lines = [
        f"{n:,} events; CPU seconds, best of the runs",
        f"  user path  convlog.at(store, id).messages(), fresh process: {u['at_messages']:.3f} s"
        f" ({n / u['at_messages'] / 1e6:.2f}M events/s; {u['messages']:,} messages,"
        f" {u['parts']:,} parts; before it: import convlog {u['import']:.3f} s, open"
        f" {u['open']:.3f} s)",
        f"  bare path  WithPartsProjection.replay(store, id), warm:      {res['bare']:.3f} s",
        f"  floor      msgspec decode of each event's bytes:             {res['floor']:.3f} s",
    ]
    es = res.get("eventsourcing")
    if es is not None:
        lines.append(f"  eventsourcing repository.get, payload-only events ({es['events']:,}):"
                     f" {es['seconds']:.3f} s ({es['per_s'] / 1e3:.0f}k events/s)")
        for path in ("user", "bare"):
            x = r[f"{path}_vs_eventsourcing"]
            lines.append(f"  {path:5} vs eventsourcing: {x:5.1f}x  (target >= {TARGET_VS_ES:.0f}x:"
                         f" {'met' if x >= TARGET_VS_ES else 'NOT met'})")
    for path in ("user", "bare"):
        x = r[f"{path}_vs_floor"]
        lines.append(f"  {path:5} vs floor:         {x:5.2f}x  (target <= {TARGET_VS_FLOOR}x:"
                     f" {'met' if x <= TARGET_VS_FLOOR else 'NOT met'})")
    return "\n".join(lines)


def profile(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="convlog-bench-user-") as name:
        _profile(args, Path(name))


def _profile(args: argparse.Namespace, tmp: Path) -> None:
    path = str(tmp / "user.db")
    with SQLiteStore(path, synchronous="NORMAL", durability="batched") as store:
        session, _ = record(store, args.events)
        store.flush()
    code = ("import cProfile, pstats, sys, convlog\n"
            "store = convlog.open_store(sys.argv[1])\n"
            "cProfile.run('convlog.at(store, sys.argv[2]).messages()', sys.argv[3])\n")
    stats = str(tmp / "user.prof")
    subprocess.run([sys.executable, "-c", code, f"sqlite:///{path}", session.id, stats],
                   check=True, cwd=str(ROOT))
    pstats.Stats(stats).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--es-events", type=int, default=200_000,
                   help="events replayed through eventsourcing (its replay is linear)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    if args.profile:
        profile(args)
        return 0
    res = run(args)
    print(json.dumps(res, indent=2) if args.json else render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
