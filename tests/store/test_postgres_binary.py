"""PostgreSQL: event bodies travel in binary, both ways, never as hex text.

The evidence is the wire itself: libpq's protocol trace of the store's
connection shows each Bind message's parameter format codes (0 text, 1 binary)
and the result format it asks for, and the bytes that were sent.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg import pq

from engine import events as ev
from engine.store import open_store
from engine.store.pg_wire import bytea_array, int4_array, int8_array
from engine.store.postgres import PostgresStore, connect
from tests.support.pgserver import PgServer

SID = "0190a000-0000-7000-8000-0000000b1a01"
MARK = "binary-marker-\u00e9\u00e8"  # text of the appended events, found raw on the wire


def _text(e: object) -> str:
    assert isinstance(e, ev.TranscriptNoted)
    return e.text

def _bind_messages(trace: str) -> list[tuple[list[int], str]]:
    """(parameter format codes, the whole line) of every Bind the client sent."""
    out = []
    for line in trace.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0] == "F" and fields[2] == "Bind":
            tokens = fields[3].split(" ")
            n = int(tokens[3])  # after the leading space: portal, statement, count
            out.append(([int(t) for t in tokens[4:4 + n]], line))
    return out


def _appends(store: PostgresStore, count: int) -> None:
    for i in range(count):
        store.append(SID, [ev.TranscriptNoted(id=f"0190a000-0000-7000-9000-{i:012d}", time=1,
                                              text=MARK)])


def test_appends_send_bodies_and_arrays_binary_and_reads_ask_for_binary(pg_url: str) -> None:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    store.create_session(SID, created=0)
    with tempfile.TemporaryFile(mode="w+") as sink:
        pgconn = store.recorder._db.pgconn
        pgconn.trace(sink.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        _appends(store, 7)  # past psycopg's prepare threshold: both paths are covered
        events = list(store.read(SID))
        pgconn.untrace()
        sink.seek(0)
        trace = sink.read()
    store.close()
    assert [_text(e) for e in events] == [MARK] * 7
    binds = _bind_messages(trace)
    calls = [(codes, line) for codes, line in binds if len(codes) == 11]
    assert len(calls) == 7  # one function call per append, each traced
    for codes, line in calls:
        # session id as text; every number, hash and array (the bodies) binary
        assert codes == [0] + [1] * 10, line
        assert line.rsplit(" ", 2)[-2:] == ["1", "1"], line  # the result: binary
    body = msgspec.msgpack.encode(MARK)
    wire = trace.encode("latin-1", "backslashreplace")
    assert body.hex().encode() not in wire  # no hex copy of the body went out
    assert MARK.encode().hex().encode() not in wire
    # The reads of the blocks ask for binary results too (last field of each Bind).
    reads = [line for codes, line in binds if "convlog_append" not in line and len(codes) != 11]
    assert reads
    assert all(line.rsplit(" ", 2)[-2:] == ["1", "1"] for line in reads)


@pytest.fixture(scope="module")
def server(pg_server: object) -> Iterator[psycopg.Connection[Any]]:
    """One connection for the examples (hypothesis runs many per test)."""
    assert isinstance(pg_server, PgServer)
    with connect(pg_server.url()) as conn:
        yield conn


@given(values=st.lists(st.binary(max_size=300), max_size=20))
def test_packed_bytea_arrays_are_what_the_server_reads(
        server: psycopg.Connection[Any], values: list[bytes]) -> None:
    got = server.execute("SELECT %b::bytea[]", (bytea_array(values),)).fetchone()
    assert got is not None
    assert [bytes(v) for v in got[0]] == values


@given(small=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
       big=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_packed_integer_arrays_are_what_the_server_reads(
        server: psycopg.Connection[Any], small: list[int], big: list[int]) -> None:
    got = server.execute("SELECT %b::integer[], %b::bigint[]",
                         (int4_array(small), int8_array(big))).fetchone()
    assert got is not None
    assert (list(got[0]), list(got[1])) == (small, big)
