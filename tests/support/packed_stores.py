"""Shared by the tests of stores written by older releases (tests/fixtures/packed-v*-stores):
the events a fixture must read back as, and which packed payload formats its sealed
blocks hold."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from engine import codec
from engine.events import AnyEvent
from engine.store import Store, blocks, jsonl_blocks
from projections.bulk import read_bulk
from projections.withparts import WithPartsProjection
from tests.support.runs_check import assert_runs_join


def fixture_events(fixture: Path, name: str) -> list[list[AnyEvent]]:
    """The old release's reads of the root session and of its fork (a fork's read holds
    its parent's events up to the fork seq), one after the other in the file."""
    events = codec.decode_json_list(gzip.decompress((fixture / f"{name}-events.json.gz")
                                                    .read_bytes()))
    cut = next(i for i, e in enumerate(events) if i and e.seq == 1)
    return [events[:cut], events[cut:]]


def _packed_formats(bodies: list[bytes]) -> set[int]:
    return {blocks._payload(b)[0] for b in bodies
            if blocks.is_sealed(b) and blocks.sealed_head(b).kind == blocks.KIND_PACKED}


def sqlite_payload_formats(path: Path) -> set[int]:
    with sqlite3.connect(path) as db:
        bodies = [bytes(b) for (b,) in db.execute("SELECT body FROM blocks")]
    db.close()
    return _packed_formats(bodies)


def pg_payload_formats(url: str) -> set[int]:
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url) as db:
        bodies = [bytes(b) for (b,) in db.execute("SELECT body FROM convlog_blocks",
                                                  binary=True)]
    return _packed_formats(bodies)


def jsonl_payload_formats(root: Path) -> set[int]:
    found: set[int] = set()
    for path in (root / "sessions").glob("*.blocks"):
        data = path.read_bytes()
        meta = json.loads(path.with_suffix(".meta.json").read_bytes())
        refs, bad = jsonl_blocks.scan(data, 0, (meta.get("fork_seq") or 0) + 1)
        assert bad is None
        for ref in refs:
            member = data[ref.offset:ref.offset + ref.length]
            found.add(json.loads(jsonl_blocks.payload(member))["format"])
    return found


def enc(events: list[AnyEvent]) -> list[bytes]:
    return [msgspec.json.encode(e) for e in events]


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or the file itself), by relative path, with its bytes;
    but a JSONL store's ``lock``, the empty file that every opener may create to lock."""
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not (p.name == "lock" and not p.stat().st_size)}


def pg_rows(url: str) -> dict[str, list[Any]]:
    """Every convlog table's rows, in order: what a read must leave as it was."""
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url) as db:
        tables = [t for (t,) in db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_name LIKE 'convlog%' ORDER BY 1")]
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2", binary=True).fetchall()
                for t in tables}


def store_number(url: str) -> int:
    """The schema (SQLite, PostgreSQL) or format (JSONL) number a store says it has,
    read without opening it as a store."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(f"file:{url[len('sqlite:///'):]}?mode=ro", uri=True) as db:
            (value,) = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        db.close()
        return int(value)
    if url.startswith("jsonl:///"):
        meta = json.loads((Path(url[len("jsonl:///"):]) / "convlog.json").read_bytes())
        return int(meta["version"])
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url) as pg:
        row = pg.execute("SELECT value FROM convlog_meta WHERE key='schema'").fetchone()
    assert row is not None
    return int(row[0])


def check_reads(store: Store, fixture: Path, kind: str) -> dict[str, list[AnyEvent]]:
    """Every read of an old release's store (a root session and its fork) gives the
    events that release wrote: whole, in bulk runs, replayed, a range, an id lookup.
    Returns them by session."""
    root_id = next(i.id for i in store.sessions() if i.parent is None)
    fork_id = next(i.id for i in store.sessions() if i.parent == root_id)
    want = dict(zip((root_id, fork_id), fixture_events(fixture, kind), strict=True))
    for sid, events in want.items():
        assert len(events) > blocks.BLOCK_MAX + 900
        assert enc(list(store.read(sid))) == enc(events)
        assert_runs_join(list(read_bulk(store, sid)), events)
        assert_runs_join(list(read_bulk(store, sid, ids=False)), events, ids=False)
        live = WithPartsProjection(sid)
        live.apply_all(events)
        assert WithPartsProjection.replay(store, sid).messages() == live.messages()
        middle = events[len(events) // 2].seq
        assert enc(list(store.read(sid, middle, middle + 700))) == enc(
            events[middle - 1:middle + 700])
        assert store.find_event(events[-1].id) == (sid, events[-1].seq)
    return want
