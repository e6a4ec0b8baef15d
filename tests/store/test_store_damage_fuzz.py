"""Damage fuzz: random byte flips, truncations and swapped lines/rows in a store's files
or rows. ``convlog verify`` must answer every one with a documented exit code and one
readable line (4 with the first bad seq, 5 when the files cannot be read as a store,
0 only when the damage touched no stored data), never a traceback, and must change
nothing on disk."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_CORRUPT, EXIT_OK, EXIT_UNREADABLE
from engine.session import Session, StepClock
from engine.store import open_store
from tests.support.cli_run import Outcome, fresh_copy, run_cli, scratch_dir

TALLY: Counter[tuple[str, str, int]] = Counter()
TRIALS = 150


def record(url: str) -> None:
    """Two sessions, one a fork, a few dozen events."""
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        s.user_message("hello there")
        mid = s.start_message("assistant")
        text = s.add_text(mid)
        for chunk in ("The ", "answer ", "is ", "forty", "-two", ". ", "Ünïcødé ✓"):
            s.text_delta(text, chunk)
        s.end_part(text)
        tool = s.add_tool(mid, "c1", "bash")
        s.start_tool(tool)
        s.complete_tool(tool, "ok")
        s.complete_message(mid)
        fork = s.fork(at=6)
        fork.user_message("another path")
    finally:
        store.close()


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with scratch_dir("damage-fuzz") as root:
        yield root


@pytest.fixture(scope="module")
def pristine(scratch: Path) -> dict[str, Path]:
    root = scratch / "pristine"
    root.mkdir()
    record(f"sqlite:///{root}/s.db")
    record(f"jsonl:///{root}/log")
    return {"sqlite": root / "s.db", "jsonl": root / "log"}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    for (kind, damage, code), n in sorted(TALLY.items()):
        print(f"damage fuzz: {kind:6} {damage:9} exit {code}: {n}")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in ([root] if root.is_file() else root.rglob("*"))
                  if p.is_file() and p.name != "lock")


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in _files(root)}


def _check(kind: str, damage: str, url: str, root: Path) -> Outcome:
    before = _snapshot(root)
    outcome = run_cli(["verify", url])
    outcome.assert_clean()
    assert outcome.code in (EXIT_OK, EXIT_CORRUPT, EXIT_UNREADABLE), outcome
    if outcome.code == EXIT_OK:
        assert outcome.out.startswith("ok: "), outcome
    if outcome.code == EXIT_CORRUPT:
        assert "FAILED at" in outcome.err.splitlines()[0], outcome
    if kind == "jsonl":  # reads never write (SQLite's own pages are SQLite's business)
        assert _snapshot(root) == before
    TALLY[kind, damage, outcome.code] += 1
    return outcome


damage_at = st.tuples(st.integers(0, 1 << 30), st.integers(0, 1 << 30), st.integers(1, 255))
FUZZ = settings(max_examples=TRIALS, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@FUZZ
@given(where=damage_at)
def test_a_flipped_byte_is_reported_never_raised(
        kind: str, where: tuple[int, int, int], pristine: dict[str, Path], scratch: Path
) -> None:
    root = fresh_copy(pristine[kind], scratch / "damaged")
    files = _files(root)
    which, offset, mask = where
    path = files[which % len(files)]
    data = bytearray(path.read_bytes())
    if not data:
        return
    data[offset % len(data)] ^= mask
    path.write_bytes(bytes(data))
    url = f"sqlite:///{root}" if kind == "sqlite" else f"jsonl:///{root}"
    _check(kind, "flip", url, root)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@FUZZ
@given(where=damage_at)
def test_a_truncated_file_is_reported_never_raised(
        kind: str, where: tuple[int, int, int], pristine: dict[str, Path], scratch: Path
) -> None:
    root = fresh_copy(pristine[kind], scratch / "damaged")
    files = _files(root)
    which, offset, _ = where
    path = files[which % len(files)]
    data = path.read_bytes()
    path.write_bytes(data[:offset % (len(data) + 1)])
    url = f"sqlite:///{root}" if kind == "sqlite" else f"jsonl:///{root}"
    _check(kind, "truncate", url, root)


@FUZZ
@given(pair=st.tuples(st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.integers(0, 1)))
def test_swapped_or_dropped_jsonl_lines_are_caught(
        pair: tuple[int, int, int], pristine: dict[str, Path], scratch: Path) -> None:
    root = fresh_copy(pristine["jsonl"], scratch / "damaged")
    path = max((root / "sessions").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    lines = path.read_bytes().split(b"\n")[:-1]
    i, j = pair[0] % len(lines), pair[1] % len(lines)
    if pair[2]:
        del lines[i]
    elif lines[i] != lines[j]:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    outcome = _check("jsonl", "swap/drop", f"jsonl:///{root}", root)
    assert outcome.code == EXIT_CORRUPT  # a moved or removed event is always damage


@FUZZ
@given(pair=st.tuples(st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.integers(0, 1)))
def test_swapped_or_dropped_sqlite_rows_are_caught(
        pair: tuple[int, int, int], pristine: dict[str, Path], scratch: Path) -> None:
    root = fresh_copy(pristine["sqlite"], scratch / "damaged")
    db = sqlite3.connect(root, isolation_level=None)
    try:
        rows = db.execute("SELECT sid, last_seq, body FROM blocks ORDER BY 1, 2").fetchall()
        (sa, la, ba), (sb, lb, bb) = rows[pair[0] % len(rows)], rows[pair[1] % len(rows)]
        where = "WHERE sid=? AND last_seq=?"
        if pair[2]:
            db.execute(f"DELETE FROM blocks {where}", (sa, la))
        elif ba != bb:
            db.execute(f"UPDATE blocks SET body=? {where}", (bb, sa, la))
            db.execute(f"UPDATE blocks SET body=? {where}", (ba, sb, lb))
        else:
            return
    finally:
        db.close()
    outcome = _check("sqlite", "swap/drop", f"sqlite:///{root}", root)
    assert outcome.code == EXIT_CORRUPT


PG_ROWS = st.tuples(st.sampled_from(["flip", "flip", "flip", "swap", "drop", "drop", "head",
                                    "position"]),
                    st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.integers(1, 255))


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[tuple[str, Any]]:
    import psycopg  # noqa: PLC0415 - optional extra

    record(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield pg_url, conn


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=PG_ROWS)
def test_damaged_postgresql_rows_are_reported_never_raised(
        damage: tuple[str, int, int, int], pg_store: tuple[str, Any]) -> None:
    """Rows changed through SQL, then put back: the same store serves every example."""
    url, conn = pg_store
    kind, i, j, mask = damage
    full = conn.execute("SELECT sid, last_seq, first_seq, t_max, body FROM convlog_blocks "
                        "ORDER BY 1, 2").fetchall()
    blocks = [(row[0], row[1], bytes(row[4])) for row in full]
    heads = conn.execute("SELECT sid, version, head FROM convlog_sessions").fetchall()
    (position,) = conn.execute("SELECT last FROM convlog_position").fetchone()
    sa, la, ba = blocks[i % len(blocks)]
    sb, lb, bb = blocks[j % len(blocks)]
    where = "WHERE sid=%s AND last_seq=%s"
    if kind == "flip":
        body = bytearray(ba)
        body[j % len(body)] ^= mask
        conn.execute(f"UPDATE convlog_blocks SET body=%s {where}", (bytes(body), sa, la))
    elif kind == "swap" and ba != bb:
        conn.execute(f"UPDATE convlog_blocks SET body=%s {where}", (bb, sa, la))
        conn.execute(f"UPDATE convlog_blocks SET body=%s {where}", (ba, sb, lb))
    elif kind == "drop":
        conn.execute(f"DELETE FROM convlog_blocks {where}", (sa, la))
    elif kind == "head":
        sid, version, _ = heads[i % len(heads)]
        conn.execute("UPDATE convlog_sessions SET version=%s WHERE sid=%s",
                     (version + 1 + j % 3, sid))
    elif kind == "position":
        conn.execute("UPDATE convlog_position SET last=%s", (position + 1 + j % 3,))
    try:
        outcome = run_cli(["verify", url])
        outcome.assert_clean()
        if kind == "flip":  # a flip can leave the decoded event as it was
            assert outcome.code in (EXIT_OK, EXIT_CORRUPT), outcome
        elif kind == "position":
            # A counter ahead of the log: verify compares it with the log's positions
            # (the next placement would otherwise leave a gap).
            assert outcome.code == EXIT_CORRUPT, outcome
        elif kind != "swap" or ba != bb:
            assert outcome.code == EXIT_CORRUPT, outcome  # every other change is damage
        TALLY["pg", kind, outcome.code] += 1
    finally:
        with conn.transaction():
            conn.execute("DELETE FROM convlog_blocks")
            for row in full:
                conn.execute("INSERT INTO convlog_blocks (sid, last_seq, first_seq, t_max, body)"
                             " VALUES (%s, %s, %s, %s, %s)", row)
            for sid, version, head in heads:
                conn.execute("UPDATE convlog_sessions SET version=%s, head=%s WHERE sid=%s",
                             (version, head, sid))
            conn.execute("UPDATE convlog_position SET last=%s", (position,))
