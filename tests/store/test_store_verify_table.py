"""docs/stores.md's "What verify catches", row by row (the rows marked †), at both
depths (``verify`` and ``verify --fast``), on an unkeyed and a keyed store, with and
without an anchor. A SQLite store with sealed blocks; each attack starts from the
same bytes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from engine.session import Session, StepClock
from engine.store import anchor, blocks, open_store
from engine.store.chain import GENESIS, Chain
from engine.store.verify import verify

KEY = b"0123456789abcdef-table-key"


def _files(db: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in db.parent.glob(db.name + "*")}


def _put(db: Path, files: dict[Path, bytes]) -> None:
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    for p, data in files.items():
        p.write_bytes(data)


def _first_sealed(db: Path) -> tuple[int, bytes]:
    with sqlite3.connect(db) as conn:
        return next((int(ls), bytes(b)) for ls, b in conn.execute(
            "SELECT last_seq, body FROM blocks ORDER BY last_seq") if bytes(b)[:1] == b"\x03")


def _set_block(db: Path, last_seq: int, body: bytes) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE blocks SET body=? WHERE last_seq=?", (body, last_seq))
    conn.close()


def _flip(db: Path, sid: str) -> None:
    last_seq, body = _first_sealed(db)
    at = len(body) - 20  # inside the compressed payload
    _set_block(db, last_seq, body[:at] + bytes([body[at] ^ 0x01]) + body[at + 1:])


def _relink(db: Path, sid: str) -> None:
    """Edit an event in a sealed block and recompute the block's link the only way
    someone without the key can: unkeyed."""
    last_seq, body = _first_sealed(db)
    head = blocks.sealed_head(body)
    events = [msgspec.msgpack.decode(r) for r in blocks.raw_events(body, sid)]
    events[5]["delta"] = "FORGED "
    _set_block(db, last_seq, blocks.seal(
        Chain(None).link, sid, GENESIS, first=head.first,
        canon=[msgspec.msgpack.encode(e) for e in events], last_hash=head.last_hash,
        maxv=head.maxv))


@pytest.fixture(params=[False, True], ids=["unkeyed", "keyed"])
def keyed(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize("deep", [True, False], ids=["deep", "fast"])
def test_the_table_rows(tmp_path: Path, keyed: bool, deep: bool) -> None:
    db = tmp_path / "t.db"
    key = KEY if keyed else None
    store = open_store(f"sqlite:///{db}", key=key)
    s = Session.create(store, clock=StepClock())
    text = s.add_text(s.start_message("assistant"))
    for i in range(300):
        s.text_delta(text, f"w{i} ")
    store.close()
    older = _files(db)
    store = open_store(f"sqlite:///{db}", key=key)
    s = Session.open(store, s.id)
    for i in range(300):
        s.text_delta(text, f"v{i} ")
    taken = anchor.take(store)
    store.close()
    sound = _files(db)

    def check(change: Callable[[Path, str], None] | None, anchors: list[anchor.Anchor]
              ) -> bool:
        _put(db, sound)
        if change is not None:
            change(db, s.id)
        st = open_store(f"sqlite:///{db}", key=key, create=False)
        try:
            return (anchor.check(st, anchors, deep=deep) if anchors
                    else verify(st, deep=deep)).ok
        finally:
            st.close()

    assert check(None, [])
    assert check(None, taken)
    # A byte flipped; an event edited in a sealed block with its link recomputed:
    # caught by the chain alone, keyed or not, at both depths.
    for attack in (_flip, _relink):
        assert not check(attack, []), attack.__name__
        assert not check(attack, taken), attack.__name__

    def restore(db: Path, sid: str) -> None:
        _put(db, older)

    # An older copy restored: a sound, shorter log; only the anchor catches it.
    assert check(restore, [])
    assert not check(restore, taken)
    # The anchor file rewritten to the restored head without a MAC: refused on a
    # keyed store; trusted as written on an unkeyed one (documented).
    _put(db, older)
    st = open_store(f"sqlite:///{db}", key=key, create=False)
    seq, head = verify(st).heads[s.id]
    st.close()
    stripped = [anchor.Anchor(s.id, seq, bytes.fromhex(head))]
    assert check(restore, stripped) is (not keyed)
