"""SQLite schemas before today's (4), read as they are and migrated by a store's first
write (``SQLiteRecorder._current_schema``) or ``convlog migrate``.

- Schema 1 (a row per event, before blocks): refused (no importer ever worked).
- Schema 2: a row per event in ``log`` and ``ids``. Read through range indexes
  built in the connection's own ``temp`` schema (:func:`read_in_memory`), so reading
  leaves the file as the release before wrote it; migrated by :func:`before_tables`
  and :func:`after_tables` around the creation of today's tables.
- Schema 3: today's tables; only the number changes.

``schema`` is today's DDL (``sqlite._SCHEMA``), passed in: the legacy room depends on
no current module.
"""

from __future__ import annotations

import sqlite3

from engine.errors import StoreError

# The tables schema 2's per-event rows are rebuilt from.
_V2_TABLES = ("log", "ids", "blocks")


def refuse_schema_1(url: str) -> StoreError:
    # Schema 1 had an importer here that no test ever ran; it could not work (it
    # appended before the store was set up). Refused rather than guessed at.
    return StoreError(f"{url} has schema 1 (from before the block format); "
                      "this release cannot open it")


def is_readable_v2(meta: dict[str, str], tables: set[str]) -> bool:
    return meta.get("schema") == "2" and "chain" in meta and set(_V2_TABLES) <= tables


def read_in_memory(db: sqlite3.Connection, schema: str) -> None:
    """In the open's read transaction: the ranges of a schema 2 file, in ``temp``."""
    db.execute("PRAGMA temp_store=MEMORY")
    ranges_from_v2(db, schema, "main.log", "main.ids", into="temp.")


def before_tables(db: sqlite3.Connection) -> None:
    """Schema 2 -> 4, in the migration's transaction, before today's tables are made:
    the per-event tables step aside."""
    for table in _V2_TABLES:
        db.execute(f"ALTER TABLE {table} RENAME TO {table}_v2")


def after_tables(db: sqlite3.Connection, schema: str) -> None:
    """Schema 2 -> 4, after today's tables are made: rows become ranges, and the
    blocks move as they are, byte for byte, into a rowid table."""
    ranges_from_v2(db, schema, "log_v2", "ids_v2")
    db.execute("DROP TABLE log_v2")
    db.execute("DROP TABLE ids_v2")
    db.execute("INSERT INTO blocks SELECT sid, last_seq, first_seq, t_max, body "
               "FROM blocks_v2")
    db.execute("DROP TABLE blocks_v2")


def _low(key: bytes) -> int:
    """The run key of a 16-byte id key: its low 64 bits, as SQLite's signed integer
    (as ``sqlite._low``; the id index's own definition)."""
    return int.from_bytes(key[8:], "big", signed=True)


def ranges_from_v2(db: sqlite3.Connection, schema: str, log_v2: str, ids_v2: str,
                   into: str = "") -> None:
    """Schema 2 -> 3, inside a transaction: the per-event rows of tables ``log_v2`` and
    ``ids_v2`` become the ranges, runs and exact rows of ``log``, ``ids`` and ``names``
    in schema ``into`` (``temp.``: this connection's own, to read a schema 2 file
    without changing it; those tables must not exist yet there). Positions, seqs,
    blocks and heads are kept as they are."""
    if into:
        for statement in schema.split(";"):
            for table in ("log", "ids", "names"):
                if f"TABLE IF NOT EXISTS {table} " in statement:
                    db.execute(statement.replace(f"TABLE IF NOT EXISTS {table} ",
                                                 f"TABLE {into}{table} "))
                elif f" ON {table} " in statement:
                    db.execute(statement.replace("INDEX IF NOT EXISTS ", f"INDEX {into}"))
    log: list[list[int]] = []
    for pos, sid, seq in db.execute(f"SELECT position, sid, seq FROM {log_v2} ORDER BY position"):
        r = log[-1] if log else None
        if r is not None and r[1] == sid and r[0] + r[3] == pos and r[2] + r[3] == seq:
            r[3] += 1
        else:
            log.append([pos, sid, seq, 1])
    db.executemany(f"INSERT INTO {into}log VALUES (?, ?, ?, ?)", log)
    # Runs in position order, then any run that overlaps an earlier-starting one is
    # given up: its ids get exact rows (runs must not overlap).
    runs: list[tuple[list[int], list[bytes]]] = []
    exact: list[tuple[bytes, int]] = []
    for stored, pos in db.execute(f"SELECT id, position FROM {ids_v2} ORDER BY position"):
        key = bytes(stored)
        if len(key) != 16:
            exact.append((key, pos))
            continue
        lo = _low(key)
        last = runs[-1][0] if runs else None
        if last is not None and last[2] + last[1] == pos and last[0] + last[1] == lo:
            last[1] += 1
            runs[-1][1].append(key)
        else:
            runs.append(([lo, 1, pos], [key]))
    runs.sort(key=lambda r: r[0][0])
    kept: list[list[int]] = []
    end: int | None = None
    for run, keys in runs:
        if end is not None and run[0] < end:
            exact += [(k, run[2] + i) for i, k in enumerate(keys)]
            continue
        kept.append(run)
        end = run[0] + run[1]
    db.executemany(f"INSERT INTO {into}ids VALUES (?, ?, ?)", kept)
    db.executemany(f"INSERT INTO {into}names VALUES (?, ?)", exact)
    moved = db.execute(f"SELECT (SELECT COUNT(*) FROM {log_v2}), "
                       f"(SELECT COUNT(*) FROM {ids_v2})").fetchone()
    assert sum(r[3] for r in log) == moved[0]
    assert sum(r[1] for r in kept) + len(exact) == moved[1]
