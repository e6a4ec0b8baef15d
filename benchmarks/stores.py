"""Store benchmark: append and replay throughput and bytes on disk per backend, next to
the ``eventsourcing`` library, and storage growth next to LangGraph's SqliteSaver.

Usage (from the repository root)::

    .venv/bin/pip install -e '.[bench]'      # eventsourcing, langgraph (benchmark only)
    .venv/bin/python benchmarks/stores.py             # 100,000 events
    .venv/bin/python benchmarks/stores.py --quick     # 20,000 events, growth to 200 turns
    .venv/bin/python benchmarks/stores.py --postgres postgresql://user@127.0.0.1:5432/db

What is measured, all in one run (ratios compare figures of the same run):

1. the delta-heavy workload of ``benchmarks/workload.py`` recorded once, then
   stored per backend: ``sync`` appends (one event per append, the durable
   default; a sample, since each costs an fsync), ``batched`` appends (one event
   per append, group commit) and bulk appends (batches of 1,000); with
   ``--postgres``, also the baseline for its appends: one autocommit one-row
   INSERT per call on the same server (one round trip and one commit, the least
   a write transaction costs), sync and with ``synchronous_commit = off``;
2. replay: ``store.read`` of the whole session (decode), and decode + the write
   side's ``Lifecycle`` fold (what ``Session.open`` does);
3. bytes on disk per event;
4. the same events through ``eventsourcing`` (one aggregate, one domain event per
   convlog event carrying the same fields; POPO and SQLite), saved in batches of
   1,000 and replayed with ``repository.get``;
5. storage for a 50/200/500-turn conversation (user prompt, streamed answer) in
   convlog SQLite vs LangGraph's ``SqliteSaver`` with a ``MessagesState``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from benchmarks.workload import START_MS, Workload
from engine.events import Event, tag_of
from engine.lifecycle import Lifecycle
from engine.session import Session, StepClock
from engine.store import MemoryStore, open_store
from engine.store.verify import verify

TARGET_REPLAY_VS_ES = 20.0
TARGET_BYTES_VS_ES = 1 / 3


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _sqlite_size(path: Path) -> int:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _best(repeat: int, fn: Callable[[], Any]) -> float:
    return min(_timed(fn)[0] for _ in range(repeat))


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _rename(e: Event, tag: str) -> Event:
    """The same event under another id (ids are unique across a store).

    The copy's ids differ in their random group (the fourth), as two generators'
    ids do, and keep counting in the low bits. Changing only the time prefix
    would give ids whose low 64 bits equal stored ones, which real generators
    (a random 62-bit base each) practically never make, and which SQLite's id
    runs confirm one by one against the stored event (a slow path)."""
    group = tag if tag != e.id[19:23] else tag[::-1]
    return msgspec.structs.replace(e, id=e.id[:19] + group + e.id[23:])


def record(n: int) -> tuple[str, list[Event]]:
    store = MemoryStore()
    s = Session.create(store, clock=StepClock(START_MS))
    Workload(s, seed=7).run(n)
    return s.id, list(store.read(s.id))


# --------------------------------------------------------------------------- convlog


def bench_convlog(kind: str, url: str, sid: str, events: list[Event], path: Path | None, *,
                  sync_sample: int, repeat: int) -> dict[str, Any]:
    n = len(events)
    out: dict[str, Any] = {"backend": kind, "events": n}
    blank = [msgspec.structs.replace(e, seq=0, session_id="") for e in events]
    sep = "&" if "?" in url else "?"

    if kind != "memory":  # sync: one event per append, each durable before the next
        store = open_store(url)
        side = sid[:-4] + "ffff"
        store.create_session(side, created=0)
        k = min(sync_sample, n)
        sample = [_rename(e, "a1a1") for e in blank[:k]]
        t, _ = _timed(lambda: [store.append(side, [e]) for e in sample])
        out["append_sync_per_s"] = k / t
        store.close()

    batched = open_store(f"{url}{sep}durability=batched&batch_events=1000&batch_ms=50")
    batched.create_session(sid, created=0)
    t, _ = _timed(lambda: [batched.append(sid, [e]) for e in blank])
    batched.flush()
    out["append_batched_per_s"] = n / t
    batched.close()

    if kind != "memory":
        bulk = open_store(url)
        other = sid[:-4] + "eeee"
        bulk.create_session(other, created=0)
        ids = [_rename(e, "b2b2") for e in blank]
        t, _ = _timed(lambda: [bulk.append(other, ids[i:i + 1000])
                               for i in range(0, n, 1000)])
        out["append_bulk_per_s"] = n / t
        bulk.close()

    store = open_store(url)
    if kind == "memory":
        store = batched  # memory:// lives in the object
    out["replay_per_s"] = n / _best(repeat, lambda: sum(1 for _ in store.read(sid)))

    def fold() -> None:
        lc = Lifecycle(sid)
        for e in store.read(sid):
            lc.replay(e)

    out["replay_fold_per_s"] = n / _best(repeat, fold)
    if kind != "memory":  # verify on one core: the chain walk, then everything
        for name, deep in (("verify_chain_per_s", False), ("verify_deep_per_s", True)):
            t0 = time.process_time()
            report = verify(store, deep=deep)
            spent = time.process_time() - t0
            if not report.ok:
                raise SystemExit(f"{kind}: verify failed: {report.first}")
            out[name] = report.events / spent
    store.close()
    if path is not None:
        # Everything the store holds (three copies of the session, the sample aside).
        size = _sqlite_size(path) if kind == "sqlite" else _size(path)
        stored = 2 * n + (min(sync_sample, n) if kind != "memory" else 0)
        out["bytes_per_event"] = size / stored
    return out


def bench_pg_floor(url: str, n: int, sync_sample: int) -> dict[str, Any]:
    """The baseline for PostgreSQL appends, on the same server in the same run: an
    autocommit one-row INSERT (one round trip, one commit) per call, durable and
    with ``synchronous_commit = off``. No append can be cheaper than one write
    transaction; the ratios show how close a single-event append comes."""
    import psycopg  # noqa: PLC0415 - only with --postgres

    store = open_store(url)
    dsn = str(getattr(store, "dsn", url))
    store.close()
    row = b"x" * 120  # about one stored single-event block
    out: dict[str, Any] = {"backend": "postgres 1-row INSERT", "events": n}
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("CREATE TABLE IF NOT EXISTS convlog_bench_floor "
                   "(k bigint PRIMARY KEY, body bytea NOT NULL)")
        try:
            for key, count, setting in (("append_sync_per_s", sync_sample, "on"),
                                        ("append_batched_per_s", n, "off")):
                db.execute(f"SET synchronous_commit = {setting}")
                db.execute("TRUNCATE convlog_bench_floor")

                def insert(count: int = count) -> None:
                    for i in range(count):
                        db.execute("INSERT INTO convlog_bench_floor VALUES (%s, %s)", (i, row))

                out[key] = count / _timed(insert)[0]
        finally:
            db.execute("DROP TABLE convlog_bench_floor")
    return out


# --------------------------------------------------------------------------- eventsourcing


def eventsourcing_aggregate() -> tuple[Any, Any] | None:
    """The peer's ``Application`` class and an aggregate class with one event that
    takes a convlog event's kind and data, or None without the bench extra."""
    es_app = _optional("eventsourcing.application")
    es_domain = _optional("eventsourcing.domain")
    if es_app is None or es_domain is None:
        return None
    base, event = es_domain.Aggregate, es_domain.event

    class Conversation(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.count = 0

        @event("Happened")
        def happened(self, kind: str, data: dict[str, Any]) -> None:
            self.count += 1

    return es_app.Application, Conversation


def bench_eventsourcing(events: list[Event], repeat: int, tmp: Path) -> list[dict[str, Any]]:
    peer = eventsourcing_aggregate()
    if peer is None:
        return []
    application, Conversation = peer  # noqa: N806 - a class

    rows = [(tag_of(type(e)), msgspec.to_builtins(e)) for e in events]
    results = []
    for name, env in (("eventsourcing POPO", {"PERSISTENCE_MODULE": "eventsourcing.popo"}),
                      ("eventsourcing SQLite", {"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                                                "SQLITE_DBNAME": str(tmp / "es.db")})):
        app = application(env=env)
        agg = Conversation()

        def fill(app: Any = app, agg: Any = agg) -> None:
            for i in range(0, len(rows), 1000):
                for kind, data in rows[i:i + 1000]:
                    agg.happened(kind=kind, data=data)
                app.save(agg)

        t, _ = _timed(fill)
        n = len(rows) + 1
        res: dict[str, Any] = {"backend": name, "events": n, "append_bulk_per_s": n / t}
        def get(app: Any = app, agg: Any = agg) -> Any:
            return app.repository.get(agg.id)

        res["replay_per_s"] = n / _best(repeat, get)
        if "SQLITE_DBNAME" in env:
            res["bytes_per_event"] = _sqlite_size(Path(env["SQLITE_DBNAME"])) / n
        results.append(res)
    return results


# --------------------------------------------------------------------------- growth


_WORDS = ("the parser reads each line and splits it on commas before the fixtures run so the "
          "new format breaks every test that loads a table we should accept both separators "
          "keep quoted fields déjà vu naïve café")


def _turn_texts(turns: int) -> list[tuple[str, str]]:
    """Prompts and answers of about 1.33 KB per turn (664 KB for 500 turns)."""
    rng = random.Random(3)
    words = _WORDS.split()

    def prose(k: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < k:
            out.append(rng.choice(words))
        return " ".join(out)

    return [(prose(180), prose(1150)) for _ in range(turns)]


def record_turn(s: Session, prompt: str, answer: str, *, streamed: bool) -> None:
    """One turn of the growth conversation: the prompt, then the answer streamed in
    12-character deltas or added whole."""
    s.user_message(prompt)
    m = s.start_message("assistant")
    if streamed:
        part = s.add_text(m)
        for i in range(0, len(answer), 12):
            s.text_delta(part, answer[i:i + 12])
        s.end_part(part)
    else:
        s.add_text(m, answer, streaming=False)
    s.complete_message(m, finish="stop")


def growth(points: list[int], tmp: Path) -> dict[str, Any]:
    texts = _turn_texts(points[-1])
    out: dict[str, Any] = {"turns": points, "text_bytes": [], "convlog_sqlite": [],
                           "convlog_ms_per_turn": []}
    path = tmp / "growth.db"
    store = open_store(f"sqlite:///{path}", durability="batched", batch_ms=50)
    s = Session.create(store, clock=StepClock(START_MS))
    text_bytes = 0
    for turn, (prompt, answer) in enumerate(texts, start=1):
        t = time.perf_counter()
        record_turn(s, prompt, answer, streamed=True)
        store.flush()
        ms = (time.perf_counter() - t) * 1000
        text_bytes += len(prompt.encode()) + len(answer.encode())
        if turn in points:
            out["text_bytes"].append(text_bytes)
            out["convlog_sqlite"].append(_sqlite_size(path))
            out["convlog_ms_per_turn"].append(ms)
    store.close()

    # The same conversation stored as LangGraph stores it: whole messages, no deltas.
    out["convlog_messages"] = []
    path = tmp / "growth-messages.db"
    store = open_store(f"sqlite:///{path}", durability="batched", batch_ms=50)
    s = Session.create(store, clock=StepClock(START_MS))
    for turn, (prompt, answer) in enumerate(texts, start=1):
        record_turn(s, prompt, answer, streamed=False)
        if turn in points:
            store.flush()
            out["convlog_messages"].append(_sqlite_size(path))
    store.close()

    out.update(growth_jsonl(points, texts, tmp))

    graph = _optional("langgraph.graph")
    saver_mod = _optional("langgraph.checkpoint.sqlite")
    messages = _optional("langchain_core.messages")
    if graph is None or saver_mod is None or messages is None:
        out["langgraph"] = "not installed (pip install -e '.[bench]')"
        return out
    lg_path = tmp / "langgraph.db"
    conn = sqlite3.connect(lg_path, check_same_thread=False)
    saver = saver_mod.SqliteSaver(conn)
    answers = iter(a for _, a in texts)

    def reply(state: Any) -> dict[str, Any]:
        return {"messages": [messages.AIMessage(content=next(answers))]}

    g = graph.StateGraph(graph.MessagesState)
    g.add_node("reply", reply)
    g.add_edge(graph.START, "reply")
    g.add_edge("reply", graph.END)
    app = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    out["langgraph_sqlite"] = []
    out["langgraph_ms_per_turn"] = []
    for turn, (prompt, _) in enumerate(texts, start=1):
        t = time.perf_counter()
        app.invoke({"messages": [messages.HumanMessage(content=prompt)]}, cfg)
        ms = (time.perf_counter() - t) * 1000
        if turn in points:
            conn.commit()
            out["langgraph_sqlite"].append(_sqlite_size(lg_path))
            out["langgraph_ms_per_turn"].append(ms)
    conn.close()
    return out


# --------------------------------------------------------------------------- main


def growth_jsonl(points: list[int], texts: list[tuple[str, str]],
                 tmp: Path) -> dict[str, list[int]]:
    """The same conversation in a JSONL store, streamed and as whole messages: the
    directory's bytes (live tail, sealed blocks, heads and metadata)."""
    out: dict[str, list[int]] = {"jsonl_streamed": [], "jsonl_messages": []}
    for key, streamed in (("jsonl_streamed", True), ("jsonl_messages", False)):
        root = tmp / f"growth-{key}"
        store = open_store(f"jsonl:///{root}", durability="batched", batch_ms=50)
        s = Session.create(store, clock=StepClock(START_MS))
        for turn, (prompt, answer) in enumerate(texts, start=1):
            record_turn(s, prompt, answer, streamed=streamed)
            if turn in points:
                store.flush()
                out[key].append(_size(root))
        store.close()
    return out


def _rate(x: float | None) -> str:
    return "" if x is None else f"{x:,.0f}/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="20,000 events, up to 200 turns")
    parser.add_argument("--sync-sample", type=int, default=300,
                        help="events appended one durable append at a time")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", help="also measure this PostgreSQL URL (a scratch db)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.events
    points = [50, 200] if args.quick else [50, 200, 500]

    tmp = Path(tempfile.mkdtemp(prefix="convlog-stores-"))
    sid, events = record(n)
    results: list[dict[str, Any]] = []
    backends: list[tuple[str, str, Path | None]] = [
        ("memory", "memory://", None),
        ("sqlite", f"sqlite:///{tmp}/c.db", tmp / "c.db"),
        ("jsonl", f"jsonl:///{tmp}/log", tmp / "log"),
    ]
    if args.postgres:
        backends.append(("postgres", args.postgres, None))
    for kind, url, path in backends:
        print(f"[convlog {kind}] ...", file=sys.stderr)
        results.append(bench_convlog(kind, url, sid, events, path,
                                     sync_sample=args.sync_sample, repeat=args.repeat))
    if args.postgres:
        print("[postgres 1-row INSERT] ...", file=sys.stderr)
        results.append(bench_pg_floor(args.postgres, n, args.sync_sample))
    print("[eventsourcing] ...", file=sys.stderr)
    es = bench_eventsourcing(events, args.repeat, tmp)
    results += es
    print("[growth] ...", file=sys.stderr)
    grow = growth(points, tmp)

    by = {r["backend"]: r for r in results}
    ratios: dict[str, float] = {}
    if "eventsourcing SQLite" in by:
        e = by["eventsourcing SQLite"]
        ratios["sqlite replay / eventsourcing SQLite replay"] = (
            by["sqlite"]["replay_per_s"] / e["replay_per_s"])
        ratios["sqlite replay+fold / eventsourcing SQLite replay"] = (
            by["sqlite"]["replay_fold_per_s"] / e["replay_per_s"])
        ratios["sqlite bytes/event / eventsourcing's"] = (
            by["sqlite"]["bytes_per_event"] / e["bytes_per_event"])
        ratios["sqlite bulk append / eventsourcing SQLite"] = (
            by["sqlite"]["append_bulk_per_s"] / e["append_bulk_per_s"])
    if "postgres 1-row INSERT" in by:
        for mode in ("sync", "batched"):
            ratios[f"postgres {mode} append / 1-row INSERT transaction"] = (
                by["postgres"][f"append_{mode}_per_s"]
                / by["postgres 1-row INSERT"][f"append_{mode}_per_s"])
    if "eventsourcing POPO" in by:
        ratios["memory replay / eventsourcing POPO replay"] = (
            by["memory"]["replay_per_s"] / by["eventsourcing POPO"]["replay_per_s"])
    report = {"events": n, "results": results, "ratios": ratios, "growth": grow,
              "python": sys.version.split()[0], "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"convlog stores: {n:,} workload events (delta-heavy), Python {report['python']}, "
          f"{report['cpus']} CPUs")
    print(f"{'backend':<22}{'sync append':>14}{'batched':>14}{'bulk 1000':>14}"
          f"{'replay':>14}{'replay+fold':>14}{'B/event':>9}")
    for r in results:
        bpe = r.get("bytes_per_event")
        print(f"{r['backend']:<22}{_rate(r.get('append_sync_per_s')):>14}"
              f"{_rate(r.get('append_batched_per_s')):>14}{_rate(r.get('append_bulk_per_s')):>14}"
              f"{_rate(r.get('replay_per_s')):>14}{_rate(r.get('replay_fold_per_s')):>14}"
              f"{'' if bpe is None else f'{bpe:.0f}':>9}")
    if not es:
        print("eventsourcing: not installed (pip install -e '.[bench]')")
    for r in results:
        if "verify_chain_per_s" in r:
            print(f"verify {r['backend']} (CPU time): chain walk (--fast) "
                  f"{_rate(r['verify_chain_per_s'])}, deep (default) "
                  f"{_rate(r['verify_deep_per_s'])}")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}x")
    print(f"targets: replay >= {TARGET_REPLAY_VS_ES:.0f}x eventsourcing, bytes/event <= "
          f"{TARGET_BYTES_VS_ES:.2f}x")
    print("\nstorage growth (a turn: ~180 B prompt, ~1,150 B answer; convlog SQLite with the "
          "answer streamed in 12-char deltas, and as whole messages like LangGraph)")
    print(f"{'turns':>6}{'text':>11}{'streamed':>11}{'x text':>8}{'ms/turn':>9}"
          f"{'messages':>11}{'x text':>8}{'LangGraph':>12}{'x text':>8}{'ms/turn':>9}")
    for i, turns in enumerate(grow["turns"]):
        text = grow["text_bytes"][i]
        c = grow["convlog_sqlite"][i]
        line = (f"{turns:>6}{text / 1e3:>9.0f}KB{c / 1e3:>9.0f}KB{c / text:>8.2f}"
                f"{grow['convlog_ms_per_turn'][i]:>9.1f}")
        msg = grow["convlog_messages"][i]
        line += f"{msg / 1e3:>9.0f}KB{msg / text:>8.2f}"
        if isinstance(grow.get("langgraph_sqlite"), list):
            lg = grow["langgraph_sqlite"][i]
            line += (f"{lg / 1e6:>10.1f}MB{lg / text:>8.0f}"
                     f"{grow['langgraph_ms_per_turn'][i]:>9.1f}")
        print(line)
    if not isinstance(grow.get("langgraph_sqlite"), list):
        print(f"LangGraph: {grow.get('langgraph')}")
    print("\nthe same conversation in convlog JSONL (live tail + sealed blocks)")
    print(f"{'turns':>6}{'text':>11}{'streamed':>11}{'x text':>8}{'messages':>11}{'x text':>8}")
    for i, turns in enumerate(grow["turns"]):
        text = grow["text_bytes"][i]
        js, jm = grow["jsonl_streamed"][i], grow["jsonl_messages"][i]
        print(f"{turns:>6}{text / 1e3:>9.0f}KB{js / 1e3:>9.0f}KB{js / text:>8.2f}"
              f"{jm / 1e3:>9.0f}KB{jm / text:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
