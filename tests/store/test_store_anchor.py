"""Anchors catch what the chain cannot: a tail cut (or rewritten) together with the head
record beside the log, here done the strongest way, by restoring an older copy of the
whole store (files, or every table's rows)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import KeyRequired
from engine.session import Session, StepClock
from engine.store import anchor, open_store
from engine.store.verify import verify
from tests.support.cli_run import run_cli

KEY = b"0123456789abcdef-anchor-key"
PG_TABLES = ("convlog_meta", "convlog_sessions", "convlog_blocks", "convlog_log", "convlog_ids",
             "convlog_snapshots", "convlog_position")


def _backup(url: str, tmp_path: Path) -> Callable[[], None]:
    """Save the whole store now; the returned function puts it back exactly."""
    if url.startswith("sqlite:///"):
        db = Path(url[len("sqlite:///"):])
        saved = {p: p.read_bytes() for p in db.parent.glob(db.name + "*")}

        def restore_sqlite() -> None:
            for p in db.parent.glob(db.name + "*"):
                p.unlink()
            for p, data in saved.items():
                p.write_bytes(data)
        return restore_sqlite
    if url.startswith("jsonl:///"):
        root = Path(url[len("jsonl:///"):])
        copy = tmp_path / "backup"
        shutil.copytree(root, copy)

        def restore_jsonl() -> None:
            shutil.rmtree(root)
            shutil.copytree(copy, root)
        return restore_jsonl
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url, autocommit=True) as conn:
        rows = {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in PG_TABLES}

    def restore_pg() -> None:
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            for t, saved_rows in rows.items():
                conn.execute(f"DELETE FROM {t}")
                for row in saved_rows:
                    marks = ", ".join(["%s"] * len(row))
                    conn.execute(f"INSERT INTO {t} VALUES ({marks})", row)
    return restore_pg


def _turn(session: Session, words: list[str]) -> None:
    mid = session.start_message("assistant")
    part = session.add_text(mid)
    for w in words:
        session.text_delta(part, w)
    session.end_part(part)
    session.complete_message(mid)


def _scenario(url: str, tmp_path: Path, *, key: bytes | None = None
              ) -> tuple[str, list[anchor.Anchor], Callable[[], None]]:
    """A session of two turns, anchored after the second; returns the restore of the
    store as it was after the first turn (a consistent, shorter log)."""
    store = open_store(url, key=key)
    try:
        s = Session.create(store, clock=StepClock())
        _turn(s, ["one ", "two"])
    finally:
        store.close()
    restore = _backup(url, tmp_path)
    store = open_store(url, key=key)
    try:
        _turn(Session.open(store, s.id), ["three ", "four"])
        taken = anchor.take(store)
    finally:
        store.close()
    return s.id, taken, restore


def test_a_restored_older_store_is_sound_alone_and_caught_by_an_anchor(
        durable_url: str, tmp_path: Path) -> None:
    sid, taken, restore = _scenario(durable_url, tmp_path)
    assert [(a.session_id, a.seq, a.mac) for a in taken] == [(sid, 12, None)]
    store = open_store(durable_url)
    try:
        assert anchor.check(store, taken).ok
    finally:
        store.close()
    restore()
    store = open_store(durable_url, create=False)
    try:
        assert verify(store).ok  # the chain and the head record agree: nothing to see
        report = anchor.check(store, taken)
        assert report.first is not None
        assert (report.first.session_id, report.first.seq) == (sid, 7)
        assert "the anchor records seq 12: the tail was cut" in report.first.reason
        # A rewritten tail (an unkeyed chain recomputed honestly) reaches seq 12 again.
        _turn(Session.open(store, sid), ["forged ", "text"])
        assert verify(store).ok
        report = anchor.check(store, taken)
        assert report.first is not None
        assert (report.first.seq, report.first.reason.split(":")[0]) == (
            12, "the hash differs from the anchor's")
    finally:
        store.close()


def test_the_cli_anchors_and_verifies_against_a_file(durable_url: str, tmp_path: Path) -> None:
    sid, _, restore = _scenario(durable_url, tmp_path)
    done = run_cli(["anchor", durable_url])
    done.assert_clean()
    assert done.out.startswith(f"{anchor.PREFIX}/{sid}/12/")
    kept = tmp_path / "anchors.txt"
    kept.write_text("# kept elsewhere\n" + done.out)
    ok = run_cli(["verify", durable_url, "--against", str(kept)])
    assert (ok.code, ok.out.splitlines()[0].endswith("1 anchor(s) hold")) == (0, True)
    restore()
    cut = run_cli(["verify", durable_url, "--against", str(kept)])
    cut.assert_clean()
    assert cut.code == 4
    assert cut.err.startswith(f"convlog verify: FAILED at session {sid} seq 7: the log ends "
                              "at seq 6 but the anchor records seq 12")
    assert run_cli(["verify", durable_url]).code == 0  # without the anchor: undetectable


def test_a_keyed_anchor_needs_the_key_and_cannot_be_edited(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/k.db"
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    sid, taken, restore = _scenario(url, tmp_path, key=KEY)
    (mark,) = taken
    assert mark.mac is not None
    assert mark.authentic(KEY)
    restore()
    # Whoever rewrites the anchor to match the cut log cannot sign it.
    forged = anchor.Anchor(sid, 6, mark.hash, mark.mac)
    store = open_store(url, key=KEY)
    try:
        report = anchor.check(store, [forged])
        assert report.first is not None
        assert "MAC does not match" in report.first.reason
        assert "tail was cut" in anchor.check(store, [mark]).problems[0].reason
    finally:
        store.close()
    keyless = open_store(url)
    try:
        with pytest.raises(KeyRequired):
            anchor.check(keyless, [mark])
    finally:
        keyless.close()
    done = run_cli(["verify", url, "--against", mark.token()])
    assert (done.code, "keyed" in done.err) == (6, True)
    done = run_cli(["verify", url, "--against", mark.token(), "--key-file", str(key_file)])
    assert done.code == 4


@pytest.mark.parametrize("token", [
    "", "convlog-anchor-1/x/1", "convlog-anchor-1/x/one/00", "convlog-anchor-1/x/1/zz",
    "convlog-anchor-2/x/1/00", "convlog-anchor-1//1/00", "convlog-anchor-1/x/-1/00",
])
def test_a_malformed_anchor_is_a_usage_error_before_any_work(token: str, tmp_path: Path) -> None:
    with pytest.raises(anchor.BadAnchor):
        anchor.parse(token)
    done = run_cli(["verify", f"sqlite:///{tmp_path}/none.db", "--against", token or "x"])
    done.assert_clean()
    assert done.code == 2


def test_tokens_round_trip() -> None:
    a = anchor.Anchor("s-1", 3, bytes(range(16))).signed(KEY)
    assert anchor.parse(a.token()) == a
    assert anchor.parse_many(f"# c\n\n{a.token()}\n") == [a]
    assert anchor.Anchor("s-1", 3, bytes(16)).signed(None).mac is None


def test_a_stripped_mac_on_a_keyed_store_is_refused(tmp_path: Path) -> None:
    """The attack: restore an older copy, then write the anchor file anew with a
    MAC-less token of the restored head (any reader can see it). Without the key
    nobody can sign it, so an unsigned anchor on a keyed store must fail verify."""
    url = f"sqlite:///{tmp_path}/k.db"
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    sid, taken, restore = _scenario(url, tmp_path, key=KEY)
    restore()
    store = open_store(url, key=KEY, create=False)
    try:
        seq, head = verify(store).heads[sid]
        stripped = anchor.Anchor(sid, seq, bytes.fromhex(head))  # no MAC
        report = anchor.check(store, [stripped])
        assert report.first is not None
        assert "carries no MAC" in report.first.reason
        # The genuine, signed anchor still tells the truth about the restore.
        assert "tail was cut" in anchor.check(store, taken).problems[0].reason
    finally:
        store.close()
    kept = tmp_path / "anchors.txt"
    kept.write_text(stripped.token() + "\n")
    done = run_cli(["verify", url, "--key-file", str(key_file), "--against", str(kept)])
    done.assert_clean()
    assert done.code == 4
    assert "carries no MAC" in done.err
    assert "hold" not in done.out


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_anchor_file_without_a_token_is_an_error(text: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    store = open_store(url)
    try:
        _turn(Session.create(store, clock=StepClock()), ["one"])
    finally:
        store.close()
    kept = tmp_path / "anchors.txt"
    kept.write_text(text)
    with pytest.raises(anchor.BadAnchor, match="holds no anchor token"):
        anchor.parse_many(text)
    done = run_cli(["verify", url, "--against", str(kept)])
    done.assert_clean()
    assert (done.code, done.out) == (2, "")
    assert "holds no anchor token" in done.err
