"""Shared fixtures: a deterministic clock, both stores, and a session on them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.session import Session, StepClock
from engine.store import Store, open_store
from tests.support.pgserver import IN_CI, PgServer, find_bin


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    return f"sqlite:///{tmp_path}/t.db"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def session(store: Store, clock: StepClock) -> Session:
    return Session.create(store, clock=clock)


# --------------------------------------------------------------------------- PostgreSQL

@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One throwaway cluster for the whole run (see tests/pgserver.py).

    Without server binaries or psycopg the PostgreSQL tests skip, except with
    CI=true, where they must run: there a missing piece or a failed start fails.
    """
    def unavailable(reason: str) -> None:
        if IN_CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)

    try:
        import psycopg  # noqa: F401, PLC0415 - optional: decides skip or fail
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[dev]')")
    bindir = find_bin()
    if bindir is None:
        unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found; install "
                    "postgresql or set PG_BIN")
    assert bindir is not None
    server = PgServer(bindir)
    try:
        server.start()
    except Exception as exc:
        server.stop()
        pytest.fail(f"cannot start a throwaway PostgreSQL server: {exc}")
    try:
        yield server
    finally:
        server.stop()


_PG_SCHEMAS = iter(range(1, 1 << 30))


@pytest.fixture
def pg_url(pg_server: object) -> str:
    """A store URL on a fresh schema of the throwaway cluster (one per test)."""
    import psycopg  # noqa: PLC0415 - only once pg_server exists

    assert isinstance(pg_server, PgServer)
    schema = f"t{next(_PG_SCHEMAS)}_{os.getpid()}"
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{pg_server.url()}?options=-csearch_path%3D{schema}"


BACKENDS = ["memory", "sqlite", "jsonl", "postgres"]


def backend_url(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/t.db"
    if kind == "jsonl":
        return f"jsonl:///{tmp_path}/log"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture(params=BACKENDS)
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each of the four backends."""
    return backend_url(request, request.param, tmp_path)


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each backend that keeps data across processes."""
    return backend_url(request, request.param, tmp_path)
