"""The packed event codec (``engine.store.packed``): size and speed next to msgpack.

Usage (from the repository root)::

    .venv/bin/python benchmarks/packed.py            # workload of 100,000 events
    .venv/bin/python benchmarks/packed.py --quick    # 20,000 events, 100 turns

What is measured, in one run:

1. size: the streamed conversation of ``benchmarks/stores.py`` (a user prompt, an
   answer streamed as 12-character ``text.delta`` events) and the same conversation
   as whole messages, cut into blocks of 512, 1,024 and 4,096 events, each packed and
   ``zlib``-compressed (level 3): bytes per event and the ratio to the message text;
   beside it, the same blocks as ordinary msgpack (what a block holds today), also
   compressed;
2. speed, on the delta-heavy workload of ``benchmarks/workload.py`` in blocks of 512:
   ``unpack`` against the floor (``msgspec.msgpack.Decoder(list[AnyEvent])`` over the
   same events' ordinary msgpack), and ``pack`` against ``msgspec`` encoding.
   CPU time (``time.process_time``), best of several runs.

Exits non-zero when any round trip differs (events or canonical bytes).
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from benchmarks.stores import _turn_texts, record_turn
from benchmarks.workload import START_MS, Workload
from engine import codec
from engine.events import AnyEvent, Event
from engine.session import Session, StepClock
from engine.store import MemoryStore, packed

BLOCKS = (512, 1024, 4096)
ZLIB_LEVEL = 3
_floor = msgspec.msgpack.Decoder(list[AnyEvent])
_enc = msgspec.msgpack.Encoder()


def conversation(turns: int, *, streamed: bool) -> tuple[str, list[Event], int]:
    """(session id, events, message text bytes) of the stores benchmark's conversation."""
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    text = 0
    for prompt, answer in _turn_texts(turns):
        record_turn(s, prompt, answer, streamed=streamed)
        text += len(prompt.encode()) + len(answer.encode())
    return s.id, list(store.read(s.id)), text


def workload(n: int) -> tuple[str, list[Event]]:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=7).run(n)
    return s.id, list(store.read(s.id))


def blocks(events: Sequence[Event], size: int) -> list[Sequence[Event]]:
    return [events[i:i + size] for i in range(0, len(events), size)]


def check(sid: str, events: Sequence[Event], size: int) -> bool:
    """Every block round-trips exactly (events and canonical bytes)."""
    for part in blocks(events, size):
        back = packed.unpack(packed.pack(part, sid, part[0].seq), sid, part[0].seq)
        if back != list(part) or any(codec.canonical(a) != codec.canonical(b)
                                     for a, b in zip(back, part, strict=True)):
            return False
    return True


def sizes(sid: str, events: Sequence[Event], text: int) -> list[dict[str, Any]]:
    out = []
    n = len(events)
    for size in BLOCKS:
        parts = blocks(events, size)
        pk = sum(len(zlib.compress(packed.pack(p, sid, p[0].seq), ZLIB_LEVEL)) for p in parts)
        mp = sum(len(zlib.compress(_enc.encode(list(p)), ZLIB_LEVEL)) for p in parts)
        out.append({"block": size, "packed_per_event": pk / n, "packed_x_text": pk / text,
                    "msgpack_per_event": mp / n, "msgpack_x_text": mp / text})
    return out


def _cpu(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def speed(sid: str, events: Sequence[Event], repeat: int) -> dict[str, float]:
    parts = blocks(events, 512)
    packs = [(packed.pack(p, sid, p[0].seq), p[0].seq) for p in parts]
    plain = [_enc.encode(list(p)) for p in parts]
    n = len(events)

    def unpack_all() -> None:
        for data, first in packs:
            packed._unpack(data, sid, first)  # not the one-block cache: a real decode

    floor = _cpu(repeat, lambda: [_floor.decode(b) for b in plain])
    unpack = _cpu(repeat, unpack_all)
    encode = _cpu(repeat, lambda: [_enc.encode(list(p)) for p in parts])
    pack = _cpu(repeat, lambda: [packed.pack(p, sid, p[0].seq) for p in parts])
    return {"floor_us": floor / n * 1e6, "unpack_us": unpack / n * 1e6,
            "unpack_vs_floor": unpack / floor, "encode_us": encode / n * 1e6,
            "pack_us": pack / n * 1e6, "pack_vs_encode": pack / encode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 events, 100 turns")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--events", type=int, help="workload size (default 100,000)")
    parser.add_argument("--turns", type=int, help="conversation turns (default 500)")
    args = parser.parse_args(argv)
    n, turns = (20_000, 100) if args.quick else (100_000, 500)
    n = args.events or n
    turns = args.turns or turns

    ok = True
    print(f"size: a {turns}-turn conversation, blocks packed then zlib level {ZLIB_LEVEL}")
    print(f"{'':>10}{'block':>7}{'events':>8}{'packed B/ev':>13}{'x text':>8}"
          f"{'msgpack B/ev':>14}{'x text':>8}")
    for streamed in (True, False):
        sid, evs, text = conversation(turns, streamed=streamed)
        for size in BLOCKS:
            ok &= check(sid, evs, size)
        for row in sizes(sid, evs, text):
            print(f"{'streamed' if streamed else 'messages':>10}{row['block']:>7}{len(evs):>8}"
                  f"{row['packed_per_event']:>13.2f}{row['packed_x_text']:>8.3f}"
                  f"{row['msgpack_per_event']:>14.2f}{row['msgpack_x_text']:>8.3f}")

    sid, evs = workload(n)
    ok &= check(sid, evs, 512)
    sp = speed(sid, evs, args.repeat)
    print(f"\nspeed: the workload ({len(evs):,} events) in blocks of 512, CPU time, best of "
          f"{args.repeat}")
    print(f"  unpack {sp['unpack_us']:.3f} us/event, floor (msgspec decode of msgpack) "
          f"{sp['floor_us']:.3f} us/event: {sp['unpack_vs_floor']:.2f}x the floor")
    print(f"  pack   {sp['pack_us']:.3f} us/event, msgspec encode {sp['encode_us']:.3f} "
          f"us/event: {sp['pack_vs_encode']:.1f}x")
    if not ok:
        print("ROUND TRIP DIFFERS", file=sys.stderr)
        return 1
    print("round trips: exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
