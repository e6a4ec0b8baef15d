"""Schema 3: sealed blocks (no per-event hashes, a block link each) and the range
indexes (``log`` ranges, ``ids`` runs, exact ``names`` rows) on SQLite, and sealed
blocks on PostgreSQL. Long sessions, so that tails are sealed, sealed again and
interleaved; then every kind of damage to the new rows is caught."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK, EXIT_UNREADABLE
from engine.errors import EventIdConflict
from engine.events import Event
from engine.session import Session, StepClock
from engine.store import blocks, open_store
from engine.store.base import Store
from engine.store.composed import ComposedStore
from engine.store.memory import MemoryStore
from engine.store.verify import verify
from tests.support.cli_run import run_cli, scratch_dir

DELTAS = 700  # past SEAL_AT several times over: sealed blocks, sealed again


def streamed(store: Store, deltas: int = DELTAS) -> tuple[str, str]:
    """A streamed answer interleaved with a second session, and a fork."""
    s = Session.create(store, clock=StepClock())
    o = Session.create(store, clock=StepClock())
    s.user_message("stream please")
    m = s.start_message("assistant")
    text = s.add_text(m)
    for i in range(deltas):
        s.text_delta(text, f"word{i} ")
        if i % 150 == 0:
            o.user_message(f"ping {i}")
    s.end_part(text)
    s.complete_message(m, finish="stop")
    fork = s.fork(at=min(300, s.version - 5))  # inside a sealed block
    fork.abort(m)
    return s.id, o.id


def _sqlite(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_a_streamed_session_is_few_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(f"sqlite:///{path}")
    streamed(store)
    store.close()
    db = _sqlite(path)
    kinds = [bytes(b)[:1] for (b,) in db.execute("SELECT body FROM blocks")]
    assert kinds.count(b"\x03") >= 1  # sealed, format 3
    # One range per stretch of one session between the other's appends (+ the fork).
    assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] <= 2 * (DELTAS // 150 + 2) + 2
    events = db.execute("SELECT SUM(count) FROM log").fetchone()[0]
    runs = db.execute("SELECT COUNT(*) FROM ids").fetchone()[0]
    assert runs < events / 50  # counting UUIDv7 ids make runs
    assert db.execute("SELECT COUNT(*) FROM names").fetchone()[0] == 0
    for body, in db.execute("SELECT body FROM blocks"):
        if blocks.is_sealed(bytes(body)):
            head = blocks.sealed_head(bytes(body))
            assert head.n <= blocks.BLOCK_MAX
    db.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_sealed_sessions_read_verify_and_continue(kind: str, request: pytest.FixtureRequest,
                                                  tmp_path: Path) -> None:
    url = (f"sqlite:///{tmp_path}/s.db" if kind == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = open_store(url)
    sid, other = streamed(store)
    mem = MemoryStore()
    sid_m, _ = streamed(mem)
    assert [e.delta for e in store.read(sid) if hasattr(e, "delta")] == \
        [e.delta for e in mem.read(sid_m) if hasattr(e, "delta")]
    assert store.version(sid) == mem.version(sid_m)
    assert [r.position for r in store.read_all()] == list(range(1, store.last_position() + 1))
    assert [r.event.seq for r in store.read_all(session_id=other)] == \
        list(range(1, store.version(other) + 1))
    # read_all from inside a range, with a limit
    middle = list(store.read_all(after=250, limit=40))
    assert [r.position for r in middle] == list(range(251, 291))
    deep, fast = verify(store), verify(store, deep=False)
    assert deep.ok, deep.problems
    assert fast.ok, fast.problems
    assert deep.heads == fast.heads
    assert deep.events == fast.events == store.last_position()
    # at(seq) inside a sealed block, and the chain hash there (recomputed inside)
    e300 = next(store.read(sid, 300, 300))
    assert e300.seq == 300
    assert isinstance(store, ComposedStore)
    h300 = store._hash_at(sid, 300)
    assert h300 is not None
    assert verify(store, anchored={sid: (300, h300)}, deep=False).ok
    bad = verify(store, anchored={sid: (300, bytes(16))}, deep=False)
    assert not bad.ok
    assert bad.problems[0].seq == 300
    # It goes on: more events, another seal, still sound.
    s = Session.open(store, sid)
    s.user_message("and more")
    assert verify(store).ok
    store.close()


def _rename(e: Event, event_id: str) -> Event:
    return msgspec.structs.replace(e, id=event_id, seq=0, session_id="")


def test_ids_runs_confirm_every_hit(tmp_path: Path) -> None:
    """A run stores only the low 64 bits of its ids: an id that shares them with a
    stored one is another id, gets an exact row, and retries still work."""
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    sid, _ = streamed(store, 200)
    stored = list(store.read(sid))
    for e in (stored[0], stored[100], stored[-1]):
        assert store.find_event(e.id) == (sid, e.seq)
    twin = stored[50].id
    lookalike = ("ffffffff" + twin[8:])  # other high bits, the same low 64
    assert store.find_event(lookalike) is None
    # Borrow a legal event shape from the memory copy: a user message of its own.
    side = Session.create(MemoryStore(), clock=StepClock())
    side.user_message("lookalike")
    fresh = list(side.store.read(side.id))
    target = Session.create(store, clock=StepClock()).id
    ids = [lookalike, "not-a-uuid-1", *[f"{twin[:24]}{i:012x}" for i in range(len(fresh) - 2)]]
    batch = [_rename(e, i) for e, i in zip(fresh, ids, strict=True)]
    first = store.append(target, batch)
    assert not first.retried
    assert store.find_event(lookalike) == (target, 1)
    assert store.find_event("not-a-uuid-1") == (target, 2)
    again = store.append(target, batch)  # an exact retry: the original seqs and positions
    assert again.retried
    assert again.positions == first.positions
    with pytest.raises(EventIdConflict):
        store.append(target, [msgspec.structs.replace(batch[0], actor="assistant")])
    assert verify(store).ok
    store.close()


# --------------------------------------------------------------------------- damage

@pytest.fixture(scope="module")
def pristine() -> Iterator[Path]:
    with scratch_dir("ranges") as root:
        path = root / "s.db"
        store = open_store(f"sqlite:///{path}")
        streamed(store)
        store.close()
        yield path


_COLUMNS = {
    "blocks": ["body", "first_seq", "last_seq"],
    "log": ["position", "sid", "seq", "count"],
    "ids": ["lo", "count", "position"],
}
DAMAGE = st.tuples(st.sampled_from(["blocks", "blocks", "log", "ids"]), st.integers(0, 1 << 20),
                   st.integers(0, 1 << 20), st.integers(0, 1 << 30), st.integers(0, 62))


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=DAMAGE)
def test_a_flipped_range_row_block_link_or_payload_is_caught(
        damage: tuple[str, int, int, int, int], pristine: Path, tmp_path_factory: Any) -> None:
    table, row_at, col_at, offset, bit = damage
    path = tmp_path_factory.mktemp("d") / "s.db"
    shutil.copy(pristine, path)
    db = _sqlite(path)
    column = _COLUMNS[table][col_at % len(_COLUMNS[table])]
    # Sealed blocks only: every byte of one is covered by its link (a tail block's
    # schema-version hint is not, and the older fuzz covers tail blocks).
    rows = db.execute(f"SELECT rowid, {column} FROM {table}" if table != "blocks" else
                      f"SELECT sid || ':' || last_seq, {column} FROM {table} "
                      "WHERE substr(body, 1, 1) = x'03'").fetchall()
    key, value = rows[row_at % len(rows)]
    if isinstance(value, bytes):
        flipped = bytearray(value)
        flipped[offset % len(flipped)] ^= 1 << (bit % 8)
        new: Any = bytes(flipped)
    else:
        new = value ^ (1 << (bit % 40))
    where = ("rowid=?" if table != "blocks" else "sid || ':' || last_seq = ?")
    try:
        db.execute(f"UPDATE {table} SET {column}=? WHERE {where}", (new, key))
    except sqlite3.IntegrityError:
        return  # the table refused it (a key taken): nothing was damaged
    finally:
        db.close()
    url = f"sqlite:///{path}"
    deep = run_cli(["verify", url])
    deep.assert_clean()
    assert deep.code in (EXIT_CORRUPT, EXIT_UNREADABLE), (damage, deep)
    if table != "ids":  # the chain walk does not read the id index (documented)
        fast = run_cli(["verify", url, "--fast"])
        fast.assert_clean()
        assert fast.code in (EXIT_CORRUPT, EXIT_UNREADABLE), (damage, fast)


def test_a_huge_count_in_the_id_index_is_reported_without_reading_that_many(
        pristine: Path, tmp_path: Path) -> None:
    """A flipped high bit of an id run's count (2**39 events) is damage named at once:
    deep verify used to build a list of that many positions first (found hanging a CI
    run through the property above)."""
    path = tmp_path / "s.db"
    shutil.copy(pristine, path)
    db = _sqlite(path)
    rowid, count = db.execute("SELECT rowid, count FROM ids ORDER BY rowid LIMIT 1").fetchone()
    db.execute("UPDATE ids SET count = ? WHERE rowid = ?", (count ^ (1 << 39), rowid))
    db.close()
    deep = run_cli(["verify", f"sqlite:///{path}"])
    deep.assert_clean()
    assert deep.code == EXIT_CORRUPT, deep
    assert "counts" in deep.out + deep.err, deep


def test_a_block_link_stops_a_forger_without_the_key(tmp_path: Path) -> None:
    """Editing a sealed block and re-chaining it without the key breaks its link."""
    key = b"0123456789abcdef-secret"
    path = tmp_path / "k.db"
    store = open_store(f"sqlite:///{path}", key=key)
    sid, _ = streamed(store, 300)
    store.close()
    db = _sqlite(path)
    last_seq, body = next((ls, bytes(b)) for ls, b in db.execute(
        "SELECT last_seq, body FROM blocks ORDER BY last_seq") if bytes(b)[:1] == b"\x03")
    head = blocks.sealed_head(body)
    events = [msgspec.msgpack.decode(r) for r in blocks.raw_events(body)]
    events[3]["delta"] = "forged "
    from engine.store.chain import GENESIS, Chain  # noqa: PLC0415
    forged = blocks.seal(Chain(None).link, sid, GENESIS, first=head.first,
                         canon=[msgspec.msgpack.encode(e) for e in events],
                         last_hash=head.last_hash, maxv=head.maxv)
    db.execute("UPDATE blocks SET body=? WHERE last_seq=?", (forged, last_seq))
    db.close()
    key_file = tmp_path / "key"
    key_file.write_bytes(key)
    for extra in ([], ["--fast"]):
        out = run_cli(["verify", f"sqlite:///{path}", "--key-file", str(key_file), *extra])
        assert out.code == EXIT_CORRUPT, out
        assert f"session {sid} seq {head.first}: block link mismatch" in out.err
    assert run_cli(["verify", f"sqlite:///{path}"]).code != EXIT_OK  # no key: not ok either


def test_a_postgresql_store_of_schema_1_is_marked_current_and_keeps_working(
        pg_url: str) -> None:
    """Schema 2 on PostgreSQL is the sealed block format 3: an older store is marked on
    open (its blocks stay as they are), so an older client refuses it. (Schema 3's
    change of tables is migrated by tests/store/test_postgres_migration.py.)"""
    import psycopg  # noqa: PLC0415 - optional extra

    from engine.store.postgres import SCHEMA_VERSION  # noqa: PLC0415

    store = open_store(pg_url)
    sid, _ = streamed(store, 200)
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE convlog_meta SET value='1' WHERE key='schema'")
    store = open_store(pg_url)
    assert verify(store).ok
    s = Session.open(store, sid)
    s.user_message("after the upgrade")
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT value FROM convlog_meta WHERE key='schema'").fetchone()
    assert row == (str(SCHEMA_VERSION),)
