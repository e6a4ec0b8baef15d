"""Same bytes on disk: a deterministic 20,000-event store written by this tree and by
another checkout (the base of a storage change), compared file by file and row by row.

Usage (from the repository root)::

    git worktree add /tmp/base main        # or: git archive main | tar -x -C /tmp/base
    .venv/bin/python benchmarks/store_same_bytes.py /tmp/base
    .venv/bin/python benchmarks/store_same_bytes.py /tmp/base --backends jsonl
    .venv/bin/python benchmarks/store_same_bytes.py /tmp/base --backends postgres

The store: two root sessions appended one event at a time and interleaved, a fork
appended in batches of 500 (so JSONL seals members and SQLite seals blocks), two
snapshots and a retried append (which writes nothing), every event with a fixed id
and time; once plain and once keyed (HMAC chain). Each tree writes it with its own
``engine`` (a child process started in that tree). JSONL stores must be equal file
for file, SQLite stores row for row (``iterdump``; the file's bytes are reported
too), PostgreSQL stores table for table (each written into a schema of its own on a
throwaway cluster this script starts, ``tests/support/pgserver.py``; ``--pg-url``
uses a running server instead; every ``convlog_`` table's rows in key order, bodies
and hashes as bytes). Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

WRITER = r'''
import sys
from engine import events as ev
from engine.store import open_store

url, keyed = sys.argv[1], sys.argv[2] == "1"
st = open_store(url, **({"key": b"k" * 32} if keyed else {}))
A, B, F = ("0194d1e0-0000-7000-8000-0000000a0001", "0194d1e0-0000-7000-8000-0000000b0001",
           "0194d1e0-0000-7000-8000-0000000f0001")
n = 0
def d(text):
    global n
    n += 1
    return ev.TextDelta(id=f"0194d1e0-0000-7000-8000-{n:012x}", message_id="m", part_id="p",
                        delta=text, time=1_700_000_000_000 + n)
st.create_session(A, created=1)
st.create_session(B, created=2)
for i in range(6000):
    st.append(A, [d("a" * (i % 13))])
    if i % 3 == 0:
        st.append(B, [d("b\u00e9" * (i % 5))])
st.create_session(F, created=3, parent=A, fork_seq=2500)
for i in range(0, 10000, 500):
    st.append(F, [d(f"f{i}-{k}") for k in range(500)])
st.put_snapshot(A, "withparts.v1/x", 100, b"snap-a")
st.put_snapshot(F, "withparts.v1/y", 3000, b"snap-f")
last = d("retry")
st.append(A, [last])
st.append(A, [last])  # a retry: nothing written
st.close()
'''


def write(tree: Path, url: str, keyed: bool) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", WRITER, url, "1" if keyed else "0"], cwd=tree,
                   env=env, check=True)


def same_dirs(a: Path, b: Path) -> list[str]:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    other = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    if names != other:
        return [f"file lists differ: {sorted(set(names) ^ set(other))}"]
    return [n for n in names if not filecmp.cmp(a / n, b / n, shallow=False)]


def rows(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return list(con.iterdump())
    finally:
        con.close()


PG_TABLES = ("convlog_meta", "convlog_sessions", "convlog_blocks", "convlog_log",
             "convlog_ids", "convlog_snapshots", "convlog_position", "convlog_pending")


def pg_schema(server_url: str, schema: str) -> str:
    """A fresh schema on the server and the store URL that writes into it."""
    import psycopg  # noqa: PLC0415 - only for --backends postgres

    with psycopg.connect(server_url, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        con.execute(f"CREATE SCHEMA {schema}")
    return f"{server_url}?options=-csearch_path%3D{schema}"


def pg_rows(server_url: str, schema: str) -> list[tuple[object, ...]]:
    """Every row of the store's tables, table by table, in the order of all columns."""
    import psycopg  # noqa: PLC0415

    out: list[tuple[object, ...]] = []
    with psycopg.connect(server_url, autocommit=True) as con:
        for table in PG_TABLES:
            cur = con.execute(f"SELECT * FROM {schema}.{table} LIMIT 0")
            width = len(cur.description or ())
            order = ", ".join(str(i + 1) for i in range(width))
            out += [(table, *row) for row in con.execute(
                f"SELECT * FROM {schema}.{table} ORDER BY {order}").fetchall()]
    return out


def pg_server(url: str | None) -> tuple[str, object]:
    """(server URL, the throwaway server to stop or None)."""
    if url:
        return url, None
    here = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(here))
    from tests.support.pgserver import PgServer, find_bin  # noqa: PLC0415

    bindir = find_bin()
    if bindir is None:
        raise SystemExit("no PostgreSQL server binaries (initdb, pg_ctl); give --pg-url")
    server = PgServer(bindir).start()
    return server.url(), server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the other checkout's root")
    parser.add_argument("--backends", default="jsonl,sqlite",
                        help="comma-separated: jsonl, sqlite, postgres")
    parser.add_argument("--pg-url", help="a running PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    backends = args.backends.split(",")
    failed = False
    server_url, server = pg_server(args.pg_url) if "postgres" in backends else ("", None)
    try:
        failed = compare(args.base.resolve(), here, backends, server_url)
    finally:
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
    return 1 if failed else 0


def compare(base: Path, here: Path, backends: list[str], server_url: str) -> bool:
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for keyed in (False, True):
            tag = " keyed" if keyed else ""
            for backend in backends:
                out = {}
                for name, tree in (("base", base), ("here", here)):
                    place = Path(tmp) / f"{name}-{backend}{int(keyed)}"
                    if backend == "postgres":
                        url = pg_schema(server_url, f"same_{name}_{int(keyed)}")
                    else:
                        url = (f"jsonl:///{place}" if backend == "jsonl"
                               else f"sqlite:///{place}.db")
                    write(tree, url, keyed)
                    out[name] = place
                if backend == "postgres":
                    a_rows = pg_rows(server_url, f"same_base_{int(keyed)}")
                    b_rows = pg_rows(server_url, f"same_here_{int(keyed)}")
                    wrong = [] if a_rows == b_rows else ["rows"]
                    print(f"postgres{tag}: rows {'identical' if not wrong else 'DIFFERENT'} "
                          f"({len(b_rows)} rows in {len(PG_TABLES)} tables)")
                elif backend == "jsonl":
                    wrong = same_dirs(out["base"], out["here"])
                    files = sum(1 for p in out["here"].rglob("*") if p.is_file())
                    print(f"jsonl{tag}: {'identical' if not wrong else 'DIFFERENT'} "
                          f"({files} files){'' if not wrong else ': ' + ', '.join(wrong)}")
                else:
                    a, b = Path(f"{out['base']}.db"), Path(f"{out['here']}.db")
                    wrong = [] if rows(a) == rows(b) else ["rows"]
                    raw = filecmp.cmp(a, b, shallow=False)
                    print(f"sqlite{tag}: rows {'identical' if not wrong else 'DIFFERENT'} "
                          f"({len(rows(b))} dump lines), file bytes "
                          f"{'identical' if raw else 'differ'}")
                failed = failed or bool(wrong)
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
