"""`verify --fast` proves every event's content (issue 27 item 2).

The attack: edit an event inside a sealed, compressed block and recompute only the
block's link, which needs no key on an unkeyed store. The block still ends at its
stored last hash, so a walk that trusted the block link alone reported "anchors
hold" and `show` printed the forged text. The chain walk now recomputes every
event's chain hash from the stored events, so the forgery fails at the block.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from engine.cli import EXIT_CORRUPT
from engine.events import TextDelta
from engine.session import Session, StepClock
from engine.store import anchor, blocks, jsonl_blocks, open_store, packed
from engine.store.chain import GENESIS, Chain
from tests.support.cli_run import run_cli

DELTAS = 400


def _stream(url: str) -> str:
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock())
        m = s.start_message("assistant")
        text = s.add_text(m)
        for i in range(DELTAS):
            s.text_delta(text, f"word{i} ")
        s.end_part(text)
        s.complete_message(m, finish="stop")
        return s.id
    finally:
        store.close()


def _forge_sqlite(path: Path, sid: str) -> int:
    """Edit the fourth event of the first sealed block and reseal it with a correct
    unkeyed block link; returns the block's first seq."""
    db = sqlite3.connect(path)
    last_seq, body = next((ls, bytes(b)) for ls, b in db.execute(
        "SELECT last_seq, body FROM blocks ORDER BY last_seq") if bytes(b)[:1] == b"\x03")
    head = blocks.sealed_head(body)
    events = [msgspec.msgpack.decode(r) for r in blocks.raw_events(body, sid)]
    assert events[3]["type"] == "text.delta"
    events[3]["delta"] = "FORGED "
    forged = blocks.seal(Chain(None).link, sid, GENESIS, first=head.first,
                         canon=[msgspec.msgpack.encode(e) for e in events],
                         last_hash=head.last_hash, maxv=head.maxv)
    assert blocks.link_holds(Chain(None).link, sid, GENESIS, forged)
    with db:
        db.execute("UPDATE blocks SET body=? WHERE last_seq=?", (forged, last_seq))
    db.close()
    return head.first


def _forge_jsonl(root: Path, sid: str) -> int:
    path = root / "sessions" / f"{sid}.blocks"
    data = path.read_bytes()
    refs, bad = jsonl_blocks.scan(data, 0, 1)
    assert bad is None
    assert refs
    ref = refs[0]
    member = data[ref.offset:ref.offset + ref.length]
    events = packed.unpack_json(jsonl_blocks.payload(member), sid, ref.first_seq)
    assert isinstance(events[3], TextDelta)
    events[3] = msgspec.structs.replace(events[3], delta="FORGED ")
    forged = jsonl_blocks.encode(events, sid, ref.head, ref.positions,
                                 link=Chain(None).link, prev=GENESIS)
    path.write_bytes(data[:ref.offset] + forged + data[ref.offset + ref.length:])
    return ref.first_seq


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_an_event_forged_inside_a_relinked_block_fails_the_fast_walk(
        kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/f.db" if kind == "sqlite" else f"jsonl:///{tmp_path}/log"
    sid = _stream(url)
    taken = run_cli(["anchor", url])
    taken.assert_clean()
    kept = tmp_path / "anchors.txt"
    kept.write_text(taken.out)
    assert run_cli(["verify", url, "--fast", "--against", str(kept)]).code == 0
    first = (_forge_sqlite(tmp_path / "f.db", sid) if kind == "sqlite"
             else _forge_jsonl(tmp_path / "log", sid))
    assert "FORGED" in run_cli(["show", url, "--session", sid]).out  # the forgery reads
    store = open_store(url, create=False)
    try:
        for deep in (False, True):
            report = anchor.check(store, anchor.parse_many(kept.read_text()), deep=deep)
            assert report.first is not None, deep
            assert (report.first.session_id, report.first.seq) == (sid, first)
    finally:
        store.close()
    for extra in (["--fast"], ["--fast", "--against", str(kept)], []):
        done = run_cli(["verify", url, *extra])
        done.assert_clean()
        assert done.code == EXIT_CORRUPT, (extra, done)
        assert f"session {sid} seq {first}:" in done.err
        assert "hold" not in done.out
