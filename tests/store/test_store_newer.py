"""A store whose number is above this release's (a newer release wrote it) is refused
when opened, with one clean StoreError naming the URL and both numbers (the CLI:
exit 2, one line), never called damage or unreadable, and nothing is written. A
store this release opened at an older number is never lowered below a number a
newer release wrote into it meanwhile. (The releases before are checked by hand
against this release's stores: docs/stores.md, "Store numbers".)"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_USAGE
from engine.errors import StoreError
from engine.session import Session
from engine.store import blocks, open_store, packed
from engine.store import jsonl as jsonl_store
from engine.store import postgres as pg_store
from engine.store import sqlite as sqlite_store
from engine.store.jsonl_blocks import SEAL_AT as JSONL_SEAL_AT
from engine.store.verify import verify
from tests.support.cli_run import run_cli
from tests.support.packed_stores import files, pg_rows, store_number

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
KINDS = ["sqlite", "jsonl", "postgres"]


@attrs.frozen
class Made:
    """A store this release wrote (one session with events), and how to set its number
    behind the store's back as a newer release would."""

    kind: str
    url: str
    noun: str  # what the store's number is called in its messages
    current: int
    set_number: Callable[[int], None]
    state: Callable[[], Any]  # its files' bytes, or its tables' rows


def _set_sqlite(path: Path, n: int) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(n),))
    db.close()


def _set_jsonl(root: Path, n: int) -> None:
    meta = json.loads((root / "convlog.json").read_bytes())
    meta["version"] = n
    (root / "convlog.json").write_text(json.dumps(meta) + "\n")


def _set_pg(url: str, n: int) -> None:
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE convlog_meta SET value=%s WHERE key='schema'", (str(n),))


def _made(kind: str, where: Path, pg_url: Callable[[], str]) -> Made:
    if kind == "sqlite":
        path = where / "store.db"
        made = Made(kind, f"sqlite:///{path}", "schema", sqlite_store.SCHEMA_VERSION,
                    lambda n: _set_sqlite(path, n), path.read_bytes)
    elif kind == "jsonl":
        root = where / "jsonl"
        made = Made(kind, f"jsonl:///{root}", "format", jsonl_store.FORMAT_VERSION,
                    lambda n: _set_jsonl(root, n), lambda: files(root))
    else:
        url = pg_url()
        made = Made(kind, url, "schema", pg_store.SCHEMA_VERSION,
                    lambda n: _set_pg(url, n), lambda: pg_rows(url))
    store = open_store(made.url)
    s = Session.create(store)
    s.user_message("ein Satz, der nicht ASCII ist: ü")
    store.close()
    assert store_number(made.url) == made.current
    return made


@pytest.fixture(params=KINDS)
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Made:
    return _made(request.param, tmp_path,
                 lambda: str(request.getfixturevalue("pg_url")))


def _refused_cleanly(made: Made, number: int) -> None:
    """Open (to read, and to write) and every read command: the one clean refusal."""
    message = f"{made.url} has {made.noun} {number}, newer than {made.current}"
    before = made.state()
    for create in (True, False):
        with pytest.raises(StoreError) as caught:
            open_store(made.url, create=create)
        assert type(caught.value) is StoreError  # not CorruptLog, not StoreUnreadable
        assert str(caught.value) == message
    for argv in (["verify"], ["verify", "--fast"], ["sessions"], ["tail"]):
        outcome = run_cli([argv[0], made.url, *argv[1:]])
        outcome.assert_clean()
        assert outcome.code == EXIT_USAGE, outcome
        assert outcome.err == f"convlog {argv[0]}: {message}\n", outcome
        assert outcome.out == ""
    assert made.state() == before


def test_a_store_one_number_above_this_release_is_refused_cleanly(made: Made) -> None:
    made.set_number(made.current + 1)
    _refused_cleanly(made, made.current + 1)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["sqlite", "jsonl"]), above=st.integers(1, 10**9))
def test_any_number_above_this_release_is_refused_cleanly(
        tmp_path_factory: pytest.TempPathFactory, kind: str, above: int) -> None:
    def no_pg() -> str:
        raise AssertionError("not drawn")

    made = _made(kind, tmp_path_factory.mktemp("newer"), no_pg)
    made.set_number(made.current + above)
    _refused_cleanly(made, made.current + above)


@pytest.fixture(params=KINDS)
def opened_old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Made]:
    """A store of the release before (tests/fixtures/packed-v2-stores), at its number."""
    kind = request.param
    source = FIXTURES / "packed-v2-stores"
    if kind == "sqlite":
        path = tmp_path / "store.db"
        shutil.copy(source / "store.db", path)
        yield Made(kind, f"sqlite:///{path}", "schema", sqlite_store.SCHEMA_VERSION,
                   lambda n: _set_sqlite(path, n), path.read_bytes)
    elif kind == "jsonl":
        root = tmp_path / "jsonl"
        shutil.copytree(source / "jsonl", root)
        yield Made(kind, f"jsonl:///{root}", "format", jsonl_store.FORMAT_VERSION,
                   lambda n: _set_jsonl(root, n), lambda: files(root))
    else:
        import gzip  # noqa: PLC0415

        import psycopg  # noqa: PLC0415 - optional extra

        url = str(request.getfixturevalue("pg_url"))
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(gzip.decompress((source / "pg-store.sql.gz").read_bytes()).decode())
        yield Made(kind, url, "schema", pg_store.SCHEMA_VERSION,
                   lambda n: _set_pg(url, n), lambda: pg_rows(url))


def test_a_number_raised_by_a_newer_release_after_this_one_opened_is_never_lowered(
        opened_old: Made) -> None:
    """This release opened the store at the old number (so its first write would
    raise it); a newer release raises it further in between. This release's write
    must not lower it: SQLite refuses the write (the number is checked again in the
    write transaction), PostgreSQL raises only from the old number, and JSONL leaves
    the events in the tail instead of sealing them under the newer number."""
    made = opened_old
    newer = made.current + 1
    store = open_store(made.url)
    try:
        root_id = next(i.id for i in store.sessions() if i.parent is None)
        made.set_number(newer)
        s = Session.open(store, root_id)
        if made.kind == "sqlite":
            for _ in range(2):  # and it stays refused
                with pytest.raises(StoreError, match=f"has schema {newer}, newer than "):
                    s.user_message("refused")
            assert verify(store).ok  # reads still work
        else:
            m = s.start_message("assistant")
            part = s.add_text(m)
            for i in range(max(blocks.BLOCK_MAX, JSONL_SEAL_AT) + 10):
                s.text_delta(part, f"{i} ")
            s.end_part(part)
            s.complete_message(m, finish="stop")
            assert verify(store).ok
    finally:
        store.close()
    assert store_number(made.url) == newer


# The store numbers that go with each packed payload format (SQLite schema, PostgreSQL
# schema, JSONL format). A new payload format that old releases cannot read must come
# with raised numbers and a row here, or those releases take its blocks for damage
# (packed format 2 first shipped at the numbers of format 1).
NUMBERS_OF_PACKED_FORMAT = {1: (3, 3, 2), 2: (4, 4, 3)}


def test_the_packed_format_written_today_comes_with_its_store_numbers() -> None:
    numbers = (sqlite_store.SCHEMA_VERSION, pg_store.SCHEMA_VERSION, jsonl_store.FORMAT_VERSION)
    assert numbers == NUMBERS_OF_PACKED_FORMAT[packed.FORMAT]
