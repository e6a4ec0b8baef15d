"""The JSONL store's sealed blocks: every event kept once, the chain unchanged, crashes
during a seal lose and duplicate nothing, stores of the previous format open as they
are, and damaged bytes anywhere become typed errors and verify problems."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from benchmarks.workload import START_MS, Workload
from engine import codec
from engine.cli import EXIT_CORRUPT
from engine.errors import ConvlogError
from engine.events import AnyEvent
from engine.session import Session, StepClock
from engine.store import JSONLStore, jsonl_blocks, jsonl_files, open_store, packed
from engine.store.jsonl_blocks import SEAL_AT
from engine.store.verify import verify
from tests.support.cli_run import run_cli, scratch_dir

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE = FIXTURES / "jsonl-v1"


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    """The CLI tests leave structlog filtering below ``error``; see warnings again."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock"}


def _everything(store: JSONLStore) -> dict[str, list[AnyEvent]]:
    return {info.id: list(store.read(info.id)) for info in store.sessions()}


def _record(url: str, events: int = 1500) -> str:
    store = open_store(url)
    try:
        s = Session.create(store, clock=StepClock(START_MS))
        Workload(s, seed=5).run(events)
        s.fork(at=SEAL_AT + 7).user_message("a fork after the first block")
        return s.id
    finally:
        store.close()


def _open(root: Path) -> JSONLStore:
    store = open_store(f"jsonl:///{root}")
    assert isinstance(store, JSONLStore)
    return store


# --------------------------------------------------------------------------- sealing


def test_sealed_sessions_read_verify_and_zcat(tmp_path: Path) -> None:
    root = tmp_path / "log"
    sid = _record(f"jsonl:///{root}")
    store = _open(root)
    try:
        events = list(store.read(sid))
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        tail = (root / "sessions" / f"{sid}.jsonl").read_bytes().splitlines()
        assert len(tail) < SEAL_AT  # the rest is sealed
        report = verify(store)
        assert report.ok, report.problems
        assert report.events == len(events) + 4  # and the fork's own user message
        # Ranges across block boundaries are slices of the whole.
        for first, last in ((1, 1), (SEAL_AT - 2, SEAL_AT + 3), (700, 1100),
                            (len(events) - 3, len(events) + 5)):
            assert list(store.read(sid, first, last)) == events[first - 1:last]
        e = events[SEAL_AT + 10]
        assert store.find_event(e.id) == (sid, e.seq)
        assert store.seq_at_time(sid, e.time) == e.seq
        records = list(store.read_all())
        assert [r.position for r in records] == list(range(1, len(records) + 1))
        assert [r.event for r in records if r.event.session_id == sid] == events
        fork = next(i.id for i in store.sessions() if i.id != sid)
        assert list(store.read(fork))[:SEAL_AT + 7] == events[:SEAL_AT + 7]
    finally:
        store.close()
    # zcat reads the blocks: one JSON object per block, the text in plain sight.
    docs = gzip.decompress((root / "sessions" / f"{sid}.blocks").read_bytes()).splitlines()
    assert sum(len(json.loads(doc)["codes"]) for doc in docs) + len(tail) == len(events)
    first = json.loads(docs[0])
    assert first["kinds"]
    assert first["bodies"]
    # The streamed text of the block's events, joined: prose, not a list of fragments.
    streamed = [getattr(e, name) for e in events[:len(first["codes"])]
                if (name := packed._KINDS[type(e)].bare)]
    assert streamed
    assert first["text"] == "".join(streamed)


def test_todays_jsonl_stores_open_read_and_verify_unchanged(tmp_path: Path) -> None:
    """tests/fixtures/jsonl-v1 was written by the release before sealed blocks."""
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root)
    before = _files(root)
    want: dict[str, list[AnyEvent]] = {}
    for path in sorted((root / "sessions").glob("*.jsonl")):
        lines = path.read_bytes().splitlines()
        want[path.name[:-len(".jsonl")]] = [
            codec.decode_json(msgspec.json.encode(json.loads(line)["event"])) for line in lines]
    store = _open(root)
    try:
        got = _everything(store)
        main = max(want, key=lambda k: len(want[k]))
        assert got[main] == want[main]
        fork = next(k for k in want if k != main)
        info = store.session_info(fork)
        assert info.fork_seq is not None
        assert got[fork] == want[main][:info.fork_seq] + want[fork]
        assert verify(store).ok
        assert _files(root) == before  # reading and verifying wrote nothing
        # The first append seals the old tail (it holds more than a block's worth).
        Session.open(store, main).user_message("after the upgrade")
        assert (root / "sessions" / f"{main}.blocks").exists()
        assert list(store.read(main))[:len(want[main])] == want[main]
        report = verify(store)
        assert report.ok, report.problems
        assert list(store.read(fork)) == got[fork]
    finally:
        store.close()
    store = _open(root)
    try:
        assert verify(store).ok
        assert store.version(main) == len(want[main]) + 4
    finally:
        store.close()


def _member_versions(path: Path) -> list[int]:
    """The index version of each member of a ``.blocks`` file (2: with a block link)."""
    data = path.read_bytes()
    refs, bad = jsonl_blocks.scan(data, 0, 1)
    assert bad is None
    return [2 if ref.link else 1 for ref in refs]


def _fixture_events(root: Path) -> dict[str, list[AnyEvent]]:
    """Each session's own events, decoded straight from the files (blocks and tail)."""
    out: dict[str, list[AnyEvent]] = {}
    for meta in sorted((root / "sessions").glob("*.meta.json")):
        sid = meta.name[:-len(".meta.json")]
        events: list[AnyEvent] = []
        base = json.loads(meta.read_bytes()).get("fork_seq") or 0
        blocks = root / "sessions" / f"{sid}.blocks"
        if blocks.exists():
            for doc in gzip.decompress(blocks.read_bytes()).splitlines():
                events += packed.unpack_json(doc + b"\n", sid, base + len(events) + 1)
        for line in (root / "sessions" / f"{sid}.jsonl").read_bytes().splitlines():
            event = codec.decode_json(msgspec.json.encode(json.loads(line)["event"]))
            if not events or event.seq > events[-1].seq:
                events.append(event)
        out[sid] = events
    return out


@pytest.mark.parametrize(("name", "version"), [("jsonl-v1-blocks", 1), ("jsonl-v2", 2)])
def test_sealed_stores_of_each_format_open_read_and_verify(
        tmp_path: Path, name: str, version: int) -> None:
    """``jsonl-v1-blocks`` was written by the release of store format 1 (members without
    a block link), ``jsonl-v2`` by format 2 (tests/fixtures/make_jsonl_blocks.py)."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    (root / "sessions" / "lock").unlink(missing_ok=True)
    before = _files(root)
    main = "0190c000-0000-7000-8000-0000000000a1"
    versions = _member_versions(root / "sessions" / f"{main}.blocks")
    assert len(versions) >= 2
    assert set(versions) == {version}
    want = _fixture_events(root)
    store = _open(root)
    try:
        got = _everything(store)
        assert got[main] == want[main]
        assert len(got[main]) > 2 * SEAL_AT
        fork = next(i for i in store.sessions() if i.parent == main)
        assert fork.fork_seq is not None
        assert SEAL_AT < fork.fork_seq < 2 * SEAL_AT
        assert got[fork.id] == want[main][:fork.fork_seq] + want[fork.id]
        deep, fast = verify(store), verify(store, deep=False)
        assert deep.ok, deep.problems
        assert fast.ok, fast.problems
        assert deep.heads == fast.heads
        assert deep.events == fast.events
        assert _files(root) == before  # reading and verifying wrote nothing
        # The next seal writes index version 2 members (the store says format 3).
        s = Session.open(store, main)
        for i in range(SEAL_AT):
            s.user_message(f"after the upgrade {i}")
        after = _member_versions(root / "sessions" / f"{main}.blocks")
        assert after[:len(versions)] == versions
        assert set(after[len(versions):]) == {2}
        assert json.loads((root / "convlog.json").read_bytes())["version"] == 3
        assert list(store.read(main))[:len(want[main])] == want[main]
        for deep_check in (True, False):
            report = verify(store, deep=deep_check)
            assert report.ok, report.problems
    finally:
        store.close()


def test_a_format_1_store_without_seals_stays_format_1(tmp_path: Path) -> None:
    """Appends that seal nothing keep the files readable by the release before."""
    root = tmp_path / "v1"
    shutil.copytree(FIXTURES / "jsonl-v1-blocks", root)
    store = _open(root)
    try:
        other = "0190c000-0000-7000-8000-0000000000b2"
        Session.open(store, other).user_message("one more line")
        assert verify(store).ok
    finally:
        store.close()
    assert json.loads((root / "convlog.json").read_bytes())["version"] == 1


@pytest.mark.parametrize("which", ["root", "fork"])
def test_a_wrong_genesis_in_the_meta_file_is_caught(tmp_path: Path, which: str) -> None:
    """A session's meta file records where its chain starts; appends continue from it
    while the session has no events, so verify compares it with the lineage."""
    root = tmp_path / "log"
    shutil.copytree(FIXTURES / "jsonl-v2", root)
    store = _open(root)
    try:
        main = "0190c000-0000-7000-8000-0000000000a1"
        target = main if which == "root" else next(
            i.id for i in store.sessions() if i.parent == main)
        first = 1 if which == "root" else (store.session_info(target).fork_seq or 0) + 1
    finally:
        store.close()
    meta_path = root / "sessions" / f"{target}.meta.json"
    meta = json.loads(meta_path.read_bytes())
    meta["genesis"] = "ab" * 16
    meta_path.write_text(json.dumps(meta))
    store = _open(root)
    try:
        for deep in (True, False):
            report = verify(store, target, deep=deep)
            assert report.first is not None
            assert (report.first.session_id, report.first.seq) == (target, first)
            assert "genesis" in report.first.reason
    finally:
        store.close()


# --------------------------------------------------------------------------- crashes


def _seal_cut_short(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[AnyEvent]]:
    """A session whose last seal wrote its blocks and then died before the tail was
    replaced (the tail still holds the sealed lines)."""
    real = jsonl_files.write_atomic

    def dies_on_tails(path: Path, data: bytes, *, durable: bool) -> None:
        if path.suffix == ".jsonl":
            raise OSError("killed before the tail was replaced")
        real(path, data, durable=durable)

    store = open_store(f"jsonl:///{root}")
    s = Session.create(store, clock=StepClock(START_MS))
    with monkeypatch.context() as m:
        m.setattr(jsonl_files, "write_atomic", dies_on_tails)
        Workload(s, seed=9).run(600)
    events = list(store.read(s.id))
    store.close()
    return s.id, events


def test_a_seal_cut_short_loses_and_duplicates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "log"
    sid, events = _seal_cut_short(root, monkeypatch)
    tail = (root / "sessions" / f"{sid}.jsonl").read_bytes().splitlines()
    assert (root / "sessions" / f"{sid}.blocks").exists()
    assert len(tail) == len(events)  # every line still there, a block holds some too
    before = _files(root)
    store = _open(root)
    try:
        assert list(store.read(sid)) == events
        assert store.version(sid) == len(events)
        assert [r.event for r in store.read_all()] == events
        assert verify(store).ok
        assert _files(root) == before  # reads leave the half seal alone
        with capture_logs() as logs:
            Session.open(store, sid).user_message("next")
        assert "jsonl_seal_finished" in [e["event"] for e in logs]
        after = list(store.read(sid))
        assert after[:len(events)] == events
        assert len(after) == len(events) + 4
        assert verify(store).ok
    finally:
        store.close()


def test_a_torn_seal_is_ignored_by_reads_and_moved_aside_by_repair(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "log"
    sid, events = _seal_cut_short(root, monkeypatch)
    blocks = root / "sessions" / f"{sid}.blocks"
    data = blocks.read_bytes()
    blocks.write_bytes(data[:len(data) - 9])  # the last member's trailer never landed
    before = _files(root)
    store = _open(root)
    try:
        assert list(store.read(sid)) == events
        assert verify(store).ok
        assert _files(root) == before
        store.repair()
        assert (root / "sessions" / f"{sid}.blocks.corrupt").exists()
        assert list(store.read(sid)) == events
        Session.open(store, sid).user_message("after the repair")
        assert verify(store).ok
        assert list(store.read(sid))[:len(events)] == events
    finally:
        store.close()


# --------------------------------------------------------------------------- damage

_RUNS = itertools.count()


@pytest.fixture(scope="module")
def pristine() -> Iterator[tuple[Path, dict[str, list[AnyEvent]]]]:
    with scratch_dir("jsonl-blocks") as base:
        root = base / "pristine"
        _record(f"jsonl:///{root}", events=700)
        store = _open(root)
        try:
            yield root, _everything(store)
        finally:
            store.close()


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from([".blocks", ".jsonl"]), where=st.integers(0, 1 << 30),
       how=st.sampled_from(["flip", "truncate"]), mask=st.integers(1, 255))
def test_damaged_bytes_are_typed_errors_and_verify_problems(
        pristine: tuple[Path, dict[str, list[AnyEvent]]], which: str, where: int, how: str,
        mask: int) -> None:
    src, original = pristine
    root = src.parent / f"damaged-{next(_RUNS)}"
    shutil.copytree(src, root)
    try:
        paths = sorted((root / "sessions").glob(f"*{which}"))
        path = paths[where % len(paths)]
        data = bytearray(path.read_bytes())
        if not data:
            return
        at = (where >> 3) % len(data)
        if how == "flip":
            data[at] ^= mask
        else:
            del data[at:]
        path.write_bytes(bytes(data))
        before = _files(root)
        outcome = _damaged_outcome(root)
        assert _files(root) == before  # reads and verify never write
        for ok in (outcome["ok"], outcome["fast_ok"]):  # the deep check and the walk
            if outcome["read"] is not None and ok:
                assert outcome["read"] == original  # verify passes only when nothing changed
            if outcome["read"] is None:
                assert not ok  # what reads refuse, verify reports
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _damaged_outcome(root: Path) -> dict[str, Any]:
    try:
        store = _open(root)
    except ConvlogError:
        return {"read": None, "ok": False, "fast_ok": False}
    try:
        try:
            read: dict[str, list[AnyEvent]] | None = _everything(store)
        except ConvlogError:
            read = None
        report, fast = verify(store), verify(store, deep=False)
        for problem in report.problems + fast.problems:
            assert problem.seq >= 0
        return {"read": read, "ok": report.ok, "fast_ok": fast.ok}
    finally:
        store.close()


@pytest.fixture(scope="module")
def pristine_v2() -> Iterator[Path]:
    with scratch_dir("jsonl-blocks-v2") as base:
        root = base / "pristine"
        _record(f"jsonl:///{root}", events=900)
        yield root


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.integers(0, 1 << 30), how=st.sampled_from(["flip", "truncate"]),
       mask=st.integers(1, 255), fast=st.booleans())
def test_damaged_linked_blocks_fail_verify_with_one_line(
        pristine_v2: Path, where: int, how: str, mask: int, fast: bool) -> None:
    """Every byte of a format 2 member is checked (the fixed header byte for byte, the
    rest by its CRC or the block link): any flip or cut of a ``.blocks`` file is exit 4
    with the first bad seq, from the chain walk as from the deep check, never a
    traceback, and nothing is written."""
    root = pristine_v2.parent / f"damaged-{next(_RUNS)}"
    shutil.copytree(pristine_v2, root)
    try:
        path = sorted((root / "sessions").glob("*.blocks"))[0]
        data = bytearray(path.read_bytes())
        assert _member_versions(path) == [2] * len(_member_versions(path))
        at = where % len(data)
        if how == "flip":
            data[at] ^= mask
        else:
            del data[at:]
        path.write_bytes(bytes(data))
        before = _files(root)
        outcome = run_cli(["verify", f"jsonl:///{root}"] + (["--fast"] if fast else []))
        outcome.assert_clean()
        assert outcome.code == EXIT_CORRUPT, outcome
        assert outcome.err.startswith("convlog verify: FAILED at session "), outcome
        assert _files(root) == before
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_anchor_inside_a_linked_block_is_checked_by_the_chain_walk(tmp_path: Path) -> None:
    root = tmp_path / "log"
    shutil.copytree(FIXTURES / "jsonl-v2", root)
    main = "0190c000-0000-7000-8000-0000000000a1"
    store = _open(root)
    try:
        seq = SEAL_AT // 2  # inside the first sealed member
        right = store._hash_at(main, seq)
        assert right is not None
        for deep in (True, False):
            assert verify(store, main, anchored={main: (seq, right)}, deep=deep).ok
            wrong = verify(store, main, anchored={main: (seq, bytes(16))}, deep=deep)
            assert wrong.first is not None
            assert wrong.first.seq == seq
            assert "anchor" in wrong.first.reason
    finally:
        store.close()
