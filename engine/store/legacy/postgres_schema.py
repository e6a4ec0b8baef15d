"""PostgreSQL schemas before today's (4): migrated when a store is opened, under the
migration lock (``PostgresRecorder._migrate``).

- Schemas 1 and 2: the id index kept a global position per id. Schema 3 names each
  id's (sid, seq) instead, learned from the log (:func:`migrate_2_to_3`), and the
  schema 2 append function (which took positions at commit) goes, so a client that
  still has it open fails instead of writing the old way.
- Schema 3: today's tables; only the number changes, at the first write.
"""

from __future__ import annotations

from typing import Any

import psycopg

_MIGRATE_2_TO_3 = [
    "ALTER TABLE convlog_ids ADD COLUMN sid bigint, ADD COLUMN seq integer",
    "UPDATE convlog_ids i SET sid = l.sid, seq = l.seq FROM convlog_log l "
    "WHERE l.position = i.position",
    "ALTER TABLE convlog_ids ALTER COLUMN sid SET NOT NULL, ALTER COLUMN seq SET NOT NULL, "
    "DROP COLUMN position",
    "DROP FUNCTION IF EXISTS convlog_append_v1(text, integer, bytea, integer, integer, bytea, "
    "bytea[], integer[], integer[], bigint[], bytea[])",
]


def ids_have_positions(db: psycopg.Connection[Any]) -> bool:
    """Whether the id index is schema 1's or 2's (checked before today's DDL runs)."""
    return db.execute(
        "SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_name = "
        "'convlog_ids' AND column_name = 'position' AND table_schema = current_schema())"
    ).fetchone() == (True,)


def migrate_2_to_3(db: psycopg.Connection[Any]) -> None:
    """In the transaction that marks the store 3, under the migration lock."""
    for statement in _MIGRATE_2_TO_3:
        db.execute(statement)
