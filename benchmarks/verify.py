"""Verify benchmark: how fast a check that proves every event's content runs.

Usage (from the repository root)::

    .venv/bin/python benchmarks/verify.py                # 200,000 events
    .venv/bin/python benchmarks/verify.py --events 50000

The delta-heavy workload of ``benchmarks/workload.py`` is stored once in SQLite
and in JSONL (bulk appends, so nearly all of it sits in sealed blocks), then, in
the same run and on one core (CPU time, best of ``--repeat``):

- ``verify --fast``: the chain walk, which recomputes every event's chain hash
  from the stored bytes (issue 27: content proven, transitions not replayed);
- ``verify``: the deep check (also decodes into the catalog and replays every
  transition through the lifecycle);
- the *floor*: one SHA-256 per event over its canonical bytes, already in memory
  as ``bytes`` (no reading, no unpacking): no check that hashes each event can
  beat it in Python;
- the *link-only walk* the chain walk was before issue 27: one digest per sealed
  block over its stored bytes (proves nothing about the events inside an unkeyed
  block whose link was recomputed), for comparison only.

It prints events/s for each and the ratios to the floor, against issue 30's
targets (a content-proving verify >= 1M events/s, deep >= 0.5M events/s).

Then the *format study* behind the sealed block's design (issue 30 target 2): per
event, over the same events cut into blocks of ``BLOCK_MAX``, the cost of each step
a content-proving check takes for today's packed payload and for the alternative
that keeps each event's canonical bytes (zlib of their msgpack array): inflating,
unpacking or cutting apart, one encode of the block's events, the chain's own batch
loop (``Chain.links``) and the bytes per event each payload stores. A check cannot
be faster than its inflate + cut + hash; a format is worth it only if that sum is
under a microsecond at no more than the documented storage.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from benchmarks.stores import record
from engine.codec import canonical, canonical_encoder
from engine.events import Event
from engine.store import Store, blocks, open_store, packed
from engine.store.base import Span
from engine.store.chain import GENESIS, HASH_BYTES, Chain
from engine.store.verify import reader_of, verify

TARGET_CONTENT = 1_000_000
TARGET_DEEP = 500_000


def _cpu(repeat: int, fn: Callable[[], int]) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.process_time()
        n = fn()
        best = min(best, time.process_time() - t0)
    return best, n


def _link_only(url: str) -> int:
    """The pre-issue-27 walk of sealed blocks: their links only (counted events)."""
    store = open_store(url, create=False)
    reader = reader_of(store)
    try:
        n = 0
        for info in store.sessions():
            prev = bytes(HASH_BYTES)
            for unit in reader.units(info.id, deep=False):
                if isinstance(unit, Span):
                    if not reader.link_holds(info.id, prev, unit):
                        raise SystemExit("link mismatch")
                    prev = unit.head
                    n += unit.last - unit.seq + 1
        return n
    finally:
        store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sid, events = record(args.events)
    blank = [msgspec.structs.replace(e, seq=0, session_id="") for e in events]
    canon = [canonical(e) for e in events]

    def floor() -> int:
        prev = bytes(HASH_BYTES)
        sha = hashlib.sha256
        for c in canon:
            prev = sha(prev + c).digest()[:HASH_BYTES]
        return len(canon)

    t_floor, _ = _cpu(args.repeat, floor)
    floor_rate = len(canon) / t_floor
    print(f"{len(events)} workload events; floor (SHA-256 per event over canonical bytes "
          f"in memory): {floor_rate / 1e6:.2f}M/s")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, url in (("sqlite", f"sqlite:///{tmp}/v.db"), ("jsonl", f"jsonl:///{tmp}/v")):
            store = open_store(url)
            store.create_session(sid, created=0)
            for i in range(0, len(blank), 1000):
                store.append(sid, blank[i:i + 1000])
            store.close()
            sealed = sum(1 for u in reader_of(open_store(url)).units(sid, deep=False)
                         if isinstance(u, Span))
            rates: dict[str, float] = {}
            for name, deep in (("fast", False), ("deep", True)):
                store = open_store(url, create=False)

                def run(store: Store = store, deep: bool = deep, kind: str = kind) -> int:
                    report = verify(store, deep=deep)
                    if not report.ok:
                        raise SystemExit(f"{kind}: verify failed: {report.first}")
                    return report.events

                t, n = _cpu(args.repeat, run)
                store.close()
                rates[name] = n / t
            t, n = _cpu(args.repeat, functools.partial(_link_only, url))
            rates["link"] = n / t
            print(f"{kind} ({sealed} sealed blocks): "
                  f"verify --fast (content proven) {rates['fast'] / 1e6:.2f}M/s "
                  f"= {rates['fast'] / floor_rate:.2f}x the floor "
                  f"[target {TARGET_CONTENT / 1e6:.1f}M/s: "
                  f"{'met' if rates['fast'] >= TARGET_CONTENT else 'NOT met'}]; "
                  f"deep {rates['deep'] / 1e6:.2f}M/s = {rates['deep'] / floor_rate:.2f}x "
                  f"[target {TARGET_DEEP / 1e6:.1f}M/s: "
                  f"{'met' if rates['deep'] >= TARGET_DEEP else 'NOT met'}]; "
                  f"link-only walk (before, proves no content) {rates['link'] / 1e6:.1f}M/s")
    format_study(sid, events, args.repeat)


def format_study(sid: str, events: list[Event], repeat: int) -> None:
    """Per-event microseconds of each step of a content-proving check, for today's
    packed payload and for a payload keeping the canonical bytes (see the module doc)."""
    step = blocks.BLOCK_MAX
    groups = [events[i:i + step] for i in range(0, len(events), step)]
    n = len(events)
    level = blocks.ZLIB_LEVEL
    packed_z = [zlib.compress(packed.pack(g, sid, i * step + 1), level)
                for i, g in enumerate(groups)]
    canon_z = [zlib.compress(canonical_encoder.encode(g), level) for g in groups]
    raw_list = msgspec.msgpack.Decoder(list[msgspec.Raw])
    chain = Chain(None)
    canon = [bytes(c) for g in groups for c in raw_list.decode(canonical_encoder.encode(g))]
    # Both payloads must give back exactly the bytes the chain covers.
    from_packed = [canonical(e) for i, z in enumerate(packed_z)
                   for e in packed._unpack(zlib.decompress(z), sid, i * step + 1)]
    from_kept = [bytes(c) for z in canon_z for c in raw_list.decode(zlib.decompress(z))]
    if not from_packed == from_kept == canon == [canonical(e) for e in events]:
        raise SystemExit("format study: a payload does not give back the canonical bytes")

    def per_event(fn: Callable[[], object]) -> float:
        t, _ = _cpu(repeat, lambda: (fn(), n)[1])
        return t / n * 1e6

    cost = {
        "inflate packed": per_event(lambda: [zlib.decompress(z) for z in packed_z]),
        "unpack packed to events": per_event(
            lambda: [packed._unpack(zlib.decompress(z), sid, i * step + 1)
                     for i, z in enumerate(packed_z)]),
        "encode events + cut": per_event(
            lambda: [raw_list.decode(canonical_encoder.encode(g)) for g in groups]),
        "inflate canonical": per_event(lambda: [zlib.decompress(z) for z in canon_z]),
        "cut canonical": per_event(lambda: [raw_list.decode(zlib.decompress(z))
                                            for z in canon_z]),
        "chain links (Chain.links)": per_event(lambda: chain.links(GENESIS, canon)),
    }
    size_packed = sum(map(len, packed_z)) / n
    size_canon = sum(map(len, canon_z)) / n
    print(f"format study, {n} events in blocks of {step} (CPU us per event):")
    for name, us in cost.items():
        print(f"  {name}: {us:.3f} us")
    today = cost["unpack packed to events"] + cost["encode events + cut"] + \
        cost["chain links (Chain.links)"]
    keep = cost["cut canonical"] + cost["chain links (Chain.links)"]
    print(f"  packed (today): {size_packed:.1f} B/event, check >= {today:.2f} us/event "
          f"(<= {1 / today:.2f}M/s)")
    print(f"  canonical kept: {size_canon:.1f} B/event ({size_canon / size_packed:.2f}x), "
          f"check >= {keep:.2f} us/event (<= {1 / keep:.2f}M/s)")



if __name__ == "__main__":
    main()
