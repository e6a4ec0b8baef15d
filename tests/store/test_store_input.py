"""Bad input gets a typed error, nothing is written, and nothing outside the store moves.

Malformed JSON, invalid UTF-8, oversized events, unknown types, ids with path
separators or ``..`` (JSONL file names) and ids with SQL metacharacters, on every
backend and through ``convlog append``.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import msgspec
import pytest

from engine import events as ev
from engine.cli import EXIT_REJECTED, main
from engine.errors import ConvlogError, CorruptLog, EventTooLarge, InvalidId
from engine.session import Session
from engine.store import Store, open_store

SID = "0190a000-0000-7000-8000-0000000e0001"
MID = "0190a000-0000-7000-8000-0000000e0002"

BAD_IDS = [
    "../escape", "a/b", "a\\b", "..", "x..y", "/abs", "", " space", "tab\tid", "nul\0",
    "x'; DROP TABLE sessions; --", 'quote"d', "semi;colon", "per%cent", "star*", "é-unicode",
    "a" * 201,
]


def tree(path: Path) -> dict[str, int]:
    """Every file under path with its size (to see that nothing else was touched)."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(path))] = p.stat().st_size
    return out


def _delta(seq: int, *, eid: str | None = None, text: str = "x") -> ev.Event:
    return ev.TextDelta(id=f"0190a000-0000-7000-8000-{seq:012x}" if eid is None else eid, seq=seq,
                        message_id=MID, part_id="prt_a", delta=text)


def _state(store: Store) -> tuple[list[str], int]:
    return [s.id for s in store.sessions()], store.last_position()


@pytest.mark.parametrize("bad", BAD_IDS, ids=range(len(BAD_IDS)))
def test_bad_ids_are_refused_everywhere(any_url: str, tmp_path: Path, bad: str) -> None:
    store = open_store(any_url)
    try:
        store.create_session(SID, created=1)
        before = (_state(store), tree(tmp_path))
        with pytest.raises(InvalidId) as info:
            store.create_session(bad, created=2)
        assert info.value.kind == "session"
        with pytest.raises(InvalidId):
            store.append(bad, [_delta(1)], 0)
        with pytest.raises(InvalidId) as info:
            store.append(SID, [_delta(1, eid=bad)], 0)
        assert info.value.kind == "event"
        assert (_state(store), tree(tmp_path)) == before
        assert store.version(SID) == 0
    finally:
        store.close()


def test_invalid_id_is_a_value_error_with_a_reason() -> None:
    with pytest.raises(ValueError, match=r"'\.\.' is not allowed"):
        open_store("memory://").create_session("a..b", created=1)
    with pytest.raises(InvalidId, match="no path separators"):
        open_store("memory://").create_session("a/b", created=1)


def test_oversized_events_are_refused(any_url: str) -> None:
    sep = "&" if "?" in any_url else "?"
    store = open_store(f"{any_url}{sep}max_event_bytes=2000")
    try:
        store.create_session(SID, created=1)
        store.append(SID, [_delta(1, text="a" * 1000)], 0)
        with pytest.raises(EventTooLarge) as info:
            store.append(SID, [_delta(2), _delta(3, text="b" * 5000)], 1)
        assert info.value.limit == 2000
        assert info.value.size > 5000
        assert store.version(SID) == 1
        assert store.last_position() == 1
    finally:
        store.close()


# --------------------------------------------------------------------------- through the CLI


def _append_cli(monkeypatch: pytest.MonkeyPatch, url: str, data: bytes) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    return main(["append", url, "--session", SID])


@pytest.mark.parametrize("data", [
    ("malformed JSON", b'{"type": "message.started", "message_id": \n'),
    ("invalid UTF-8", b'{"type": "message.started", "message_id": "\xff\xfe", "role": "user"}\n'),
    ("unknown type", b'{"type": "message.exploded", "message_id": "m"}\n'),
    ("not an object", b'[1, 2, 3]\n'),
    ("SQL in an id", b'{"type": "message.started", "id": "1\'; DROP TABLE events; --", '
                     b'"message_id": "0190a000-0000-7000-8000-0000000e0002", "role": "user"}\n'),
    ("path in an id", b'{"type": "message.started", "id": "../../etc/passwd", '
                      b'"message_id": "0190a000-0000-7000-8000-0000000e0002", "role": "user"}\n'),
])
def test_cli_rejects_bad_input_and_writes_nothing(
    durable_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], data: tuple[str, bytes],
) -> None:
    name, line = data
    open_store(durable_url).close()
    before = tree(tmp_path)
    assert _append_cli(monkeypatch, durable_url, line) == EXIT_REJECTED, name
    err = capsys.readouterr().err
    assert "nothing appended" in err or "invalid" in err, err
    assert tree(tmp_path) == before
    store = open_store(durable_url)
    try:
        assert store.sessions() == []
        assert store.last_position() == 0
    finally:
        store.close()


def test_cli_rejects_an_oversized_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/big.db?max_event_bytes=500"
    line = msgspec.json.encode({"type": "message.started", "message_id": MID, "role": "user",
                                "system": "s" * 1000}) + b"\n"
    assert _append_cli(monkeypatch, url, line) == EXIT_REJECTED
    assert "over the limit of 500" in capsys.readouterr().err
    store = open_store(url)
    try:
        assert store.last_position() == 0
    finally:
        store.close()


# --------------------------------------------------------------------------- damaged JSONL


@pytest.mark.parametrize(("name", "line"), [
    ("malformed JSON", b'{"pos": 2, "hash": "00", "event": {"type": \n'),
    ("invalid UTF-8", b'{"pos":2,"hash":"00","event":{"type":"text.delta","delta":"\xff"}}\n'),
    ("unknown type", b'{"pos":2,"hash":"00","event":{"type":"text.exploded"}}\n'),
])
def test_a_damaged_jsonl_line_is_a_typed_error(tmp_path: Path, name: str, line: bytes) -> None:
    url = f"jsonl:///{tmp_path}/log"
    store = open_store(url)
    s = Session.create(store)
    s.user_message("hello")
    store.close()
    path = tmp_path / "log" / "sessions" / f"{s.id}.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, line.rstrip(b"\n"))  # damage in the middle: never a torn tail
    path.write_bytes(b"\n".join(lines))
    store = open_store(url)
    try:
        with pytest.raises(CorruptLog) as info:
            list(store.read(s.id))
        assert info.value.seq == 2, name
        with pytest.raises(ConvlogError):
            Session.open(store, s.id).user_message("more")
        assert path.read_bytes().count(b"\n") == 5  # nothing appended after the damage
    finally:
        store.close()
