"""A store this process may only read (a root-owned 0444 file in a 0555 directory)
reads like any other, and every write is refused with ReadOnlyStore before anything
changes: no byte, no mtime, no new -wal, -shm or lock file."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store import open_store
from engine.store.verify import verify
from tests.support.cli_run import run_cli
from tests.support.read_only import CAN_WRITE, as_reader, make_read_only, shared_dir, state

FIXTURE_V2 = Path(__file__).resolve().parents[1] / "fixtures" / "store-v2.db"

# Reads everything, then tries each kind of write; prints what it saw as JSON.
READ_THEN_WRITE = """
import json, sys
from engine.errors import ReadOnlyStore
from engine.store import open_store
from engine.store.verify import verify
store = open_store(sys.argv[1], create=False)
report = verify(store, deep=True)
seen = {"ok": report.ok, "heads": {k: list(v) for k, v in report.heads.items()},
        "positions": [r.position for r in store.read_all()],
        "sessions": sorted(s.id for s in store.sessions())}
first = seen["sessions"][0]
events = list(store.read(first))
writes = {
    "create": lambda: store.create_session("0190b000-0000-7000-8000-00000000dead", created=1),
    "snapshot": lambda: store.put_snapshot(first, "t.v1", 1, b"x"),
    "append": lambda: store.append(first, [events[0].__class__(**{
        **{f: getattr(events[0], f) for f in events[0].__struct_fields__},
        "id": "0190b000-0000-7000-8000-00000000beef", "seq": 0, "session_id": ""})]),
}
seen["writes"] = {}
for name, write in writes.items():
    try:
        write()
        seen["writes"][name] = "written"
    except ReadOnlyStore as exc:
        seen["writes"][name] = str(exc)
store.close()
print(json.dumps(seen))
"""


def _expected(url: str) -> dict[str, object]:
    store = open_store(url, create=False)
    report = verify(store, deep=True)
    seen = {"ok": report.ok, "heads": {k: list(v) for k, v in report.heads.items()},
            "positions": [r.position for r in store.read_all()],
            "sessions": sorted(s.id for s in store.sessions())}
    store.close()
    return seen


@pytest.fixture
def place() -> Iterator[Path]:
    with shared_dir() as d:
        yield d


def _demo(url: str) -> None:
    assert run_cli(["demo", "--store", url]).code == 0


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "sqlite-v2"])
def test_a_read_only_store_reads_and_refuses_every_write(place: Path, kind: str) -> None:
    if kind == "sqlite-v2":
        target = place / "v2.db"
        shutil.copy(FIXTURE_V2, target)
        url = f"sqlite:///{target}"
    else:
        target = place / ("demo.db" if kind == "sqlite" else "jl")
        url = f"{kind}:///{target}"
        _demo(url)
    expected = _expected(url)
    make_read_only(place)
    before = state(place)
    # The reader really has no write access (else this test would prove nothing).
    assert as_reader(CAN_WRITE, str(target)).stdout.strip() == "False"
    assert as_reader(CAN_WRITE, str(place)).stdout.strip() == "False"
    done = as_reader(READ_THEN_WRITE, url)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    writes = seen.pop("writes")
    assert seen == expected
    assert seen["ok"]
    assert seen["positions"]
    for why in writes.values():
        assert why.startswith(f"cannot write {url}: the store is read-only"), writes
    assert state(place) == before  # nothing written, nothing created beside it
    if kind == "sqlite-v2":  # still the schema the release before wrote
        with sqlite3.connect(f"file:{target}?mode=ro", uri=True) as db:
            assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("2",)


def _wal_copy(place: Path) -> Path:
    """A database whose last commits are only in its -wal (as a crash leaves it)."""
    source = place / "src.db"
    _demo(f"sqlite:///{source}")
    writer = sqlite3.connect(source)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO meta VALUES ('in-wal', 'yes')")
    writer.commit()
    (place / "ro").mkdir()
    for end in ("", "-wal", "-shm"):
        shutil.copy(f"{source}{end}", place / "ro" / f"db.db{end}")
    writer.close()
    return place / "ro" / "db.db"


def test_committed_rows_in_a_read_only_wal_are_read(place: Path) -> None:
    db = _wal_copy(place)
    assert db.with_name("db.db-wal").stat().st_size > 0
    make_read_only(place / "ro")
    before = state(place / "ro")
    probe = ("import sys; from engine.store import open_store; s = open_store(sys.argv[1], "
             "create=False); print(dict(s.recorder._db.execute('SELECT key, value FROM meta'))"
             "['in-wal'], len(s.sessions()))")
    done = as_reader(probe, f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", "2"]
    assert state(place / "ro") == before


def test_a_wal_without_its_index_in_a_read_only_directory_is_refused_not_read_stale(
        place: Path) -> None:
    db = _wal_copy(place)
    db.with_name("db.db-shm").unlink()
    make_read_only(place / "ro")
    before = state(place / "ro")
    done = as_reader(CLI_VERIFY, str(db))
    assert done.returncode == 5, done.stderr
    first = done.stderr.splitlines()[0]
    assert f"{db}-wal holds committed rows" in first
    assert "-shm" in first
    assert state(place / "ro") == before


CLI_VERIFY = "import sys; from engine.cli import main; sys.exit(main(['verify', sys.argv[1]]))"


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_a_store_that_cannot_be_created_says_so(place: Path, scheme: str) -> None:
    make_read_only(place)
    url = f"{scheme}:///{place / 'new'}"
    probe = ("import sys; from engine.store import open_store\n"
             "try:\n    open_store(sys.argv[1])\n"
             "except Exception as e:\n    print(type(e).__name__, e)")
    done = as_reader(probe, url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"StoreError cannot create {url}: "), done.stdout
    assert "cannot be read" not in done.stdout
    assert not (place / "new").exists()
