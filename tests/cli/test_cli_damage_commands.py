"""Every reading command on damaged stores whose sessions span sealed blocks.

``tests/store/test_store_damage_fuzz.py`` damages small stores (one tail block, no
sealed block) and runs ``verify`` alone. Here the stores hold sealed packed blocks
(a session of 2,300 events and a fork taken inside its second block), the damage is
aimed at what the formats store (a SQLite row's column: the block BLOB, the ranges in
``log`` and ``ids``, ``names``, the session rows, ``meta``, snapshots; the bytes of
the type table and columns *inside* a sealed block's compressed payload, recompressed
so that zlib accepts them; any JSONL file, gzip members and headers included), and
every reading command runs on it. Each must:

- end with a documented exit code other than 1 (a bug), one readable first line on
  stderr, never a traceback;
- when the deep ``verify`` passes, print exactly what it printed before the damage
  (a read never presents a changed state as sound);
- agree with the deep check: ``verify --fast`` never fails what the deep one passes,
  and passes only what the deep one passes or what it does not look at (decoding,
  transitions and the id index, see ``verify --fast`` in docs/cli.md);
- on JSONL, change nothing on disk (reads never write).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK
from engine.errors import CorruptLog
from engine.session import Session, StepClock
from engine.store import open_store
from engine.store.blocks import SEAL_AT
from tests.support.cli_run import Outcome, fresh_copy, run_cli, scratch_dir
from tests.support.crash_child import _open_text

SEALED = 3  # first byte of a format 3 sealed block
PAYLOAD_AT = 1 + 16 + 16 + 16  # tag, link, (first seq, count, maxv, kind), last hash
# Not covered by the hash chain (see docs/stores.md, "What verify catches"): a changed
# creation time is shown as it is stored.
UNCHAINED = frozenset({("sessions", "created")})


def record(url: str) -> tuple[str, str]:
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        s.user_message("hello")
        mid = s.start_message("assistant")
        text = s.add_text(mid)
        for i in range(2300):
            s.text_delta(text, f"d{i} ")
        s.end_part(text)
        tool = s.add_tool(mid, "c1", "bash")
        s.start_tool(tool)
        s.complete_tool(tool, "ok")
        s.complete_message(mid)
        fork = s.fork(at=1500)
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
        "show at": ["show", url, "--session", sid, "--at", "700"],
        "sessions": ["sessions", url],
        "export": ["export", url, "--session", sid],
        "export events": ["export", url, "--session", sid, "--at", "1600", "--as", "events"],
        "tail": ["tail", url],
        "anchor": ["anchor", url],
        "diff": ["diff", url, "--session", sid, "10", "2000"],
    }


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with scratch_dir("damage-commands") as root:
        yield root


@pytest.fixture(scope="module")
def pristine(scratch: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, name in (("sqlite", "p.db"), ("jsonl", "pj")):
        path = scratch / "pristine" / name
        path.parent.mkdir(exist_ok=True)
        ids = record(_url(kind, path))
        before = {k: run_cli(argv) for k, argv in commands(_url(kind, path), *ids).items()}
        assert all(o.code == EXIT_OK for o in before.values()), before
        out[kind] = (path, ids, before)
    return out


def _url(kind: str, path: Path) -> str:
    return f"sqlite:///{path}" if kind == "sqlite" else f"jsonl:///{path}"


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
    """A sealed block whose payload is damaged *inside* the compression (the type
    table, the columns): zlib accepts it, only the block link and decoding can tell."""
    if not body or body[0] != SEALED:
        return None
    try:
        payload = zlib.decompress(body[PAYLOAD_AT:])
    except zlib.error:
        return None
    return body[:PAYLOAD_AT] + zlib.compress(_bytes_damage(payload, op, at, mask), 3)


TABLES = ("blocks", "blocks", "blocks", "log", "ids", "sessions", "meta", "names", "snapshots")
SQL_DAMAGE = st.tuples(st.sampled_from(TABLES), st.integers(0, 1 << 20), st.integers(0, 7),
                       st.sampled_from(["flip", "cut", "truncate", "insert", "inner"]),
                       st.integers(0, 1 << 30), st.integers(1, 255),
                       st.sampled_from([-1, 1, 2, -1000, 1 << 40]))


def damage_sqlite(db: Path, damage: tuple[str, int, int, str, int, int, int]) -> str | None:
    """Change one column of one row; the (table, column) changed, or None if nothing."""
    table, row_at, col_at, op, at, mask, delta = damage
    con = sqlite3.connect(db, isolation_level=None)
    try:
        cur = con.execute(f"SELECT * FROM {table}")
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
        if not rows:
            return None
        row = rows[row_at % len(rows)]
        col = cols[col_at % len(cols)]
        value = row[cols.index(col)]
        new: Any
        if isinstance(value, bytes):
            new = (_inner(value, "flip" if op == "inner" else op, at, mask) if op == "inner"
                   or (table == "blocks" and col == "body" and at % 3 == 0) else None)
            new = new if new is not None else _bytes_damage(value, op, at, mask)
        elif isinstance(value, str):
            new = _bytes_damage(value.encode(), op, at, mask).decode("utf-8", "replace")
        elif isinstance(value, int):
            new = value + delta
        else:
            new = delta
        if new == value:
            return None
        where = " AND ".join(f"{c} IS ?" for c in cols)
        try:
            con.execute(f"UPDATE {table} SET {col}=? WHERE {where}",
                        (new, *row))
        except sqlite3.IntegrityError:  # the change would break a key: not stored
            return None
        return f"{table}.{col}"
    finally:
        con.close()


FILE_DAMAGE = st.tuples(st.integers(0, 1 << 20),
                        st.sampled_from(["flip", "flip", "cut", "truncate", "insert"]),
                        st.integers(0, 1 << 30), st.integers(1, 255))


def damage_jsonl(root: Path, damage: tuple[int, str, int, int]) -> str:
    which, op, at, mask = damage
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "lock")
    # The sealed members are what this test adds to the older fuzz: drawn twice as often.
    files += [p for p in files if p.suffix == ".blocks"]
    path = files[which % len(files)]
    path.write_bytes(_bytes_damage(path.read_bytes(), op, at, mask))
    return path.name


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != "lock"}


def check(kind: str, path: Path, pristine: dict[str, Any], *, chained: bool = True) -> None:
    _, ids, before = pristine[kind]
    disk = _snapshot(path) if kind == "jsonl" else {}
    outcomes: dict[str, Outcome] = {}
    for name, argv in commands(_url(kind, path), *ids).items():
        outcome = outcomes[name] = run_cli(argv)
        outcome.assert_clean()  # documented, not 1, no traceback, a readable first line
    deep, fast = outcomes["verify"], outcomes["verify --fast"]
    # Both judge the log (0 or 4), or both found no store to judge (the same code).
    assert {deep.code, fast.code} <= {EXIT_OK, EXIT_CORRUPT} or deep.code == fast.code, \
        (deep, fast)
    if deep.code == EXIT_OK:
        assert fast.code == EXIT_OK, fast  # the chain walk never fails a sound log
        if chained:
            for name, outcome in outcomes.items():
                if outcome.code == EXIT_OK and name != "verify --fast":
                    assert outcome.out == before[name].out, (name, outcome.err)
    if fast.code == EXIT_CORRUPT:
        assert deep.code == EXIT_CORRUPT, deep
    if kind == "jsonl":
        assert _snapshot(path) == disk  # reads never write


FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(damage=SQL_DAMAGE)
def test_every_command_on_a_damaged_sqlite_row(
        damage: tuple[str, int, int, str, int, int, int], pristine: dict[str, Any],
        scratch: Path) -> None:
    db = fresh_copy(pristine["sqlite"][0], scratch / "damaged")
    changed = damage_sqlite(db, damage)
    if changed is None:
        return
    table, col = changed.split(".")
    check("sqlite", db, pristine, chained=(table, col) not in UNCHAINED)


@FUZZ
@given(damage=FILE_DAMAGE)
def test_every_command_on_a_damaged_jsonl_file(
        damage: tuple[int, str, int, int], pristine: dict[str, Any], scratch: Path) -> None:
    root = fresh_copy(pristine["jsonl"][0], scratch / "damaged")
    metas = {p: p.read_bytes() for p in root.rglob("*.meta.json")}
    damage_jsonl(root, damage)
    check("jsonl", root, pristine, chained=not any(
        _only_created_differs(before, p.read_bytes()) for p, before in metas.items()))


def _only_created_differs(before: bytes, after: bytes) -> bool:
    """Whether a session meta file's damage changed its ``created`` time alone, which
    the chain does not cover (as UNCHAINED says for SQLite): it orders the sessions."""
    try:
        old, new = json.loads(before), json.loads(after)
    except ValueError:
        return False
    return (isinstance(new, dict) and old.get("created") != new.get("created")
            and {**old, "created": None} == {**new, "created": None})


@pytest.mark.parametrize("delta", [-1, -1000])
def test_a_session_row_behind_its_blocks_fails_verify(
        delta: int, pristine: dict[str, Any], scratch: Path) -> None:
    """Found by the fuzz above: a SQLite session row whose version was lowered hid the
    events after it from every read, and both verify depths said ok."""
    db = fresh_copy(pristine["sqlite"][0], scratch / "damaged")
    sid = pristine["sqlite"][1][0]
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("UPDATE sessions SET version=version+? WHERE id=?", (delta, sid))
    con.close()
    for argv in (["verify", str(db)], ["verify", str(db), "--fast"]):
        outcome = run_cli(argv)
        assert outcome.code == EXIT_CORRUPT, outcome
        assert "the events after it are hidden from reads" in outcome.err, outcome


def test_a_block_moved_to_another_session_is_exit_4_not_a_bug(
        pristine: dict[str, Any], scratch: Path) -> None:
    """Found by the fuzz above: a block moved to another session's key made ``show`` fail
    with a KeyError and ``tail`` with an IndexError (exit 1, "a bug"), or ``tail`` call
    it a usage error (exit 2); verify finds the damage, so each is exit 4."""
    src = pristine["sqlite"][0]
    sid, fid = pristine["sqlite"][1]
    con = sqlite3.connect(src)
    key, other = (con.execute("SELECT sid FROM sessions WHERE id=?", (s,)).fetchone()[0]
                  for s in (sid, fid))
    rows = [r[0] for r in con.execute("SELECT last_seq FROM blocks WHERE sid=?", (key,))]
    con.close()
    codes: set[int] = set()
    for last_seq in rows:
        db = fresh_copy(src, scratch / "damaged")
        con = sqlite3.connect(db, isolation_level=None)
        con.execute("UPDATE OR IGNORE blocks SET sid=? WHERE sid=? AND last_seq=?",
                    (other, key, last_seq))
        con.close()
        for argv in (["show", str(db), "--session", sid], ["tail", str(db)]):
            outcome = run_cli(argv)
            outcome.assert_clean()
            assert outcome.code in (EXIT_OK, EXIT_CORRUPT), outcome
            codes.add(outcome.code)
    assert EXIT_CORRUPT in codes


@pytest.mark.parametrize("delta", [-1, 1, 5, -1000, 1 << 40])
@pytest.mark.parametrize("fork", [False, True])
def test_a_damaged_seal_mark_is_caught_before_it_damages_the_log(
        delta: int, fork: bool, pristine: dict[str, Any], scratch: Path) -> None:
    """Found by probing the session rows: ``sessions.sealed`` (where the next merge into
    sealed blocks starts) was checked by nothing, so verify passed and the next appends
    merged the wrong rows: blocks over the parent's seqs, duplicate seqs, a ValueError.
    Now verify names it, and an append that would merge refuses (CorruptLog) instead."""
    db = fresh_copy(pristine["sqlite"][0], scratch / "damaged")
    sid = pristine["sqlite"][1][1 if fork else 0]
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("UPDATE sessions SET sealed=sealed+? WHERE id=?", (delta, sid))
    con.close()
    outcome = run_cli(["verify", str(db)])
    assert outcome.code == EXIT_CORRUPT, outcome
    assert "seal mark" in outcome.err, outcome
    store = open_store(f"sqlite:///{db}")
    try:
        s = Session.open(store, sid)
        with contextlib.suppress(CorruptLog):
            text = _open_text(s)
            for _ in range(2 * SEAL_AT):  # enough to reach a merge
                s.text_delta(text, "more ")
    finally:
        store.close()
    after = run_cli(["verify", str(db)])
    # Only the mark is wrong: every event still chains (the first problem is the mark).
    assert after.code == EXIT_CORRUPT, after
    assert "seal mark" in after.err.splitlines()[0], after


@pytest.mark.parametrize("edit", [
    lambda m: {**m, "genesis": m["genesis"][:13]},
    lambda m: {**m, "genesis": "zz" + m["genesis"][2:]},
    lambda m: {**m, "id": m["id"][:-1] + ("0" if m["id"][-1] != "0" else "1")},
])
def test_a_damaged_jsonl_meta_file_is_exit_4_for_readers_and_writers(
        edit: Any, pristine: dict[str, Any], scratch: Path) -> None:
    """Found by the fuzz above: a meta file whose chain start was no hash made reads
    fail with ValueError (exit 1); appends too."""
    root = fresh_copy(pristine["jsonl"][0], scratch / "damaged")
    sid, fid = pristine["jsonl"][1]
    meta = root / "sessions" / f"{fid}.meta.json"
    meta.write_text(json.dumps(edit(json.loads(meta.read_text()))))
    url = _url("jsonl", root)
    started = {"type": "message.started", "role": "user",
               "message_id": "0190a000-0000-7000-8000-00000000f001"}
    runs = [run_cli(argv) for argv in commands(url, sid, fid).values()]
    runs.append(run_cli(["append", url, "--session", fid],
                        stdin=(json.dumps(started) + "\n").encode()))
    for outcome in runs:
        outcome.assert_clean()
    assert runs[0].code == EXIT_CORRUPT, runs[0]  # verify
    assert runs[-1].code == EXIT_CORRUPT, runs[-1]  # append


def test_a_dropped_block_is_exit_4_for_every_reader_never_the_next_blocks_events(
        pristine: dict[str, Any], scratch: Path) -> None:
    """Found by the PostgreSQL damage tests (tests/store/test_postgres_damage.py): with
    a block row gone, ``tail`` printed the next block's events at the missing
    positions (read_all indexed the block it got by seq minus that block's first seq:
    a negative index), exit 0. Each block of the session, dropped in turn."""
    src = pristine["sqlite"][0]
    sid = pristine["sqlite"][1][0]
    con = sqlite3.connect(src)
    key = con.execute("SELECT sid FROM sessions WHERE id=?", (sid,)).fetchone()[0]
    rows = [r[0] for r in con.execute("SELECT last_seq FROM blocks WHERE sid=? "
                                      "ORDER BY last_seq", (key,))]
    con.close()
    for last_seq in rows[:-1]:  # not the last: that is a cut tail, which reads end before
        db = fresh_copy(src, scratch / "damaged")
        con = sqlite3.connect(db, isolation_level=None)
        con.execute("DELETE FROM blocks WHERE sid=? AND last_seq=?", (key, last_seq))
        con.close()
        url = _url("sqlite", db)
        for argv in (["tail", url], ["tail", url, "--session", sid],
                     ["tail", url, "--follow", "--idle-timeout", "0.01"],
                     ["show", url, "--session", sid], ["export", url, "--session", sid]):
            outcome = run_cli(argv)
            outcome.assert_clean()
            assert outcome.code == EXIT_CORRUPT, (last_seq, argv, outcome)
