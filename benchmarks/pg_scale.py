"""Scale out on one PostgreSQL: 8 writer processes against 1, and LISTEN/NOTIFY lag.

    .venv/bin/python benchmarks/pg_scale.py                # durable server (fsync on)
    .venv/bin/python benchmarks/pg_scale.py --quick        # small sizes (the smoke test)
    .venv/bin/python benchmarks/pg_scale.py --no-fsync     # a server with fsync=off

Starts a throwaway cluster itself (``tests/support/pgserver.py``; ``--url`` uses
an existing scratch database instead) and measures, in one run:

1. **Writers**: one process appending one event per append to its own session,
   then ``--writers`` processes at once, each on its own session, for both
   durabilities (``sync``: every commit flushed; ``batched``:
   ``synchronous_commit = off``). The ratio is the 8-writer events/s over the
   1-writer events/s of the same run and durability. Beside it, where the time
   went: client CPU and server (backend) CPU per append, the machine's idle CPU,
   and the wait events of the appending backends sampled from
   ``pg_stat_activity`` (waiting for a placement under way shows as
   ``Lock:advisory``, a flush shared with other commits as ``LWLock:WALWrite``,
   the WAL flush itself as ``IO:WALSync``; before schema 3, the position
   counter's row lock showed as ``Lock:transactionid``).
2. **Subscribers**: ``--sessions`` sessions x ``--per-session`` events written
   by ``--writers`` processes (one event per append, the sessions interleaved)
   while ``--subscribers`` processes each ``subscribe()`` to everything. Lag is
   the time from the writer's acknowledged commit to the subscriber's receipt
   of that position (``time.monotonic``, one clock for every process).

Every session is replayed at the end and compared with what was written, and
every subscriber must have received every position once, in order: a
difference exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import START_MS, Workload
from engine.events import Event
from engine.session import Session, StepClock
from engine.store import open_store
from engine.store.memory import MemoryStore

_TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- events


def workload(n: int, seed: int = 7) -> list[Event]:
    """``n`` events of the delta-heavy workload, unstamped (seq 0, no session)."""
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=seed).run(n)
    out: list[Event] = [msgspec.structs.replace(e, seq=0, session_id="")
                        for e in store.read(s.id)]
    return out[:n]


def for_session(events: list[Event], index: int) -> list[Event]:
    """The same events under ids of their own (ids are unique across a store)."""
    prefix = f"{index:08x}"
    return [msgspec.structs.replace(e, id=prefix + e.id[8:]) for e in events]


def digest(events: Iterable[Event]) -> str:
    """What a session holds, without what the store stamps (seq, session)."""
    h = hashlib.sha256()
    for e in events:
        h.update(msgspec.msgpack.encode(msgspec.structs.replace(e, seq=0, session_id="")))
    return h.hexdigest()


def session_name(run: str, index: int) -> str:
    return f"{run}-{index:04d}"


# --------------------------------------------------------------------------- CPU


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process on this machine (the server backends)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _machine_cpu() -> tuple[float, float]:
    """(busy, idle) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return float(sum(fields) - idle), float(idle)


# --------------------------------------------------------------------------- writers


class Gate:
    """Children get ready (connect, generate their events), then all start at once."""

    def __init__(self, ctx: Any) -> None:
        self._ready = ctx.Semaphore(0)
        self._go = ctx.Event()

    def wait(self) -> None:  # in a child
        self._ready.release()
        self._go.wait()

    def open(self, children: int) -> None:  # in the parent
        for _ in range(children):
            self._ready.acquire()
        self._go.set()


def _writer(url: str, sessions: list[int], *, run: str, per_session: int, seed: int,
            start: Any, out: Any) -> None:
    """Append one event per call to ``sessions``, interleaved; report times."""
    store = open_store(url)
    base = workload(per_session, seed)
    names = [session_name(run, i) for i in sessions]
    queues = [for_session(base, i) for i in sessions]
    for name in names:
        store.create_session(name, created=0)
    db: Any = getattr(store, "_db", None)
    backend = int(db.execute("SELECT pg_backend_pid()").fetchone()[0]) if db else 0
    acks: list[tuple[int, float]] = []
    start.wait()
    cpu0, server0, t0 = time.process_time(), _proc_cpu(backend), time.monotonic()
    now = time.monotonic
    for k in range(per_session):
        for name, events in zip(names, queues, strict=True):
            got = store.append(name, [events[k]])
            acks.append((got.positions[0], now()))
    t1 = time.monotonic()
    out.put({"t0": t0, "t1": t1, "events": len(acks), "cpu": time.process_time() - cpu0,
             "server_cpu": _proc_cpu(backend) - server0, "acks": acks,
             "digests": {name: digest(events) for name, events in zip(names, queues,
                                                                      strict=True)}})
    store.close()


def _floor_writer(dsn: str, w: int, *, counter: bool, count: int, start: Any,
                  out: Any) -> None:
    """The server's own scaling, without convlog: one autocommit transaction per
    call inserting a ~150-byte row (what a one-event block is), and with
    ``counter`` also bumping a one-row counter as convlog's position does."""
    import psycopg  # noqa: PLC0415 - PostgreSQL only

    row = b"x" * 150
    sql = ("WITH c AS (UPDATE bench_counter SET last = last + 1 RETURNING last) "
           "INSERT INTO bench_rows SELECT %s, %s, last FROM c" if counter
           else "INSERT INTO bench_rows VALUES (%s, %s, 0)")
    with psycopg.connect(dsn, autocommit=True) as db:
        backend = int(db.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        start.wait()
        cpu0, server0, t0 = time.process_time(), _proc_cpu(backend), time.monotonic()
        for i in range(count):
            db.execute(sql, (w * 10_000_000 + i, row))
        t1 = time.monotonic()
        out.put({"t0": t0, "t1": t1, "events": count, "cpu": time.process_time() - cpu0,
                 "server_cpu": _proc_cpu(backend) - server0, "acks": [], "digests": {}})


def run_floor(url: str, *, writers: int, count: int, counter: bool) -> dict[str, Any]:
    """``writers`` processes of :func:`_floor_writer`, started together."""
    import psycopg  # noqa: PLC0415 - PostgreSQL only

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS bench_rows, bench_counter")
        db.execute("CREATE TABLE bench_rows (k bigint PRIMARY KEY, body bytea, pos bigint)")
        db.execute("CREATE TABLE bench_counter (last bigint)")
        db.execute("INSERT INTO bench_counter VALUES (0)")
    ctx = mp.get_context("spawn")
    start, out = Gate(ctx), ctx.Queue()
    procs = [ctx.Process(target=_floor_writer, args=(url, w), kwargs={
        "counter": counter, "count": count, "start": start, "out": out})
        for w in range(writers)]
    for p in procs:
        p.start()
    start.open(len(procs))
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    t0 = min(r["t0"] for r in results)
    t1 = max(r["t1"] for r in results)
    return {"per_s": writers * count / (t1 - t0)}


def _sample_waits(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    """What the appending backends wait on, every 5 ms (``pg_stat_activity``)."""
    import psycopg  # noqa: PLC0415 - PostgreSQL only

    store = open_store(url)
    dsn = str(getattr(store, "dsn", url))
    store.close()
    with psycopg.connect(dsn, autocommit=True) as db:
        me = db.execute("SELECT pg_backend_pid()").fetchone()
        while not stop.is_set():
            for kind, name in db.execute(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND state = 'active' "
                    "AND pid <> %s AND query LIKE '%%convlog_append%%'", me).fetchall():
                counts["CPU" if kind is None else f"{kind}:{name}"] += 1
            time.sleep(0.005)


def run_writers(url: str, *, writers: int, sessions: int, per_session: int, run: str,
                seed: int, subscribers: int = 0, followers: int = 0,
                sample: bool = False) -> dict[str, Any]:
    """``writers`` processes over ``sessions`` sessions (split evenly), started together."""
    ctx = mp.get_context("spawn")
    start = Gate(ctx)
    out: Any = ctx.Queue()
    subs_out: Any = ctx.Queue()
    store = open_store(url)
    first = store.last_position()
    store.close()
    total = sessions * per_session
    shares = [list(range(w, sessions, writers)) for w in range(writers)]
    procs = [ctx.Process(target=_writer, args=(url, share), kwargs={
        "run": run, "per_session": per_session, "seed": seed, "start": start, "out": out})
             for share in shares if share]
    subs = [ctx.Process(target=_subscriber, args=(url, first, total, start, subs_out))
            for _ in range(subscribers)]
    if followers:
        names = [session_name(run, i) for i in range(min(followers, sessions))]
        subs.append(ctx.Process(target=_followers, args=(url, names, first, per_session),
                                kwargs={"start": start, "out": subs_out}))
    for p in procs + subs:
        p.start()
    waits: Counter[str] = Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_waits, args=(url, stop, waits), daemon=True)
    if sample:
        sampler.start()
    busy0, idle0 = _machine_cpu()
    start.open(len(procs) + len(subs))
    results = [out.get() for _ in procs]
    busy1, idle1 = _machine_cpu()
    stop.set()
    received = [subs_out.get() for _ in subs]
    for p in procs + subs:
        p.join()
    if sample:
        sampler.join()
    t0 = min(r["t0"] for r in results)
    t1 = max(r["t1"] for r in results)
    events = sum(r["events"] for r in results)
    res: dict[str, Any] = {
        "writers": len(procs), "events": events, "seconds": t1 - t0,
        "per_s": events / (t1 - t0),
        "client_cpu_us": 1e6 * sum(r["cpu"] for r in results) / events,
        "server_cpu_us": 1e6 * sum(r["server_cpu"] for r in results) / events,
        "idle": (idle1 - idle0) / ((busy1 - busy0) + (idle1 - idle0)),
        "waits": dict(waits.most_common(6)),
        "digests": {k: v for r in results for k, v in r["digests"].items()},
    }
    acked = {p: t for r in results for p, t in r["acks"]}
    for kind in ("all", "session"):
        mine = [got for got in received if got["kind"] == kind]
        lags: list[float] = sorted(t - acked[p] for got in mine for p, t in got["recv"]
                                   if p in acked)
        if not lags:
            continue
        res[kind] = {
            "subscribers": sum(got["count"] for got in mine),
            "lag_ms_p50": 1000 * lags[len(lags) // 2],
            "lag_ms_p99": 1000 * lags[min(len(lags) - 1, int(len(lags) * 0.99))],
            "lag_ms_max": 1000 * lags[-1],
            "client_cpu_us": 1e6 * sum(g["cpu"] for g in mine) / len(lags),
            "server_cpu_us": 1e6 * sum(g["server_cpu"] for g in mine) / len(lags)}
    res["sub_ok"] = all(got["ok"] for got in received)
    res["sub_errors"] = [got["error"] for got in received if not got["ok"]]
    return res


def _followers(url: str, names: list[str], after: int, count: int, *, start: Any,
               out: Any) -> None:
    """One thread per session, each following that session only (``session_id``)."""
    got: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
    errors: list[str] = []

    def follow(name: str, store: Any) -> None:
        recv = got[name]
        for rec in store.subscribe(after, session_id=name, idle_timeout=30.0):
            if rec.event.session_id != name or (recv and rec.position <= recv[-1][0]):
                errors.append(f"{name}: position {rec.position} out of place")
            recv.append((rec.position, time.monotonic()))
            if len(recv) == count:
                break
        if len(recv) != count:
            errors.append(f"{name}: {len(recv)} of {count} events")

    stores = [open_store(url) for _ in names]
    threads = [threading.Thread(target=follow, args=(name, store))
               for name, store in zip(names, stores, strict=True)]
    start.wait()
    cpu0 = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put({"kind": "session", "count": len(names), "cpu": time.process_time() - cpu0,
             "server_cpu": 0.0, "recv": [r for rs in got.values() for r in rs],
             "ok": not errors, "error": "; ".join(errors[:3])})
    for store in stores:
        store.close()


def _subscriber(url: str, after: int, total: int, start: Any, out: Any) -> None:
    """Read everything after ``after`` as it commits; report receipt times."""
    store = open_store(url)
    recv: list[tuple[int, float]] = []
    now = time.monotonic
    expect = after + 1
    error = ""
    db: Any = getattr(store, "_db", None)
    backend = int(db.execute("SELECT pg_backend_pid()").fetchone()[0]) if db else 0
    start.wait()
    cpu0, server0 = time.process_time(), _proc_cpu(backend)
    for rec in store.subscribe(after, idle_timeout=30.0):
        recv.append((rec.position, now()))
        if rec.position != expect and not error:
            error = f"position {rec.position} where {expect} was next"
        expect = rec.position + 1
        if len(recv) == total:
            break
    if len(recv) != total and not error:
        error = f"{len(recv)} of {total} events received"
    out.put({"kind": "all", "count": 1, "recv": recv, "ok": not error, "error": error,
             "cpu": time.process_time() - cpu0, "server_cpu": _proc_cpu(backend) - server0})
    store.close()


# --------------------------------------------------------------------------- checks


def check_replay(url: str, digests: dict[str, str]) -> list[str]:
    """Each session as stored, against what its writer appended (the writers' digests)."""
    store = open_store(url)
    try:
        return [name for name, want in sorted(digests.items())
                if digest(store.read(name)) != want]
    finally:
        store.close()


# --------------------------------------------------------------------------- main


def _with(url: str, **params: str) -> str:
    sep = "&" if "?" in url else "?"
    return url + sep + "&".join(f"{k}={v}" for k, v in params.items())


def _cluster(fsync: bool, connections: int) -> tuple[str, Callable[[], None]]:
    from tests.support.pgserver import PgServer, find_bin  # noqa: PLC0415

    bindir = find_bin()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found (install postgresql or set "
                         "PG_BIN), or pass --url")
    server = PgServer(bindir, durable=fsync, max_connections=connections).start()
    return server.url(), server.stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a scratch PostgreSQL database (default: a throwaway "
                                      "cluster started here)")
    parser.add_argument("--no-fsync", action="store_true",
                        help="start the throwaway cluster with fsync=off")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--events", type=int, default=2000,
                        help="events per writer in the writer test")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=1000)
    parser.add_argument("--subscribers", type=int, default=4,
                        help="processes following every session")
    parser.add_argument("--followers", type=int, default=100,
                        help="threads (in one process) following one session each")
    parser.add_argument("--sub-durability", default="batched", choices=("sync", "batched"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.sessions, args.per_session = 60, 6, 40
        args.writers, args.subscribers = min(args.writers, 3), min(args.subscribers, 2)
        args.followers = min(args.followers, args.sessions)

    stop: Callable[[], None] = lambda: None  # noqa: E731
    url = args.url
    if url is None:
        url, stop = _cluster(not args.no_fsync, 40 + args.writers + 2 * args.subscribers
                             + 2 * args.followers)
    failures: list[str] = []
    ok = True
    try:
        ratios: dict[str, float] = {}
        for durability in ("sync", "batched"):
            durl = _with(url, durability=durability)
            for writers in (1, args.writers):
                run = f"w{durability[0]}{writers}"
                print(f"[{durability}: {writers} writer(s) x {args.events} events] ...",
                      file=sys.stderr)
                res = run_writers(durl, writers=writers, sessions=writers,
                                  per_session=args.events, run=run, seed=args.seed, sample=True)
                print(f"{durability:8} writers={res['writers']} {res['per_s']:9,.0f} events/s  "
                      f"client {res['client_cpu_us']:5.0f} us/append  server "
                      f"{res['server_cpu_us']:5.0f} us/append  idle {res['idle']:4.0%}  "
                      f"waits {res['waits']}")
                failures += check_replay(url, res["digests"])
                if writers == 1:
                    base = res["per_s"]
                else:
                    ratios[f"{durability}: {writers} writers / 1 writer"] = res["per_s"] / base
        dsn = url  # a libpq URL (a search_path in its options is kept)
        for counter in (False, True):
            name = "1-row INSERT" + (" + counter row" if counter else "")
            print(f"[floor: {name}, 1 and {args.writers} processes] ...", file=sys.stderr)
            one = run_floor(dsn, writers=1, count=args.events, counter=counter)["per_s"]
            many = run_floor(dsn, writers=args.writers, count=args.events,
                             counter=counter)["per_s"]
            print(f"floor sync {name:28} 1: {one:7,.0f}/s  {args.writers}: {many:7,.0f}/s  "
                  f"{many / one:.2f}x")
            ratios[f"floor sync {name}: {args.writers} / 1"] = many / one
        n = args.sessions * args.per_session
        print(f"[subscribers: {args.sessions} sessions x {args.per_session} events, "
              f"{args.writers} writers, {args.subscribers} subscribers, "
              f"{args.sub_durability}] ...", file=sys.stderr)
        res = run_writers(_with(url, durability=args.sub_durability), writers=args.writers,
                          sessions=args.sessions, per_session=args.per_session, run="sub",
                          seed=args.seed, subscribers=args.subscribers,
                          followers=args.followers)
        print(f"events={n:,} {res['per_s']:,.0f} events/s written, idle {res['idle']:.0%}, "
              f"writer client {res['client_cpu_us']:.0f} us server "
              f"{res['server_cpu_us']:.0f} us per event")
        for kind, what in (("all", "following every session"),
                           ("session", "following one session each")):
            if kind in res:
                r = res[kind]
                print(f"subscribers={r['subscribers']} {what}: lag p50 "
                      f"{r['lag_ms_p50']:.1f} ms  p99 {r['lag_ms_p99']:.1f} ms  max "
                      f"{r['lag_ms_max']:.1f} ms  CPU per event received: client "
                      f"{r['client_cpu_us']:.0f} us server {r['server_cpu_us']:.0f} us")
        if len(res["digests"]) != args.sessions:
            failures.append("a writer's sessions")
        failures += check_replay(url, res["digests"])
        if not res["sub_ok"]:
            ok = False
            print(f"FAIL: a subscriber missed events: {res['sub_errors']}", file=sys.stderr)
        for name, ratio in ratios.items():
            print(f"ratio {name}: {ratio:.2f}x")
    finally:
        stop()
    if failures:
        print(f"FAIL: replayed sessions differ from what was written: {failures[:5]}",
              file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
