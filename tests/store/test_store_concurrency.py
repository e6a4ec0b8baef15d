"""Several processes appending to one session: conflicts surface as ConcurrencyError,
``engine.store.retry`` re-reads and retries, and nothing is lost, duplicated or
reordered. Real processes, on every backend that other processes can reach."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import events as ev
from engine.errors import ConcurrencyError
from engine.session import Session
from engine.store import open_store
from engine.store.sqlite import SQLiteRecorder, SQLiteStore
from engine.store.verify import verify

CHILD = Path(__file__).resolve().parents[1] / "support" / "crash_child.py"
SID = "0190a000-0000-7000-8000-0000000c0002"
WRITERS = 4
EACH = 15


def test_processes_race_on_one_session(durable_url: str) -> None:
    store = open_store(durable_url)
    s = Session.create(store, SID)
    s.create_conversation()
    store.close()

    procs = [subprocess.Popen([sys.executable, str(CHILD), "race", durable_url, SID, str(EACH),
                               f"w{w}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w in range(WRITERS)]
    acked: dict[str, list[int]] = {}
    for w, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-3000:]
        acked[f"w{w}"] = [int(x) for x in out.split()]

    store = open_store(durable_url)
    try:
        assert verify(store).ok
        events = list(store.read(SID))
        assert [e.seq for e in events] == list(range(1, 2 + WRITERS * EACH))
        notes = [e for e in events if isinstance(e, ev.TranscriptNoted)]
        assert len(notes) == WRITERS * EACH
        assert len({n.text for n in notes}) == WRITERS * EACH  # none twice
        for writer, seqs in acked.items():
            mine = [n for n in notes if n.text.startswith(f"{writer}-")]
            # Each writer's events are stored in the order it wrote them, at the seqs it got.
            assert [n.text for n in mine] == [f"{writer}-{i}" for i in range(EACH)]
            assert [n.seq for n in mine] == seqs
        assert [r.position for r in store.read_all()] == list(range(1, 2 + WRITERS * EACH))
    finally:
        store.close()


def test_a_stale_writer_gets_a_concurrency_error(durable_url: str) -> None:
    first, second = open_store(durable_url), open_store(durable_url)
    try:
        a = Session.create(first, SID)
        a.create_conversation()
        b = Session.open(second, SID)
        a.note_transcript("a")
        with pytest.raises(ConcurrencyError) as info:
            b.note_transcript("b")
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert [e.seq for e in first.read(SID)] == [1, 2]
    finally:
        first.close()
        second.close()


def test_a_read_skips_blocks_a_concurrent_merge_made_overlap(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Block reads are paged: a merge committed between two pages hands the reader a
    block that covers seqs it already yielded. Each seq must come out once."""
    store = open_store(f"sqlite:///{tmp_path}/log.db")
    assert isinstance(store, SQLiteStore)
    s = Session.create(store)
    for i in range(300):  # enough appends for sealed, merged blocks and a raw tail
        s.user_message(f"m{i}")
    expected = [e.seq for e in store.read(s.id)]
    original = SQLiteRecorder._block_rows

    def with_a_merge_between_pages(self: SQLiteRecorder, sid: int, first: int, last: int
                                   ) -> Iterator[tuple[int, int, bytes]]:
        rows = list(original(self, sid, first, last))
        merged_body = rows[0][2]  # as if rows 0..1 were re-read after a merge
        for k, row in enumerate(rows):
            yield row
            if k == 1:
                yield rows[0][0], rows[1][1], merged_body
                yield rows[1]

    monkeypatch.setattr(SQLiteRecorder, "_block_rows", with_a_merge_between_pages)
    assert [e.seq for e in store.read(s.id)] == expected
    assert [e.seq for e in store.read(s.id, 5)] == expected[4:]
