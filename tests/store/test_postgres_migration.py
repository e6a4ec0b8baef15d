"""A PostgreSQL store written by the release before schema 3
(``tests/fixtures/pg-store-v2.sql``: a log and id row per event, positions taken at
commit by ``convlog_append_v1``) opens, migrates, reads, verifies and takes appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.session import Session
from engine.store import open_store
from engine.store.verify import verify

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pg-store-v2.sql"
ROOT = "0190c000-0000-7000-8000-0000000000a1"
OTHER = "0190c000-0000-7000-8000-0000000000b2"


@pytest.fixture
def old(pg_url: str) -> str:
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(FIXTURE.read_text())
    return pg_url


def _facts(url: str) -> tuple[int, dict[str, int], list[tuple[bytes, int]]]:
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url) as db:
        (last,) = db.execute("SELECT last FROM convlog_position").fetchone() or (0,)
        versions: dict[str, int] = dict(db.execute(
            "SELECT id, greatest(version, coalesce(fork_seq, 0)) FROM convlog_sessions"
        ).fetchall())
        ids = db.execute("SELECT id, position FROM convlog_ids ORDER BY position").fetchall()
    return int(last), versions, [(bytes(k), int(p)) for k, p in ids]


def test_a_schema_2_store_migrates_and_keeps_positions_ids_and_chains(old: str) -> None:
    last, versions, ids = _facts(old)
    assert last > 300
    assert len(ids) == last
    store = open_store(old)
    try:
        report = verify(store)
        assert report.ok, report
        records = list(store.read_all())
        assert [r.position for r in records] == list(range(1, last + 1))
        # Each event keeps the position its id had: the id index moved to (sid, seq).
        from engine.store import blocks  # noqa: PLC0415

        assert [(blocks.id_key(r.event.id), r.position) for r in records] == ids
        for session_id, version in versions.items():
            events = list(store.read(session_id))
            assert events[-1].seq == version
            found = store.find_event(events[-1].id)
            assert found == (session_id, version)
        assert store.last_position() == last
        # Appends after the migration: next positions, and a retried event is
        # recognized by its id (idempotence) with the position it was given.
        s = Session.open(store, OTHER)
        s.user_message("after the migration")
        now = store.last_position()
        added = list(store.read_all(after=last))
        assert [r.position for r in added] == list(range(last + 1, now + 1))
        assert now > last
        assert {r.event.session_id for r in added} == {OTHER}
        retried = store.append(OTHER, [r.event for r in added])
        assert retried.positions == tuple(range(last + 1, now + 1))
        assert store.last_position() == now
        assert verify(store).ok
    finally:
        store.close()
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(old) as db:
        # Migrated to schema 3's tables on open, raised to 4 by the first write.
        assert db.execute("SELECT value FROM convlog_meta WHERE key='schema'").fetchone() == (
            "4",)
        gone = db.execute("SELECT to_regprocedure('convlog_append_v1(text, integer, bytea, "
                          "integer, integer, bytea, bytea[], integer[], integer[], bigint[], "
                          "bytea[])')").fetchone()
        assert gone == (None,)  # a client still holding schema 2 cannot append the old way


def test_the_migration_runs_once_under_concurrent_openers(old: str) -> None:
    """Two stores opened on the old schema one after the other: the second finds
    it current and neither damages it."""
    first, second = open_store(old), open_store(old)
    try:
        assert verify(first).ok
        assert verify(second).ok
    finally:
        first.close()
        second.close()


def test_a_schema_3_store_of_the_release_before_gets_this_releases_functions(
        pg_url: str) -> None:
    """Schema 3 as first released had no convlog_append_v3, convlog_append_once_v3,
    convlog_place_v3 or convlog_flush_v3 (its appends placed through
    convlog_append_v2 and convlog_settle_v2): the next open creates them, without a
    schema change, and appends and durable reads go through them."""
    import psycopg  # noqa: PLC0415 - optional extra

    from engine.store.postgres import (  # noqa: PLC0415
        _INOUT_TYPES,
        _SIGNATURE_TYPES,
        SCHEMA_VERSION,
    )

    store = open_store(pg_url)
    Session.create(store, ROOT).create_conversation()
    store.close()
    this_release = [f"PROCEDURE convlog_append_v3({_SIGNATURE_TYPES}, {_INOUT_TYPES})",
                    f"FUNCTION convlog_append_once_v3({_SIGNATURE_TYPES})",
                    "FUNCTION convlog_place_v3(bigint, integer, integer)",
                    "PROCEDURE convlog_flush_v3()"]
    with psycopg.connect(pg_url, autocommit=True) as db:
        for routine in this_release:
            db.execute(f"DROP {routine}")
        assert db.execute("SELECT value FROM convlog_meta WHERE key = 'schema'"
                          ).fetchone() == (str(SCHEMA_VERSION),)
    for durability in ("sync", "batched"):
        again = open_store(f"{pg_url}&durability={durability}")
        Session.open(again, ROOT).user_message(f"through {durability}")
        again.close()
    reader = open_store(pg_url)
    positions = [r.position for r in reader.read_all()]
    assert len(positions) == Session.open(reader, ROOT).version > 2
    assert positions == list(range(1, len(positions) + 1))
    assert verify(reader).ok
