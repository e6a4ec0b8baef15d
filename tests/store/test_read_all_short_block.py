"""A block row whose body holds fewer events than its seqs say (a body swapped or cut
to another valid block): a read by position names the damage as CorruptLog, never an
IndexError, and never returns another event in the missing one's place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.errors import CorruptLog
from engine.session import Session, StepClock
from engine.store import MemoryStore, SQLiteStore
from engine.store.verify import verify


def test_a_block_shorter_than_its_row_is_corrupt_to_read_all(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    source = MemoryStore()
    s = Session.create(source, clock=StepClock())
    s.user_message("one")
    m = s.start_message("assistant")
    part = s.add_text(m)
    for i in range(5):
        s.text_delta(part, f"d{i}")
    sid = s.id
    events = list(source.read(sid))
    store = SQLiteStore(str(path))
    store.create_session(sid, created=s.info.created)
    store.append(sid, events[:1], 0)  # a block of one event
    store.append(sid, events[1:], 1)  # one block holding the rest
    store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT rowid, first_seq, last_seq, body FROM blocks "
                          "ORDER BY first_seq").fetchall()
        long = max(rows, key=lambda r: r[2] - r[1])
        short = min(rows, key=lambda r: r[2] - r[1])
        assert long[2] - long[1] >= 4
        assert short[2] == short[1]
        db.execute("UPDATE blocks SET body=? WHERE rowid=?", (short[3], long[0]))
    db.close()
    store = SQLiteStore(str(path))
    try:
        with pytest.raises(CorruptLog):
            list(store.read_all(session_id=sid))
        assert not verify(store).ok
    finally:
        store.close()
