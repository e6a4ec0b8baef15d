"""Tamper evidence: every kind of damage is found by ``convlog verify`` at the right seq.

Each test writes a real session, damages the stored bytes behind the store's back
(as someone with file or database access would), then runs ``convlog verify``:
exit 4 and the first bad seq, for SQLite, JSONL and PostgreSQL. A keyed chain
(HMAC) also stops someone who recomputes the hashes after an edit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import msgspec
import pytest

from engine.cli import EXIT_CORRUPT, EXIT_KEY_NEEDED, EXIT_OK, EXIT_USAGE, main
from engine.codec import canonical
from engine.errors import StoreError
from engine.session import Session, StepClock
from engine.store import blocks, open_store
from engine.store.chain import GENESIS, Chain
from engine.store.verify import verify
from tests.conftest import backend_url

N_EVENTS = 13


def record(url: str) -> str:
    """A finished assistant turn, one event per append (one stored row/line each)."""
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        mid = s.start_message("assistant")
        text = s.add_text(mid)
        for chunk in ("The ", "answer ", "is ", "forty", "-two", "."):
            s.text_delta(text, chunk)
        s.end_part(text)
        tool = s.add_tool(mid, "c1", "bash")
        s.start_tool(tool)
        s.complete_tool(tool, "ok")
        assert s.version == N_EVENTS - 1
        s.complete_message(mid)
        assert s.version == N_EVENTS
        return s.id
    finally:
        store.close()


def run_verify(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["verify", url, *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


# --------------------------------------------------------------------------- tamperers


class Tamper(Protocol):
    def flip(self, seq: int) -> None: ...
    def delete(self, seq: int) -> None: ...
    def swap(self, seq: int) -> None: ...
    def cut_tail(self, count: int) -> None: ...
    def edit(self, seq: int, change: Callable[[dict[str, Any]], None]) -> None: ...


class BlockTamper:
    """SQLite and PostgreSQL: rows of the ``blocks`` table (one event each here)."""

    def __init__(self, execute: Callable[..., list[tuple[Any, ...]]], table: str,
                 ph: str) -> None:
        self.x = execute
        self.t = table
        self.ph = ph

    def _body(self, seq: int) -> bytes:
        rows = self.x(f"SELECT body FROM {self.t} WHERE last_seq={self.ph}", seq)
        assert len(rows) == 1
        return bytes(rows[0][0])

    def _set(self, seq: int, body: bytes) -> None:
        self.x(f"UPDATE {self.t} SET body={self.ph} WHERE last_seq={self.ph}", body, seq)

    def flip(self, seq: int) -> None:
        body = bytearray(self._body(seq))
        body[-3] ^= 0x01  # inside the event's last field
        self._set(seq, bytes(body))

    def delete(self, seq: int) -> None:
        self.x(f"DELETE FROM {self.t} WHERE last_seq={self.ph}", seq)

    def swap(self, seq: int) -> None:
        a, b = self._body(seq), self._body(seq + 1)
        self._set(seq, b)
        self._set(seq + 1, a)

    def cut_tail(self, count: int) -> None:
        self.x(f"DELETE FROM {self.t} WHERE last_seq>{self.ph}", N_EVENTS - count)

    def edit(self, seq: int, change: Callable[[dict[str, Any]], None]) -> None:
        raw, hashes = blocks.split(self._body(seq))
        obj = msgspec.msgpack.decode(raw[0])
        change(obj)
        self._set(seq, blocks.encode([msgspec.msgpack.encode(obj)], hashes, 1))


class LineTamper:
    """JSONL: lines of the session's file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _lines(self) -> list[bytes]:
        return self.path.read_bytes().split(b"\n")[:-1]

    def _save(self, lines: list[bytes]) -> None:
        self.path.write_bytes(b"".join(line + b"\n" for line in lines))

    def flip(self, seq: int) -> None:
        lines = self._lines()
        line = bytearray(lines[seq - 1])
        line[line.index(b'"delta":"') + 9] ^= 0x01  # one bit of the text
        lines[seq - 1] = bytes(line)
        self._save(lines)

    def delete(self, seq: int) -> None:
        lines = self._lines()
        del lines[seq - 1]
        self._save(lines)

    def swap(self, seq: int) -> None:
        lines = self._lines()
        lines[seq - 1], lines[seq] = lines[seq], lines[seq - 1]
        self._save(lines)

    def cut_tail(self, count: int) -> None:
        self._save(self._lines()[:-count])

    def edit(self, seq: int, change: Callable[[dict[str, Any]], None]) -> None:
        lines = self._lines()
        obj = msgspec.json.decode(lines[seq - 1])
        change(obj["event"])
        lines[seq - 1] = msgspec.json.encode(obj)
        self._save(lines)


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Tamper]]:
    url = backend_url(request, request.param, tmp_path)
    sid = record(url)
    if request.param == "sqlite":
        db = sqlite3.connect(str(tmp_path / "t.db"), isolation_level=None)

        def sql(q: str, *args: Any) -> list[tuple[Any, ...]]:
            return db.execute(q, args).fetchall()

        yield url, sid, BlockTamper(sql, "blocks", "?")
        db.close()
    elif request.param == "jsonl":
        yield url, sid, LineTamper(tmp_path / "log" / "sessions" / f"{sid}.jsonl")
    else:
        import psycopg  # noqa: PLC0415 - optional extra

        conn = psycopg.connect(url, autocommit=True)

        def pg(q: str, *args: Any) -> list[tuple[Any, ...]]:
            cur = conn.execute(q, args)
            return cur.fetchall() if cur.description else []

        yield url, sid, BlockTamper(pg, "convlog_blocks", "%s")
        conn.close()


# --------------------------------------------------------------------------- detection


def test_a_sound_log_verifies(logged: tuple[str, str, Tamper],
                              capsys: pytest.CaptureFixture[str]) -> None:
    url, sid, _ = logged
    code, out = run_verify(url, capsys)
    assert code == EXIT_OK, out
    assert f"ok: 1 session(s), {N_EVENTS} event(s)" in out
    assert f"{sid} seq {N_EVENTS} head " in out
    assert run_verify(url, capsys, "--session", sid)[0] == EXIT_OK


@pytest.mark.parametrize(("damage", "seq", "why"), [
    ("flip", 5, ""),
    ("delete", 6, "seq 6 is missing"),
    ("swap", 4, ""),
    ("cut_tail", 2, "the tail was cut"),
    ("edit", 7, "hash mismatch"),
])
def test_damage_is_found_at_its_seq(logged: tuple[str, str, Tamper], damage: str, seq: int,
                                    why: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, sid, tamper = logged
    if damage == "edit":
        tamper.edit(seq, lambda e: e.update(delta="forged"))
    elif damage == "cut_tail":
        tamper.cut_tail(seq)
        seq = N_EVENTS - seq + 1
    else:
        getattr(tamper, damage)(seq)
    code, out = run_verify(url, capsys)
    assert code == EXIT_CORRUPT, out
    assert f"FAILED at session {sid} seq {seq}:" in out
    assert why in out
    code, out = run_verify(url, capsys, "--session", sid)
    assert code == EXIT_CORRUPT
    assert f"seq {seq}:" in out


def test_an_illegal_transition_is_found(logged: tuple[str, str, Tamper],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Bytes rewritten *with* a recomputed (unkeyed) chain still have to be legal."""
    url, sid, tamper = logged
    store = open_store(url)
    events = list(store.read(sid))
    store.close()
    # Start the tool before it was added, and re-chain everything after it.
    tamper.swap(10)
    chained = _rechain(url, sid, [*events[:9], events[10], events[9], *events[11:]], tamper)
    assert chained
    code, out = run_verify(url, capsys)
    assert code == EXIT_CORRUPT, out
    assert "seq 10: illegal transition" in out or "seq 10:" in out


def _rechain(url: str, sid: str, events: list[Any], tamper: Tamper) -> bool:
    """What a forger without a key does: renumber and recompute every hash."""
    chain = Chain(None)
    prev = GENESIS
    fixed = []
    for i, given in enumerate(events, start=1):
        e = msgspec.structs.replace(given, seq=i)
        prev = chain.link(prev, canonical(e))
        fixed.append((e, prev))
    if isinstance(tamper, LineTamper):
        lines = tamper._lines()
        out = []
        for (e, h), line in zip(fixed, lines, strict=True):
            obj = msgspec.json.decode(line)
            obj["hash"] = h.hex()
            obj["event"] = msgspec.to_builtins(e)
            out.append(msgspec.json.encode(obj))
        tamper._save(out)
        return True
    assert isinstance(tamper, BlockTamper)
    for e, h in fixed:
        tamper._set(e.seq, blocks.encode([msgspec.msgpack.encode(e)], [h], 1))
    return True


def test_hmac_stops_a_forger_who_rechains(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("0123456789abcdef-secret\n")
    url = f"jsonl:///{tmp_path}/log"
    store = open_store(url, key_file=str(key_file))
    s = Session.create(store, clock=StepClock())
    s.user_message("pay 10 EUR")
    events = list(store.read(s.id))
    store.close()
    assert run_verify(url, capsys, "--key-file", str(key_file))[0] == EXIT_OK

    # Without the key, verify cannot check the chain: it says a key is needed and never
    # claims tampering on an intact store.
    code, out = run_verify(url, capsys)
    assert code == EXIT_KEY_NEEDED
    assert "is keyed" in out
    assert "--key-file" in out
    assert "mismatch" not in out
    assert "edited" not in out
    # The forger edits the text and recomputes an unkeyed chain: the HMAC check fails.
    forged = [msgspec.structs.replace(e, text="pay 1000 EUR") if hasattr(e, "text") else e
              for e in events]
    _rechain(url, s.id, forged, LineTamper(tmp_path / "log" / "sessions" / f"{s.id}.jsonl"))
    code, out = run_verify(url, capsys, "--key-file", str(key_file))
    assert code == EXIT_CORRUPT
    assert f"session {s.id} seq 1: hash mismatch" in out
    # A wrong key is refused when the store opens.
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-right-key-at-all\n")
    assert run_verify(url, capsys, "--key-file", str(wrong))[0] == EXIT_USAGE
    with pytest.raises(StoreError, match="key"):
        open_store(url, key_file=str(wrong))


def test_keyed_store_refuses_appends_without_the_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/k.db"
    store = open_store(url, key=b"0123456789abcdef0123")
    s = Session.create(store)
    s.user_message("hi")
    store.close()
    reader = open_store(url)
    try:
        assert len(list(reader.read(s.id))) == 4  # reading needs no key
        with pytest.raises(StoreError, match="secret key"):
            Session.open(reader, s.id).user_message("more")
    finally:
        reader.close()


def test_verify_covers_forks_and_the_whole_store(durable_url: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(durable_url)
    s = Session.create(store, clock=StepClock())
    s.user_message("one")
    fork = s.fork(at=2)
    s.user_message("two")
    fork.abort(next(iter(fork.lifecycle.messages)))  # ends the part, completes: 2 events
    store.close()
    code, out = run_verify(durable_url, capsys)
    assert code == EXIT_OK, out
    assert "ok: 2 session(s)" in out
    assert run_verify(durable_url, capsys, "--session", fork.id)[0] == EXIT_OK
    report = verify(open_store(durable_url))
    assert report.ok
    assert report.events == 8 + 2
