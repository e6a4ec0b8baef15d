"""``jsonl:///dir``: one human-readable, greppable JSON-lines file per session.

Layout of the directory::

    convlog.json                 format, version and hash-chain kind of the store
    lock                         flock(2) target: one writer at a time, across processes
    txn                          the last write: old and new global position, files touched
    sessions/<id>.jsonl          the live tail: {"pos":..,"hash":..,"event":{..}} per line
    sessions/<id>.blocks         sealed events: gzip members (``zcat`` reads them), see
                                 :mod:`engine.store.jsonl_blocks`
    sessions/<id>.meta.json      created, parent, fork_seq, where the hash chain starts
    sessions/<id>.head           "<version> <hash>" after the last append (catches a cut tail)
    sessions/<id>.jsonl.corrupt  bytes a crash left behind, moved out of the log
    snapshots/<id>/<name>/<seq>  snapshot bodies (names encoded: ``jsonl_files.snapshot_file_name``)

A write, under the lock: record the intent in ``txn`` (fsynced), append the lines
and fsync them, then mark ``txn`` done. Whoever takes the lock next checks an
unfinished ``txn``: complete lines stay, otherwise every file it names is cut back
to its size before the write, the cut bytes are moved to ``<file>.corrupt`` and a
warning is logged. So a batch is all or nothing, global positions stay gapless,
and a torn line is never silently dropped nor kept. Session ids become file names,
which is why ids are restricted to a safe alphabet (no ``/``, no ``..``).

Sealing: once a session's tail holds ``SEAL_AT`` events or ``SEAL_BYTES``, the writer
(still under the lock, after the write is done) packs the tail into new members of
up to ``SEAL_AT`` events appended to ``<id>.blocks`` (fsynced), then replaces the
tail file by an empty one (renamed over it). A crash between the two leaves tail lines that a
block also holds: reads skip them (the first line's ``seq`` says where the tail
starts) and the next writer drops them. A crash while appending leaves a torn last
member whose events are still in the tail: reads ignore it, the next writer (or
``repair``) moves it to ``<id>.blocks.corrupt``. A block is sealed only when its
events, as decoded, reproduce the stored hashes, so the chain never changes.
Stores written before blocks existed are plain tails and open unchanged; stores
of format 1 (members without a block link) or 2 open, read and verify as they are,
and become format 3 at the first seal this release writes into them (sealed
members are the only place a packed payload is written; see ``FORMAT_VERSION``).

This module is the store: ``JSONLStore`` is the shared pipeline
(:class:`~engine.store.composed.ComposedStore`) over :class:`JSONLRecorder` (the
writer lock, transactions, appends and reads), verified by
:class:`~engine.store.jsonl_verify.JSONLReader` (the walk over the files the recorder
hands it). Its other jobs have their own modules: ``jsonl_files`` (``convlog.json``, ``txn``,
snapshots), ``jsonl_recovery`` (finishing or undoing a crashed write, torn tails),
``jsonl_lines`` (the tail's line codec), ``jsonl_tail`` (reading a session's files
incrementally), ``jsonl_seal`` and ``jsonl_blocks`` (sealing into gzip members),
``jsonl_verify`` (the verification walk), and ``legacy`` (formats 1 and 2).
"""

from __future__ import annotations

import errno
import fcntl
import heapq
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import msgspec

from engine.codec import (
    from_stored,
    upcasting_active,
    upgrade,
)
from engine.errors import (
    CorruptLog,
    EventDecodeError,
    ReadOnlyStore,
    SessionExists,
    StoreError,
    StoreUnreadable,
    UnknownSession,
)
from engine.events import AnyEvent, Event
from engine.logging import get_logger
from engine.store import (
    jsonl_blocks,
    jsonl_files,
    jsonl_lines,
    jsonl_recovery,
    jsonl_seal,
    jsonl_verify,
)
from engine.store.base import (
    BATCHED,
    SYNC,
    Prepared,
    Record,
    SessionInfo,
    check_id,
)
from engine.store.batching import DEFAULT_BATCH_EVENTS, DEFAULT_BATCH_MS, GroupCommit
from engine.store.chain import HASH_BYTES, Chain
from engine.store.codec_protocol import MemberCodec
from engine.store.composed import ComposedStore
from engine.store.jsonl_blocks import BadMember, BlockRef
from engine.store.jsonl_files import FORMAT, FORMAT_VERSION, SnapshotFiles, Txn
from engine.store.jsonl_tail import TailState

log = get_logger("convlog.store.jsonl")

# (The format: engine.store.jsonl_files.)
__all__ = ["FORMAT", "FORMAT_VERSION", "JSONLRecorder", "JSONLStore"]

class _Meta(msgspec.Struct, omit_defaults=True):
    id: str
    created: int
    genesis: str
    parent: str | None = None
    fork_seq: int | None = None


_meta_dec = msgspec.json.Decoder(_Meta)


class _FileLock:
    """A :class:`JSONLRecorder`'s writer lock: its thread lock, then ``flock(2)`` on the
    lock file (across processes) and recovery of an unfinished write. Re-entrant;
    the file lock stays held while a batched window has lines pending."""

    __slots__ = ("owned", "store")

    def __init__(self, store: JSONLRecorder) -> None:
        self.store = store
        self.owned: list[bool] = []  # per nested entry: did it take the file lock

    def __enter__(self) -> None:
        store = self.store
        store._refuse_read_only()  # every write takes this lock first
        store._lock.acquire()
        if store._flocked:
            self.owned.append(False)
            return
        try:
            fcntl.flock(store._lock_fd, fcntl.LOCK_EX)
            store._flocked = True
            try:
                store._recover()
            except BaseException:
                self._unlock()
                raise
        except BaseException:
            store._lock.release()
            raise
        self.owned.append(True)

    def __exit__(self, *exc: object) -> None:
        try:
            if self.owned.pop():
                self._unlock()
        finally:
            self.store._lock.release()

    def _unlock(self) -> None:
        store = self.store
        if not store._pending:
            store._flocked = False
            fcntl.flock(store._lock_fd, fcntl.LOCK_UN)


class JSONLStore(ComposedStore):
    """``jsonl:///dir``: the pipeline over a :class:`JSONLRecorder`, verified by a
    :class:`~engine.store.jsonl_verify.JSONLReader`."""

    recorder: JSONLRecorder

    def __init__(self, directory: str, *, url: str | None = None, durability: str = SYNC,
                 batch_ms: float = DEFAULT_BATCH_MS, batch_events: int = DEFAULT_BATCH_EVENTS,
                 key: bytes | None = None, max_event_bytes: int | None = None,
                 codec: MemberCodec = jsonl_blocks) -> None:
        self._configure(url or f"jsonl:///{directory}", durability=durability, key=key,
                        max_event_bytes=max_event_bytes)
        recorder = JSONLRecorder(directory, url=self.url, durability=self.durability,
                                 chain=self.chain, batch_ms=batch_ms, batch_events=batch_events,
                                 codec=codec)
        self._compose(recorder, jsonl_verify.JSONLReader(recorder))
        self._refuse = recorder.refuse
        self.root = recorder.root
        self.read_only = recorder.read_only

    # The backend's own verbs (the CLI's repair and the torn-tail report), besides the pipeline.
    def torn_tails(self) -> list[tuple[str, int, int]]:
        """(session id, bytes kept, bytes cut) of every session file whose last line is
        cut off or unreadable. Reads nothing but the files and changes nothing."""
        return self.recorder.torn_tails()

    def repair(self, *, dry_run: bool = False) -> list[tuple[str, int, int]]:
        """Move every torn last line to ``<file>.corrupt`` (nothing is deleted) and finish
        seals a crash cut short; returns the torn lines that were (with ``dry_run``:
        would be) moved, as :meth:`torn_tails` lists them."""
        return self.recorder.repair(dry_run=dry_run)

    def corrupt_files(self) -> list[Path]:
        return self.recorder.corrupt_files()


class JSONLRecorder:
    """The session files of one store directory: their lock, transactions, appends and
    reads (see the module doc); nothing of the append pipeline. Sealed members are
    made, found and decoded by ``codec`` (:mod:`engine.store.jsonl_blocks` by default)."""

    def __init__(self, directory: str, *, url: str, durability: str, chain: Chain,
                 batch_ms: float = DEFAULT_BATCH_MS, batch_events: int = DEFAULT_BATCH_EVENTS,
                 codec: MemberCodec = jsonl_blocks) -> None:
        self.url, self.durability, self.chain, self.codec = url, durability, chain, codec
        self.refuse: str | None = None  # why appends are refused (a keyed store, no key)
        self.root = Path(directory)
        if not self.root.parent.is_dir():
            raise StoreError(f"cannot open {self.url}: directory {self.root.parent} does not exist")
        self._sessions_dir = self.root / "sessions"
        self._snapshots = SnapshotFiles(self.root / "snapshots")
        self._lock = threading.RLock()
        self._states: dict[str, TailState] = {}
        self._block_cache: dict[tuple[str, int, int], bytes] = {}  # the last block read
        self._metas: dict[str, SessionInfo] = {}
        self._ids: dict[str, tuple[str, int, int]] = {}
        self._flocked = False
        self._format = FORMAT_VERSION  # of the files, from convlog.json
        self._write_lock = _FileLock(self)
        self._lock_fd = -1
        self._last = 0  # last global position (valid while the file lock is held)
        # Every event up to this global position is in _ids (-1: refresh every session).
        self._indexed = -1
        self._pending: dict[str, list[bytes]] = {}  # batched window: lines not yet written
        self._pending_heads: dict[str, tuple[int, bytes, int]] = {}
        self._window_old = 0
        self.read_only = False
        try:
            self.read_only = self._open_lock_file()
            if self.read_only:
                self._open_read_only()
            else:
                with self._file_lock():
                    self.refuse = self._init_format()
                    self._recover()
        except OSError as exc:
            verb = "open" if (self.root / "convlog.json").is_file() else "create"
            raise StoreError(f"cannot {verb} {self.url}: {exc}") from None
        # Reads never write: a damaged last line is reported by reads and verify, and
        # moved aside only by an explicit repair() or before this store's first append.
        self._tails_checked = False
        self._group = (GroupCommit(self._flush_window, self._lock, max_ms=batch_ms,
                                   max_events=batch_events)
                       if durability == BATCHED else None)

    # ------------------------------------------------------------------ locking and recovery

    def _open_lock_file(self) -> bool:
        """Make the store's directories and open its lock file for writing. True when
        the store exists but this process may not write it: then it is only read, and
        the lock file (if any) is opened read-only, for a shared lock."""
        places = (self.root, self._sessions_dir)
        if (self.root / "convlog.json").is_file() and not all(
                os.access(p, os.W_OK | os.X_OK) for p in places if p.is_dir()):
            self._open_lock_read_only()
            return True
        try:
            self.root.mkdir(exist_ok=True)
            self._sessions_dir.mkdir(exist_ok=True)
            self._lock_fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if (exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS)
                    or not (self.root / "convlog.json").is_file()):
                raise
            self._open_lock_read_only()
            return True
        return False

    def _open_lock_read_only(self) -> None:
        try:
            self._lock_fd = os.open(self.root / "lock", os.O_RDONLY)
        except FileNotFoundError:
            self._lock_fd = -1  # never written through a lock: nobody is writing

    def _open_read_only(self) -> None:
        """Open without writing anything. The shared lock waits out a write in
        progress; an interrupted one cannot be finished or undone without write
        access, so such a store cannot be read consistently and is refused."""
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        try:
            self.refuse = self._init_format()
            txn = self._read_txn()
        finally:
            if self._lock_fd >= 0:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        if txn is not None and not txn.done:
            raise StoreUnreadable(
                f"{self.url}: its last write was interrupted; finishing or undoing it "
                f"needs write access to {self.root}, which this process does not have")
        self._last = 0 if txn is None else txn.new

    def lock(self) -> AbstractContextManager[object]:
        return self._write_lock

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"cannot write {self.url}: the store is read-only "
                                f"(no write access to {self.root})")

    def _file_lock(self) -> AbstractContextManager[object]:
        """The cross-process writer lock; re-entrant within this store object."""
        return self._write_lock

    def _init_format(self) -> str | None:
        self._format, refuse = jsonl_files.init_format(self.root, self.url, self.chain)
        return refuse

    def _upgrade_format(self) -> bool:
        """Before the first member this release seals (file lock held): say so in
        ``convlog.json`` (the legacy room), so that the releases before refuse the
        store. False (no seal; the events stay in the tail) when a newer release's
        number is there."""
        if self._format != FORMAT_VERSION:
            from engine.store.legacy import jsonl_format  # noqa: PLC0415 - old stores only
            self._format = jsonl_format.upgrade(self.root, self.url)
        return self._format <= FORMAT_VERSION

    def _read_txn(self) -> Txn | None:
        return jsonl_files.read_txn(self.root)

    def _write_txn(self, txn: Txn, *, durable: bool) -> None:
        jsonl_files.write_txn(self.root, txn, durable=durable)

    def _recover(self) -> None:
        """With the file lock held: finish or undo the last write (see module doc)."""
        txn = self._read_txn()
        if txn is None:
            self._last = 0
            return
        if txn.done:
            self._last = txn.new
            return
        if jsonl_recovery.written_whole(txn, self._path):
            txn.done = True
            self._write_txn(txn, durable=True)
            self._last = txn.new
            return
        for sid, before in txn.files.items():
            self._move_corrupt(sid, before, "an interrupted write")
        self._write_txn(Txn(txn.old, txn.old, {}, True), durable=True)
        self._last = txn.old
        self._states.clear()
        self._indexed = -1

    def _move_corrupt(self, session_id: str, keep: int, why: str) -> None:
        self._move_aside(self._path(session_id), keep, session_id, why)

    def _move_aside(self, path: Path, keep: int, session_id: str, why: str) -> None:
        moved = jsonl_recovery.move_aside(path, keep)
        if moved is None:
            return
        corrupt, cut = moved
        log.warning("jsonl_tail_moved", session_id=session_id, file=str(path),
                    corrupt_file=str(corrupt), bytes=cut, reason=why)
        self._states.pop(session_id, None)
        self._indexed = -1

    def torn_tails(self) -> list[tuple[str, int, int]]:
        """(session id, bytes kept, bytes cut) of every session file whose last line is
        cut off or unreadable. Reads nothing but the files and changes nothing."""
        return jsonl_recovery.torn_tails(self._sessions_dir)

    def repair(self, *, dry_run: bool = False) -> list[tuple[str, int, int]]:
        """Move every torn last line to ``<file>.corrupt`` (nothing is deleted) and finish
        seals a crash cut short; returns the torn lines that were (with ``dry_run``:
        would be) moved, as :meth:`torn_tails` lists them."""
        with self._file_lock():
            torn = self.torn_tails()
            if not dry_run:
                for sid, keep, _ in torn:
                    self._move_corrupt(sid, keep, "a torn last line")
                self._tails_checked = True
                for p in self._sessions_dir.glob("*.blocks"):
                    self._finish_seal(p.name[:-len(".blocks")])
        return torn

    def _check_tails(self) -> None:
        """Before the first append: a torn last line goes to ``.corrupt`` (an append must
        not glue its line to the torn one)."""
        if not self._tails_checked:
            for sid, keep, _ in self.torn_tails():
                self._move_corrupt(sid, keep, "a torn last line")
            self._tails_checked = True

    # ------------------------------------------------------------------ sessions

    def _path(self, session_id: str) -> Path:
        return self._sessions_dir / f"{session_id}.jsonl"

    def create(self, info: SessionInfo, genesis: bytes) -> None:
        with self._file_lock():
            meta_path = self._sessions_dir / f"{info.id}.meta.json"
            if meta_path.exists():
                raise SessionExists(info.id)
            self._flush_pending()
            meta = _Meta(info.id, info.created, genesis.hex(), info.parent, info.fork_seq)
            jsonl_files.write_atomic(meta_path, msgspec.json.encode(meta) + b"\n", durable=True)

    def meta(self, session_id: str) -> _Meta:
        check_id("session", session_id)
        path = self._sessions_dir / f"{session_id}.meta.json"
        try:
            m = _meta_dec.decode(path.read_bytes())
            bytes.fromhex(m.genesis)  # every later read of it may take it as it is
            if len(m.genesis) != 2 * HASH_BYTES or m.id != session_id:
                raise ValueError("not this session's id and chain start")
        except FileNotFoundError:
            raise UnknownSession(session_id) from None
        except (msgspec.DecodeError, ValueError) as exc:
            raise CorruptLog(session_id, 0, f"unreadable {path.name}: {exc}") from None
        return m

    def info(self, session_id: str) -> SessionInfo:
        info = self._metas.get(session_id)
        if info is None:
            m = self.meta(session_id)
            info = self._metas[session_id] = SessionInfo(m.id, m.created, m.parent, m.fork_seq)
        return info

    def sessions(self) -> list[SessionInfo]:
        out = [self.info(p.name[:-len(".meta.json")])
               for p in self._sessions_dir.glob("*.meta.json")]
        return sorted(out, key=lambda s: (s.created, s.id))

    # ------------------------------------------------------------------ parsing

    def _blocks_path(self, session_id: str) -> Path:
        return self._sessions_dir / f"{session_id}.blocks"

    def _state(self, session_id: str) -> TailState:
        """The session's state, caught up with what other processes appended or sealed.

        A seal appends its blocks before it replaces the tail, so a tail that seems
        to start after the blocks end was replaced after the blocks were read: read
        the blocks again (a few times) before calling it damage.
        """
        st = self._states.get(session_id)
        if st is None:
            m = self.meta(session_id)
            st = self._states[session_id] = TailState(m.fork_seq or 0, bytes.fromhex(m.genesis))
            st.paths = (str(self._path(session_id)), str(self._blocks_path(session_id)))
        elif st.unchanged():
            return st
        for _ in range(5):
            if st.parse_blocks(self.codec, session_id, self._ids):
                st.tail_ino = -1  # the tail is counted against the new blocks again
            st.read_tail(session_id, self._ids)
            if st.gap is None or not st.blocks_grew():
                break
            st.gap = None
            st.tail_ino = -1
        return st

    def _refresh_all(self, *, locked: bool = True) -> None:
        """Index the ids of every session, unless no one appended since the last time.

        With the file lock held, the global position (read from ``txn`` as the lock
        was taken) says whether another writer appended: if not, nothing needs a
        rescan, so an append costs O(1) files instead of a stat of every session's
        file. Without the lock (``locked=False``) every file is checked.
        """
        if locked and self._indexed == self._last:
            return
        for p in self._sessions_dir.glob("*.meta.json"):
            self._state(p.name[:-len(".meta.json")])
        if locked:
            self._indexed = self._last

    def _block_events(self, session_id: str, ref: BlockRef, first: int,
                      last: int) -> list[AnyEvent]:
        """Events first..last of one sealed block, at the current schema version."""
        key = (session_id, ref.offset, ref.length)
        body = self._block_cache.get(key)
        try:
            if body is None:
                with open(self._blocks_path(session_id), "rb") as f:
                    f.seek(ref.offset)
                    member = f.read(ref.length)
                body = self.codec.payload(member)
                self._block_cache = {key: body}
            if upcasting_active():
                objs = self.codec.builtins(body, session_id, ref.first_seq)
                lo, hi = max(first - ref.first_seq, 0), max(last - ref.first_seq + 1, 0)
                return [from_stored(o) for o in objs[lo:hi]]
            events = self.codec.decode_range(body, session_id, ref.first_seq, first, last)
            if any(e.v != 1 for e in events):  # a newer version than ours raises
                return [upgrade(e) for e in events]
            return events
        except (OSError, BadMember, EventDecodeError) as exc:
            raise CorruptLog(session_id, ref.first_seq,
                             f"unreadable block at byte {ref.offset}: {exc}") from None

    def _collect(self, session_id: str, first: int, last: int) -> list[AnyEvent]:
        """Own events first..last, from the blocks and the tail (lock held)."""
        for _ in range(5):
            st = self._state(session_id)
            if st.gap is not None and last > st.sealed:
                raise CorruptLog(session_id, st.sealed + 1, st.gap)
            out: list[AnyEvent] = []
            for ref in st.blocks:
                if ref.first_seq > last:
                    break
                if ref.last_seq >= first:
                    out.extend(self._block_events(session_id, ref, first, last))
            lo = max(first - st.sealed - 1, 0)
            hi = max(last - st.sealed, 0)
            lines = st.tail_lines(lo, hi)
            if lines is None:  # sealed meanwhile: read the new state
                continue
            for i, line in enumerate(lines):
                out.append(self._decode_line(session_id, st.sealed + lo + i + 1, line)[1])
            return out
        raise StoreError(f"{self.url}: the files of session {session_id} keep changing "
                         "under the reader")

    def _decode_line(self, session_id: str, seq: int, line: bytes) -> tuple[int, AnyEvent]:
        try:
            rec = jsonl_lines.line_dec.decode(line)
            return rec.pos, jsonl_lines.current_event(rec.event)  # a newer version raises
        except (msgspec.DecodeError, EventDecodeError) as exc:
            raise CorruptLog(session_id, seq, f"unreadable event: {exc}") from None

    # ------------------------------------------------------------------ writing

    def head(self, session_id: str) -> tuple[int, bytes]:
        self._check_tails()  # first, under the lock: before anything reads the files
        self.info(session_id)
        pending = self._pending_heads.get(session_id)
        if pending is not None:
            return pending[0], pending[1]
        st = self._state(session_id)
        if st.stale or st.bad_block is not None:
            self._finish_seal(session_id)
            st = self._state(session_id)  # its version starts at the fork point
        return st.version, st.head

    def stored_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]:
        with self._file_lock():
            return self.early_ids(session_id, events)

    def early_ids(self, session_id: str, events: Sequence[Event]
                  ) -> dict[str, tuple[str, int, int]]:
        """The lookup itself, with the file lock held (``_record`` holds it)."""
        self._refresh_all()  # ids of every session, for duplicate detection
        ids = self._ids
        return {e.id: ids[e.id] for e in events if e.id in ids}

    def insert(self, session_id: str, batch: Prepared) -> int:
        if not self._pending:
            self._window_old = self._last
        pos0 = self._last + 1
        lines = self._pending.setdefault(session_id, [])
        for i, (e, h) in enumerate(zip(batch.events, batch.hashes, strict=True)):
            lines.append(jsonl_lines.encode(pos0 + i, h, e))
            self._ids[e.id] = (session_id, e.seq, pos0 + i)
        n = len(batch.events)
        if self._indexed == self._last:  # our own events are indexed above
            self._indexed += n
        self._last += n
        pending = self._pending_heads.get(session_id)
        size = pending[2] if pending is not None else self._state(session_id).size
        self._pending_heads[session_id] = (batch.first_seq - 1 + n, batch.head, size)
        if self._group is None:
            self._flush_pending()
        else:
            self._group.added(n)
        return pos0

    def _flush_window(self) -> None:
        with self._lock:
            self._flush_pending()
            if self._flocked and not self._pending:
                self._flocked = False
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _flush_pending(self) -> None:
        """Write the window: intent, lines (fsynced), heads, done. File lock held."""
        if not self._pending:
            return
        pending, heads = self._pending, self._pending_heads
        seal_at, seal_bytes = self.codec.SEAL_AT, self.codec.SEAL_BYTES
        txn = Txn(self._window_old, self._last, {sid: heads[sid][2] for sid in pending})
        try:
            self._write_txn(txn, durable=True)
            for sid, lines in pending.items():
                path = self._path(sid)
                new_file = not path.exists()
                with open(path, "ab") as f:
                    f.write(b"".join(lines))
                    f.flush()
                    os.fsync(f.fileno())
                if new_file:
                    jsonl_files.fsync_dir(self._sessions_dir)
                version, head, _ = heads[sid]
                jsonl_files.write_atomic(self._sessions_dir / f"{sid}.head",
                              f"{version} {head.hex()}\n".encode(), durable=False)
            txn.done = True
            self._write_txn(txn, durable=False)
        except BaseException:
            # Unknown how much reached the disk: recovery decides, from the intent.
            self._pending, self._pending_heads = {}, {}
            self._states.clear()
            self._indexed = -1
            self._recover()
            raise
        self._pending, self._pending_heads = {}, {}
        for sid, lines in pending.items():
            st = self._states.get(sid)
            if st is not None and (len(st.offsets) + len(lines) >= seal_at
                                   or st.size + sum(map(len, lines)) >= seal_bytes):
                self._seal(sid)

    # ------------------------------------------------------------------ sealing

    def _seal(self, session_id: str) -> None:
        """Move the whole tail into ``.blocks`` once it holds ``SEAL_AT`` events or
        ``SEAL_BYTES`` (file lock held, the write done). A seal that cannot be made
        leaves the tail as it is: the events are safe there, only bigger."""
        st = self._state(session_id)
        n = len(st.offsets)
        codec = self.codec
        if (not n or (n < codec.SEAL_AT and st.size - st.offsets[0] < codec.SEAL_BYTES)
                or st.gap is not None or st.bad_block is not None or st.stale):
            return
        path = self._path(session_id)
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_ino != st.tail_ino:
                    return
                f.seek(st.offsets[0])
                data = f.read()
            members = jsonl_seal.members(self.codec, self.chain, session_id, st.sealed_head,
                                         data.split(b"\n")[:n])
            if members is None:
                return
            cut = st.size - st.offsets[0]  # whole lines; anything after them stays
            if not self._upgrade_format():
                return
            start = jsonl_seal.write(self._blocks_path(session_id), path,
                                     [m for m, _ in members], data[cut:])
        except OSError as exc:
            log.warning("jsonl_seal_failed", session_id=session_id, error=str(exc))
            st.tail_ino = -1
            return
        if start == st.blocks_size:  # index the new blocks from what was just written
            for member, ref in members:
                st.blocks.append(ref._replace(offset=start))
                start += len(member)
                st.sealed, st.sealed_head = ref.last_seq, ref.head
            st.blocks_size = start
        st.tail_ino = -1  # read again: the tail without the sealed lines

    def _finish_seal(self, session_id: str) -> None:
        """Before writing to a session (file lock held): undo what a crash during a seal
        left. A torn last block whose events the tail still holds goes to
        ``.blocks.corrupt``; tail lines a block holds already are dropped."""
        st = self._state(session_id)
        if st.gap is not None:
            return  # damage, not a seal cut short: left for verify to report
        try:
            bad = st.bad_block
            if bad is not None:
                self._move_aside(self._blocks_path(session_id), bad.offset,
                                 session_id, "a torn sealed block")
                st.bad_block = None
            if st.stale:
                path = self._path(session_id)
                data = path.read_bytes()
                jsonl_files.write_atomic(path, data[st.stale_end:], durable=True)
                log.warning("jsonl_seal_finished", session_id=session_id, lines=st.stale)
                st.tail_ino = -1
        except OSError as exc:  # appends stay correct with the lines left: readers skip them
            log.warning("jsonl_seal_not_finished", session_id=session_id, error=str(exc))

    def migrate(self) -> bool:
        with self._file_lock():
            old = self._format
            return self._upgrade_format() and old != self._format

    def flush(self) -> None:
        if self._group is not None:
            self._group.flush()

    def close(self) -> None:
        with self._lock:
            if self._group is not None:
                self._group.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def _readable(self) -> None:
        """Reads see this store's own batched appends: write the window first."""
        if self._pending and self._group is not None:
            self._group.flush()

    # ------------------------------------------------------------------ reading

    def version(self, session_id: str) -> int:
        with self._lock:
            self._readable()
            st = self._state(session_id)
            return st.version if st.own() else 0

    def select(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        with self._lock:
            self._readable()
            st = self._state(session_id)
            # Block by block, so a long read never holds more than a block and the tail.
            bounds = [(max(r.first_seq, first), min(r.last_seq, last)) for r in st.blocks
                      if r.last_seq >= first and r.first_seq <= last]
            tail_from = max(first, st.sealed + 1)
        for lo, hi in bounds:
            with self._lock:
                events = self._collect(session_id, lo, hi)
            yield from events
        if tail_from <= last:
            with self._lock:
                events = self._collect(session_id, tail_from, last)
            yield from events

    def find(self, event_id: str) -> tuple[str, int] | None:
        with self._lock:
            self._readable()
            if event_id not in self._ids:
                self._refresh_all(locked=False)
            found = self._ids.get(event_id)
        return None if found is None else (found[0], found[1])

    def last_position(self) -> int:
        with self._lock:
            if self._pending:
                return self._last
            txn = self._read_txn()
            return 0 if txn is None else (txn.new if txn.done else txn.old)

    def select_all(self, after: int, session_id: str | None,
                   limit: int | None) -> Iterator[Record]:
        with self._lock:
            self._readable()
            if session_id is not None:
                names = [session_id]
                self.info(session_id)
            else:
                names = [p.name[:-len(".meta.json")]
                         for p in self._sessions_dir.glob("*.meta.json")]
            runs: list[list[tuple[int, str, int]]] = []
            for sid in names:
                st = self._state(sid)
                run = [(pos, sid, r.first_seq + i) for r in st.blocks
                       for i, pos in enumerate(r.positions) if pos > after]
                run.extend((pos, sid, st.sealed + 1 + i)
                           for i, pos in enumerate(st.positions) if pos > after)
                runs.append(run)
        for count, (pos, sid, seq) in enumerate(heapq.merge(*runs), start=1):
            with self._lock:
                found = self._collect(sid, seq, seq)
            if not found:
                raise CorruptLog(sid, seq, "the event is no longer where it was indexed")
            yield Record(pos, found[0])
            if limit is not None and count >= limit:
                return

    def files(self, session_id: str) -> tuple[_Meta, bytes, bytes]:
        """The session's meta record and the stored bytes of its tail and its sealed
        blocks, as they are now (what the verification reader walks)."""
        m = self.meta(session_id)
        path = self._path(session_id)
        with self._lock:
            self._readable()
            # The tail first: a seal appends its blocks before it replaces the tail.
            data = path.read_bytes() if path.exists() else b""
            blocks_path = self._blocks_path(session_id)
            sealed_data = blocks_path.read_bytes() if blocks_path.exists() else b""
        return m, data, sealed_data

    def head_file(self, session_id: str) -> bytes | None:
        """The bytes of the session's head file, None when there is none yet."""
        try:
            return (self._sessions_dir / f"{session_id}.head").read_bytes()
        except FileNotFoundError:
            return None

    def corrupt_files(self) -> list[Path]:
        return sorted(self._sessions_dir.glob("*.corrupt"))

    # ------------------------------------------------------------------ snapshots

    def put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self._refuse_read_only()
        self.info(session_id)
        self._snapshots.put(session_id, name, seq, data, durable=self.durability == SYNC)

    def latest_snapshot(self, session_id: str, name: str,
                        max_seq: int) -> tuple[int, bytes] | None:
        self.info(session_id)
        return self._snapshots.latest(session_id, name, max_seq)
