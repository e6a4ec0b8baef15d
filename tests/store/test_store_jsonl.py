"""The JSONL store's own promises (human-readable files, torn tails moved aside) and
``convlog tail``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import structlog
from structlog.testing import capture_logs

from engine import events as ev
from engine.cli import EXIT_OK, main
from engine.errors import DuplicateEventId
from engine.session import Session
from engine.store import JSONLStore, open_store
from engine.store.verify import verify


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    """The CLI tests leave structlog filtering below ``error``; see warnings again."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


def _session(url: str) -> str:
    store = open_store(url)
    s = Session.create(store)
    s.user_message("grep me")
    store.close()
    return s.id


def test_one_greppable_file_per_session(tmp_path: Path) -> None:
    url = f"jsonl:///{tmp_path}/log"
    sid = _session(url)
    path = tmp_path / "log" / "sessions" / f"{sid}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    rows = [json.loads(line) for line in lines]
    assert [r["pos"] for r in rows] == [1, 2, 3, 4]
    assert rows[1]["event"]["type"] == "text.added"
    assert rows[1]["event"]["text"] == "grep me"
    assert all(len(r["hash"]) == 32 for r in rows)
    assert json.loads((tmp_path / "log" / "sessions" / f"{sid}.meta.json").read_text())["id"] == sid


def test_a_torn_last_line_is_reported_by_reads_and_moved_aside_by_a_writer(
        tmp_path: Path) -> None:
    url = f"jsonl:///{tmp_path}/log"
    sid = _session(url)
    path = tmp_path / "log" / "sessions" / f"{sid}.jsonl"
    torn = b'{"pos":5,"hash":"0123","event":{"type":"text.del'
    with open(path, "ab") as f:
        f.write(torn)
    before = path.read_bytes()
    corrupt = path.with_name(path.name + ".corrupt")
    with capture_logs() as logs:
        store = open_store(url)
    assert isinstance(store, JSONLStore)
    try:
        # Reading changes nothing: the torn line is reported, not moved.
        assert logs == []
        assert store.version(sid) == 4
        assert store.torn_tails() == [(sid, len(before) - len(torn), len(torn))]
        report = verify(store)
        assert not report.ok
        assert report.first is not None
        assert report.first.seq == 5
        assert path.read_bytes() == before
        assert not corrupt.exists()
        # The first append moves it aside (an append must not glue onto it), and says so.
        with capture_logs() as logs:
            Session.open(store, sid).user_message("after the crash")
        assert [e["event"] for e in logs] == ["jsonl_tail_moved"]
        assert logs[0]["log_level"] == "warning"
        assert logs[0]["reason"] == "a torn last line"
        assert corrupt.read_bytes() == torn + b"\n"  # kept for inspection, not dropped
        assert path.read_bytes().startswith(before[:-len(torn)])
        assert store.version(sid) == 8
        assert verify(store).ok
    finally:
        store.close()


def test_repair_moves_a_torn_tail_and_a_dry_run_does_not(tmp_path: Path) -> None:
    url = f"jsonl:///{tmp_path}/log"
    sid = _session(url)
    path = tmp_path / "log" / "sessions" / f"{sid}.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"pos":5,"ha')
    before = path.read_bytes()
    store = open_store(url)
    assert isinstance(store, JSONLStore)
    try:
        assert store.repair(dry_run=True) == [(sid, len(before) - 12, 12)]
        assert path.read_bytes() == before
        assert store.repair() == [(sid, len(before) - 12, 12)]
        assert path.read_bytes() == before[:-12]
        assert store.repair() == []
        assert verify(store).ok
    finally:
        store.close()


def test_an_interrupted_batch_is_undone_whole(tmp_path: Path) -> None:
    url = f"jsonl:///{tmp_path}/log"
    sid = _session(url)
    root = tmp_path / "log"
    path = root / "sessions" / f"{sid}.jsonl"
    size = path.stat().st_size
    # A writer died after its intent and the first of two complete lines.
    first = path.read_bytes().split(b"\n")[0]
    line = msgspec.json.decode(first)
    line["pos"] = 5
    (root / "txn").write_bytes(msgspec.json.encode(
        {"old": 4, "new": 6, "files": {sid: size}, "done": False}))
    with open(path, "ab") as f:
        f.write(msgspec.json.encode(line) + b"\n")
    with capture_logs() as logs:
        store = open_store(url)
    try:
        assert logs
        assert logs[0]["reason"] == "an interrupted write"
        assert path.stat().st_size == size
        assert store.last_position() == 4
        assert verify(store).ok
        assert [r.position for r in store.read_all()] == [1, 2, 3, 4]
    finally:
        store.close()


def test_tail_prints_events_in_global_order(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    a = _session(url)
    b = _session(url)
    assert main(["tail", url]) == EXIT_OK
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["position"] for r in rows] == list(range(1, 9))
    assert [r["event"]["session_id"] for r in rows] == [a] * 4 + [b] * 4
    assert main(["tail", url, "--session", b, "--from", "6"]) == EXIT_OK
    assert [json.loads(x)["position"] for x in capsys.readouterr().out.splitlines()] == [7, 8]


def test_tail_follow_sees_new_events(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    url = f"jsonl:///{tmp_path}/log"
    sid = _session(url)

    def later() -> None:
        time.sleep(0.2)
        store = open_store(url)
        Session.open(store, sid).user_message("live")
        store.close()

    t = threading.Thread(target=later)
    t.start()
    assert main(["tail", url, "--follow", "--idle-timeout", "1.0"]) == EXIT_OK
    t.join()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["position"] for r in rows] == list(range(1, 9))
    assert rows[5]["event"]["text"] == "live"


def test_appends_see_ids_another_writer_added(tmp_path: Path) -> None:
    """Appends skip the rescan of every session only while no one else appended."""
    url = f"jsonl:///{tmp_path}/log"
    mine, theirs = open_store(url), open_store(url)
    a = Session.create(mine)
    for _ in range(3):  # warm: after these, mine's id index is up to date
        a.user_message("mine")
    b = Session.open(theirs, Session.create(theirs).id)
    b.user_message("theirs")
    taken = next(iter(theirs.read(b.id))).id
    with pytest.raises(DuplicateEventId):
        mine.append(a.id, [ev.MessageStarted(
            id=taken, message_id="0190a2b4-0000-7000-8000-00000000000a", role="user")])
    assert mine.find_event(taken) == (b.id, 1)
    a.user_message("still mine")  # and appends go on
    assert mine.version(a.id) == 16
