"""Damaged PostgreSQL rows, as the SQLite damage tests damage SQLite's.

A store on the throwaway cluster holds sealed packed blocks, an uncompressed tail and
a fork taken inside a sealed block. Each test copies it into a fresh schema, changes
its rows the way a failing disk, a bad restore or a hand edit would (a block body
flipped, cut or damaged inside its compression; a block row dropped in the middle;
the seal mark or the session head moved; a position or an id row dropped; any column
of any row, drawn), and checks what SQLite's tests check:

- ``verify`` reports the damage as a problem, never an exception;
- reads raise the store's typed error (:class:`CorruptLog`) instead of returning
  wrong events or folding past a hole;
- ``convlog verify/show/export`` on the ``postgresql://`` URL end with a documented
  code (4 for damage), one readable first line and no traceback; when the deep
  verify passes, every command prints what it printed before the damage.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import zlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE
from engine.errors import CorruptLog, StoreError
from engine.session import Session, StepClock
from engine.store import open_store
from engine.store.blocks import SEAL_AT
from engine.store.verify import verify
from tests.support.cli_run import Outcome, run_cli
from tests.support.crash_child import _open_text
from tests.support.pgserver import PgServer

SEALED = 3  # first byte of a format 3 sealed block
PAYLOAD_AT = 1 + 16 + 16 + 16  # tag, link, (first seq, count, maxv, kind), last hash
TABLES = ("convlog_meta", "convlog_sessions", "convlog_blocks", "convlog_log", "convlog_ids",
          "convlog_snapshots", "convlog_position")
# Not covered by the hash chain (docs/stores.md, "What verify catches"): a changed
# creation time is shown as it is stored.
UNCHAINED = frozenset({("convlog_sessions", "created")})
_SCHEMAS = itertools.count(1)


def record(url: str) -> tuple[str, str]:
    """A session of 612 events (four sealed blocks and a tail of one-event blocks) and
    a fork taken inside its third sealed block."""
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        s.user_message("hello")
        mid = s.start_message("assistant")
        text = s.add_text(mid)
        for i in range(600):
            s.text_delta(text, f"d{i} ")
        s.end_part(text)
        s.complete_message(mid)
        fork = s.fork(at=300)
        fork.user_message("another path")
        s.user_message("again")
        return s.id, fork.id
    finally:
        store.close()


def commands(url: str, sid: str, fid: str) -> dict[str, list[str]]:
    return {
        "verify": ["verify", url],
        "verify --fast": ["verify", url, "--fast"],
        "show": ["show", url, "--session", sid],
        "show events": ["show", url, "--session", fid, "--as", "events", "--json"],
        "show at": ["show", url, "--session", sid, "--at", "200"],
        "sessions": ["sessions", url],
        "export": ["export", url, "--session", sid],
        "tail": ["tail", url],
        "tail --follow": ["tail", url, "--follow", "--idle-timeout", "0.01"],
    }


def _schema_url(server: PgServer, schema: str) -> str:
    return f"{server.url()}?options=-csearch_path%3D{schema}"


class Pristine:
    """The recorded store, its ids and every command's output on it; ``copy`` makes a
    fresh schema holding the same rows (the store's own functions created on open)."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.schema = f"pristine_{os.getpid()}"
        with psycopg.connect(server.url(), autocommit=True) as db:
            db.execute(f"CREATE SCHEMA {self.schema}")
        self.url = _schema_url(server, self.schema)
        self.sid, self.fid = record(self.url)
        self.before = {k: run_cli(argv) for k, argv in self.commands(self.url).items()}
        assert all(o.code == EXIT_OK for o in self.before.values()), self.before

    def commands(self, url: str) -> dict[str, list[str]]:
        return commands(url, self.sid, self.fid)

    def copy(self) -> tuple[str, psycopg.Connection[Any]]:
        schema = f"damaged_{os.getpid()}_{next(_SCHEMAS)}"
        url = _schema_url(self.server, schema)
        db = psycopg.connect(url, autocommit=True)
        db.execute(f"CREATE SCHEMA {schema}")
        open_store(url).close()  # tables, sequences and functions, as a store makes them
        with db.transaction():
            for table in TABLES:
                db.execute(f"DELETE FROM {schema}.{table}")
                db.execute(f"INSERT INTO {schema}.{table} SELECT * FROM {self.schema}.{table}")
            db.execute(f"SELECT setval('{schema}.convlog_sessions_sid_seq', "
                       f"(SELECT max(sid) FROM {schema}.convlog_sessions))")
        return url, db

    def key(self, db: psycopg.Connection[Any], session_id: str) -> int:
        row = db.execute("SELECT sid FROM convlog_sessions WHERE id=%s", (session_id,)).fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture(scope="module")
def pristine(pg_server: object) -> Pristine:
    assert isinstance(pg_server, PgServer)
    return Pristine(pg_server)


@pytest.fixture
def damaged(pristine: Pristine) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
    url, db = pristine.copy()
    try:
        yield url, db
    finally:
        db.close()


def _bytes_damage(data: bytes, op: str, at: int, mask: int) -> bytes:
    b = bytearray(data)
    i = at % (len(b) + 1)
    if op == "flip" and b:
        b[i % len(b)] ^= mask
    elif op == "cut":
        del b[i:i + 1 + mask % 40]
    elif op == "truncate":
        del b[i:]
    else:
        b[i:i] = bytes([mask]) * (1 + mask % 4)
    return bytes(b)


def _inner(body: bytes, op: str, at: int, mask: int) -> bytes | None:
    """A sealed block damaged *inside* its compression: zlib accepts it, only the block
    link and decoding can tell."""
    if not body or body[0] != SEALED:
        return None
    try:
        payload = zlib.decompress(body[PAYLOAD_AT:])
    except zlib.error:
        return None
    return body[:PAYLOAD_AT] + zlib.compress(_bytes_damage(payload, op, at, mask), 3)


def _run_all(pristine: Pristine, url: str) -> dict[str, Outcome]:
    outcomes = {name: run_cli(argv) for name, argv in pristine.commands(url).items()}
    for outcome in outcomes.values():
        outcome.assert_clean()  # documented, not 1, no traceback, a readable first line
    return outcomes


def _check(pristine: Pristine, url: str, *, chained: bool = True) -> dict[str, Outcome]:
    """What the SQLite fuzz checks (tests/cli/test_cli_damage_commands.py)."""
    outcomes = _run_all(pristine, url)
    deep, fast = outcomes["verify"], outcomes["verify --fast"]
    assert {deep.code, fast.code} <= {EXIT_OK, EXIT_CORRUPT} or deep.code == fast.code, \
        (deep, fast)
    if deep.code == EXIT_OK:
        assert fast.code == EXIT_OK, fast  # the chain walk never fails a sound log
        if chained:
            for name, outcome in outcomes.items():
                if outcome.code == EXIT_OK and name != "verify --fast":
                    assert outcome.out == pristine.before[name].out, (name, outcome.err)
    if fast.code == EXIT_CORRUPT:
        assert deep.code == EXIT_CORRUPT, deep
    return outcomes


def _assert_found(pristine: Pristine, url: str, *, reads: bool, words: str = "") -> None:
    """verify (API and CLI) reports a problem; with ``reads``, the session's reads
    raise CorruptLog and show/export exit 4 with one line."""
    store = open_store(url, create=False)
    try:
        report = verify(store)
        assert not report.ok, report
        assert words in str(report.first), report.first
        if reads:
            with pytest.raises(CorruptLog):
                list(store.read(pristine.sid))
    finally:
        store.close()
    outcomes = _check(pristine, url)
    assert outcomes["verify"].code == EXIT_CORRUPT, outcomes["verify"]
    assert words in outcomes["verify"].err, outcomes["verify"]
    if reads:
        for name in ("show", "export", "tail", "tail --follow"):
            assert outcomes[name].code == EXIT_CORRUPT, (name, outcomes[name])
            assert len(outcomes[name].err.splitlines()) == 1, (name, outcomes[name])


PG_FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])

BLOCK_DAMAGE = st.tuples(st.integers(0, 1 << 20),
                         st.sampled_from(["flip", "cut", "truncate", "insert", "inner"]),
                         st.integers(0, 1 << 30), st.integers(1, 255))


@PG_FUZZ
@given(damage=BLOCK_DAMAGE)
def test_a_damaged_block_body_is_found_or_reads_as_before(
        damage: tuple[int, str, int, int], pristine: Pristine) -> None:
    """A drawn block's body flipped, cut, truncated, grown or damaged inside its
    compression: verify fails at it, or (the damage changed a byte that means
    nothing to a read, such as a tail block's schema bound) every command prints what
    it printed before."""
    which, op, at, mask = damage
    url, db = pristine.copy()
    try:
        rows = db.execute("SELECT sid, last_seq, body FROM convlog_blocks "
                          "ORDER BY sid, last_seq").fetchall()
        key, last_seq, body = rows[which % len(rows)]
        body = bytes(body)
        new = _inner(body, "flip", at, mask) if op == "inner" else None
        new = new if new is not None else _bytes_damage(body, op, at, mask)
        if new == body:
            return
        db.execute("UPDATE convlog_blocks SET body=%s WHERE sid=%s AND last_seq=%s",
                   (new, key, last_seq))
    finally:
        db.close()
    _check(pristine, url)


# The block rows are drawn more often: they hold the events.
ROW_DAMAGE = st.tuples(st.sampled_from((*TABLES, "convlog_blocks", "convlog_blocks")),
                       st.integers(0, 1 << 20), st.integers(0, 7),
                       st.sampled_from(["flip", "cut", "truncate", "insert", "inner"]),
                       st.integers(0, 1 << 30), st.integers(1, 255),
                       st.sampled_from([-1, 1, 2, -1000, 1 << 20]))


@PG_FUZZ
@given(damage=ROW_DAMAGE)
def test_every_command_on_a_damaged_postgres_row(
        damage: tuple[str, int, int, str, int, int, int], pristine: Pristine) -> None:
    """One column of one drawn row changed (as the SQLite fuzz does): every command
    ends cleanly, and what passes the deep verify reads as it read before."""
    table, row_at, col_at, op, at, mask, delta = damage
    url, db = pristine.copy()
    try:
        cur = db.execute(f"SELECT ctid, * FROM {table}")
        cols = [d.name for d in (cur.description or ())][1:]
        rows = cur.fetchall()
        if not rows:
            return
        ctid, *row = rows[row_at % len(rows)]
        col = cols[col_at % len(cols)]
        value = row[cols.index(col)]
        new: Any
        if isinstance(value, (bytes, memoryview)):
            value = bytes(value)
            new = _inner(value, "flip", at, mask) if op == "inner" else None
            new = new if new is not None else _bytes_damage(value, op, at, mask)
        elif isinstance(value, bool):
            new = not value
        elif isinstance(value, str):
            new = _bytes_damage(value.encode(), op, at, mask).decode("utf-8", "replace")
            new = new.replace("\x00", "")  # PostgreSQL text holds no NUL
        elif isinstance(value, int):
            new = value + delta
        else:
            new = delta
        if new == value:
            return
        try:
            db.execute(f"UPDATE {table} SET {col}=%s WHERE ctid=%s", (new, ctid))
        except (psycopg.errors.IntegrityError, psycopg.errors.DataError):
            return  # the change would break a key or a type: not stored
    finally:
        db.close()
    _check(pristine, url, chained=(table, col) not in UNCHAINED)


def test_a_dropped_block_in_the_middle_is_found_and_never_folded_past(
        pristine: Pristine) -> None:
    """Each sealed block and one tail block removed in turn: verify names the missing
    seq, reads raise CorruptLog (they never skip to the next block)."""
    url, db = pristine.copy()
    key = pristine.key(db, pristine.sid)
    lasts = [int(r[0]) for r in db.execute(
        "SELECT last_seq FROM convlog_blocks WHERE sid=%s ORDER BY last_seq", (key,))]
    db.close()
    sealed = [last for last in lasts if last <= 512]
    for last_seq in [*sealed[:-1], lasts[len(lasts) // 2]]:  # not the last: that is a cut tail
        url, db = pristine.copy()
        db.execute("DELETE FROM convlog_blocks WHERE sid=%s AND last_seq=%s", (key, last_seq))
        db.close()
        _assert_found(pristine, url, reads=True, words="missing")


@pytest.mark.parametrize("delta", [-1, -1000])
def test_a_session_row_behind_its_blocks_fails_verify(
        delta: int, pristine: Pristine, damaged: tuple[str, Any]) -> None:
    """The session head lowered: reads stop there and hide the later events, so verify
    must call it damage (as SQLite's does)."""
    url, db = damaged
    db.execute("UPDATE convlog_sessions SET version=version+%s WHERE id=%s",
               (delta, pristine.sid))
    for argv in (["verify", url], ["verify", url, "--fast"]):
        outcome = run_cli(argv)
        assert outcome.code == EXIT_CORRUPT, outcome
        assert "the events after it are hidden from reads" in outcome.err, outcome


def test_a_session_head_ahead_of_its_blocks_is_a_cut_tail(
        pristine: Pristine, damaged: tuple[str, Any]) -> None:
    url, db = damaged
    db.execute("UPDATE convlog_sessions SET version=version+3 WHERE id=%s", (pristine.sid,))
    _assert_found(pristine, url, reads=False, words="the tail was cut")


@pytest.mark.parametrize("table", ["convlog_log", "convlog_ids"])
def test_a_dropped_position_or_id_row_is_found(
        table: str, pristine: Pristine, damaged: tuple[str, Any]) -> None:
    url, db = damaged
    key = pristine.key(db, pristine.sid)
    db.execute(f"DELETE FROM {table} WHERE sid=%s AND seq=200", (key,))
    _assert_found(pristine, url, reads=False)


@pytest.mark.parametrize("delta", [-1, 1, 5, -1000, 1 << 20])
@pytest.mark.parametrize("fork", [False, True])
def test_a_damaged_seal_mark_is_caught_before_it_damages_the_log(
        delta: int, fork: bool, pristine: Pristine, damaged: tuple[str, Any]) -> None:
    """``convlog_sessions.sealed`` (where the next merge into sealed blocks starts),
    moved: verify names it, and appends up to a merge either refuse (a typed store
    error) or leave a log whose only problem is still the mark."""
    url, db = damaged
    sid = pristine.fid if fork else pristine.sid
    db.execute("UPDATE convlog_sessions SET sealed=sealed+%s WHERE id=%s", (delta, sid))
    outcome = run_cli(["verify", url])
    assert outcome.code == EXIT_CORRUPT, outcome
    assert "seal mark" in outcome.err, outcome
    store = open_store(url)
    try:
        s = Session.open(store, sid)
        with contextlib.suppress(StoreError):
            text = _open_text(s)
            for _ in range(2 * SEAL_AT):  # enough to reach a merge
                s.text_delta(text, "more ")
    finally:
        store.close()
    after = run_cli(["verify", url])
    assert after.code == EXIT_CORRUPT, after
    assert "seal mark" in after.err.splitlines()[0], after


def test_a_position_counter_behind_the_log_is_found_and_refuses_appends(
        pristine: Pristine, damaged: tuple[str, Any]) -> None:
    """``convlog_position.last`` is where the next placement starts. Lowered, verify
    said ok (it only looked for a counter ahead of the log), and the next append
    collided with a stored position and was reported as "id index conflict"."""
    url, db = damaged
    db.execute("UPDATE convlog_position SET last = 5")
    outcome = run_cli(["verify", url])
    assert outcome.code == EXIT_CORRUPT, outcome
    assert "the next append would reuse a position" in outcome.err, outcome
    store = open_store(url)
    try:
        with pytest.raises(CorruptLog, match="position counter"):
            Session.open(store, pristine.sid).user_message("more")
    finally:
        store.close()
    assert run_cli(["verify", url]).err == outcome.err  # nothing was written


def _client_connections(server: PgServer) -> int:
    with psycopg.connect(server.url(), autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_stat_activity "
                         "WHERE backend_type = 'client backend'").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("damage", [
    "DELETE FROM convlog_meta WHERE key = 'chain'",
    "UPDATE convlog_meta SET value = 'x' WHERE key = 'schema'",
    "UPDATE convlog_meta SET value = '99' WHERE key = 'schema'",
])
def test_a_damaged_meta_table_fails_the_open_cleanly_and_leaks_no_connection(
        damage: str, pristine: Pristine, damaged: tuple[str, Any]) -> None:
    """A meta table without its chain row ran the creation DDL and failed on a
    duplicate key (exit 2); a schema that is no number was a ValueError; and every
    failed open left its connection open until garbage collection (a damage fuzz of
    a few hundred runs met "too many clients")."""
    url, db = damaged
    db.execute(damage)
    outcomes = _run_all(pristine, url)
    assert {o.code for o in outcomes.values()} <= {EXIT_UNREADABLE, EXIT_USAGE}, outcomes
    if "99" not in damage:  # a newer schema is not damage: its own message, exit 2
        assert {o.code for o in outcomes.values()} == {EXIT_UNREADABLE}, outcomes
    else:
        assert {o.code for o in outcomes.values()} == {EXIT_USAGE}, outcomes
        assert all("has schema 99, newer than" in o.err for o in outcomes.values()), outcomes
    gc.disable()  # connections must be closed by the failed open, not by the collector
    try:
        before = _client_connections(pristine.server)
        for _ in range(5):
            with pytest.raises(StoreError):
                open_store(url, create=False)
        assert _client_connections(pristine.server) == before
    finally:
        gc.enable()
