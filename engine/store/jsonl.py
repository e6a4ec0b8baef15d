"""``jsonl:///dir``: one human-readable, greppable JSON-lines file per session.

Layout of the directory::

    convlog.json                 format, version and hash-chain kind of the store
    lock                         flock(2) target: one writer at a time, across processes
    txn                          the last write: old and new global position, files touched
    sessions/<id>.jsonl          {"pos":..,"hash":..,"event":{..public JSON event..}} per line
    sessions/<id>.meta.json      created, parent, fork_seq, where the hash chain starts
    sessions/<id>.head           "<version> <hash>" after the last append (catches a cut tail)
    sessions/<id>.jsonl.corrupt  bytes a crash left behind, moved out of the log
    snapshots/<id>/<name>/<seq>  snapshot bodies (names encoded: ``snapshot_file_name``)

A write, under the lock: record the intent in ``txn`` (fsynced), append the lines
and fsync them, then mark ``txn`` done. Whoever takes the lock next checks an
unfinished ``txn``: complete lines stay, otherwise every file it names is cut back
to its size before the write, the cut bytes are moved to ``<file>.corrupt`` and a
warning is logged. So a batch is all or nothing, global positions stay gapless,
and a torn line is never silently dropped nor kept. Session ids become file names,
which is why ids are restricted to a safe alphabet (no ``/``, no ``..``).
"""

from __future__ import annotations

import fcntl
import hashlib
import heapq
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import msgspec
import structlog

from engine.codec import decode_json, upgrade
from engine.errors import (
    CorruptLog,
    EventDecodeError,
    SessionExists,
    StoreError,
    UnknownSession,
)
from engine.events import AnyEvent, Event
from engine.store.base import (
    BATCHED,
    SYNC,
    Prepared,
    Record,
    SessionInfo,
    Store,
    Stored,
    check_chain,
    check_id,
)
from engine.store.batching import DEFAULT_BATCH_EVENTS, DEFAULT_BATCH_MS, GroupCommit
from engine.store.chain import HASH_BYTES

log = structlog.get_logger("convlog.store.jsonl")

FORMAT = "convlog-jsonl"
FORMAT_VERSION = 1


class _LineOut(msgspec.Struct):
    pos: int
    hash: str
    event: Event


class _LineIn(msgspec.Struct):
    pos: int
    hash: str
    event: msgspec.Raw


class _Envelope(msgspec.Struct):  # unknown fields are ignored: just what the index needs
    id: str
    seq: int


class _Meta(msgspec.Struct, omit_defaults=True):
    id: str
    created: int
    genesis: str
    parent: str | None = None
    fork_seq: int | None = None


class _Txn(msgspec.Struct):
    old: int
    new: int
    files: dict[str, int]  # session id -> file size before the write
    done: bool = False


_line_enc = msgspec.json.Encoder()
_line_dec = msgspec.json.Decoder(_LineIn)
_env_dec = msgspec.json.Decoder(_Envelope)
_meta_dec = msgspec.json.Decoder(_Meta)
_txn_dec = msgspec.json.Decoder(_Txn)


class _State:
    """What this process knows of one session file (parsed incrementally)."""

    __slots__ = ("base", "head", "offsets", "positions", "size", "version")

    def __init__(self, base: int, genesis: bytes) -> None:
        self.base = base  # own seqs start after it (a fork's fork_seq)
        self.size = 0
        self.version = base
        self.head = genesis
        self.offsets: list[int] = []
        self.positions: list[int] = []


_NAME_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+=-")
_NAME_MAX = 200  # bytes: below every file system's limit on one name


def snapshot_file_name(name: str) -> str:
    """A snapshot name as one file name: characters outside the id alphabet (``/``
    first of all) and a leading ``.`` become ``%XX`` of their UTF-8 bytes, so names
    that are valid ids map to themselves and distinct names to distinct files. An
    encoding longer than a file name may be is replaced by a digest of the name."""
    out = []
    for i, ch in enumerate(name):
        if ch in _NAME_SAFE and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode())
    encoded = "".join(out)
    if len(encoded) <= _NAME_MAX:
        return encoded
    return "%%" + hashlib.sha256(name.encode()).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes, *, durable: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        _fsync_dir(path.parent)


class _FileLock:
    """A :class:`JSONLStore`'s writer lock: its thread lock, then ``flock(2)`` on the
    lock file (across processes) and recovery of an unfinished write. Re-entrant;
    the file lock stays held while a batched window has lines pending."""

    __slots__ = ("owned", "store")

    def __init__(self, store: JSONLStore) -> None:
        self.store = store
        self.owned: list[bool] = []  # per nested entry: did it take the file lock

    def __enter__(self) -> None:
        store = self.store
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


class JSONLStore(Store):
    def __init__(self, directory: str, *, url: str | None = None, durability: str = SYNC,
                 batch_ms: float = DEFAULT_BATCH_MS, batch_events: int = DEFAULT_BATCH_EVENTS,
                 key: bytes | None = None, max_event_bytes: int | None = None) -> None:
        self._configure(url or f"jsonl:///{directory}", durability=durability, key=key,
                        max_event_bytes=max_event_bytes)
        self.root = Path(directory)
        if not self.root.parent.is_dir():
            raise StoreError(f"cannot open {self.url}: directory {self.root.parent} does not exist")
        self._sessions_dir = self.root / "sessions"
        self._snap_dir = self.root / "snapshots"
        self._lock = threading.RLock()
        self._states: dict[str, _State] = {}
        self._metas: dict[str, SessionInfo] = {}
        self._ids: dict[str, tuple[str, int, int]] = {}
        self._flocked = False
        self._write_lock = _FileLock(self)
        self._lock_fd = -1
        self._last = 0  # last global position (valid while the file lock is held)
        # Every event up to this global position is in _ids (-1: refresh every session).
        self._indexed = -1
        self._pending: dict[str, list[bytes]] = {}  # batched window: lines not yet written
        self._pending_heads: dict[str, tuple[int, bytes, int]] = {}
        self._window_old = 0
        try:
            self.root.mkdir(exist_ok=True)
            self._sessions_dir.mkdir(exist_ok=True)
            self._lock_fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
            with self._file_lock():
                self._refuse = self._init_format()
                self._recover()
        except OSError as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from None
        # Reads never write: a damaged last line is reported by reads and verify, and
        # moved aside only by an explicit repair() or before this store's first append.
        self._tails_checked = False
        self._group = (GroupCommit(self._flush_window, self._lock, max_ms=batch_ms,
                                   max_events=batch_events)
                       if durability == BATCHED else None)

    # ------------------------------------------------------------------ locking and recovery

    def _file_lock(self) -> AbstractContextManager[object]:
        """The cross-process writer lock; re-entrant within this store object."""
        return self._write_lock

    def _init_format(self) -> str | None:
        path = self.root / "convlog.json"
        if path.exists():
            try:
                meta = msgspec.json.decode(path.read_bytes())
                if meta.get("format") != FORMAT:
                    raise StoreError(f"{self.url}: {path} is not a convlog JSONL store")
                if int(meta.get("version", 0)) > FORMAT_VERSION:
                    raise StoreError(f"{self.url} has format {meta['version']}, newer than "
                                     f"{FORMAT_VERSION}")
            except (msgspec.DecodeError, AttributeError, ValueError) as exc:
                raise StoreError(f"{self.url}: unreadable {path}: {exc}") from None
        else:
            if any(p for p in self.root.iterdir() if p.name not in ("lock", "sessions")):
                raise StoreError(f"{self.url}: {self.root} is not empty and not a convlog store")
            meta = {"format": FORMAT, "version": FORMAT_VERSION,
                    "chain": self.chain.algorithm, "key": self.chain.fingerprint()}
            _write_atomic(path, msgspec.json.encode(meta) + b"\n", durable=True)
        return check_chain(self.url, str(meta["chain"]), str(meta.get("key", "")), self.chain)

    def _read_txn(self) -> _Txn | None:
        try:
            data = (self.root / "txn").read_bytes()
        except FileNotFoundError:
            return None
        try:
            return _txn_dec.decode(data)
        except msgspec.DecodeError as exc:
            raise CorruptLog("*", 0, f"unreadable {self.root / 'txn'}: {exc}") from None

    def _write_txn(self, txn: _Txn, *, durable: bool) -> None:
        path = self.root / "txn"
        with open(path, "r+b" if path.exists() else "wb") as f:
            data = msgspec.json.encode(txn) + b"\n"
            f.write(data)
            f.truncate(len(data))
            if durable:
                f.flush()
                os.fsync(f.fileno())

    def _recover(self) -> None:
        """With the file lock held: finish or undo the last write (see module doc)."""
        txn = self._read_txn()
        if txn is None:
            self._last = 0
            return
        if txn.done:
            self._last = txn.new
            return
        complete = 0
        whole = True
        for sid, before in txn.files.items():
            path = self._path(sid)
            data = path.read_bytes() if path.exists() else b""
            tail = data[before:]
            if tail and not tail.endswith(b"\n"):
                whole = False
            for line in tail.split(b"\n")[:-1]:
                try:
                    _line_dec.decode(line)
                    complete += 1
                except msgspec.DecodeError:
                    whole = False
        if whole and complete == txn.new - txn.old:
            txn.done = True
            self._write_txn(txn, durable=True)
            self._last = txn.new
            return
        for sid, before in txn.files.items():
            self._move_corrupt(sid, before, "an interrupted write")
        self._write_txn(_Txn(txn.old, txn.old, {}, True), durable=True)
        self._last = txn.old
        self._states.clear()
        self._indexed = -1

    def _move_corrupt(self, session_id: str, keep: int, why: str) -> None:
        path = self._path(session_id)
        if not path.exists():
            return
        with open(path, "r+b") as f:
            f.seek(keep)
            cut = f.read()
            if not cut:
                return
            corrupt = path.with_name(path.name + ".corrupt")
            with open(corrupt, "ab") as out:
                out.write(cut if cut.endswith(b"\n") else cut + b"\n")
                out.flush()
                os.fsync(out.fileno())
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning("jsonl_tail_moved", session_id=session_id, file=str(path),
                    corrupt_file=str(corrupt), bytes=len(cut), reason=why)
        self._states.pop(session_id, None)
        self._indexed = -1

    def torn_tails(self) -> list[tuple[str, int, int]]:
        """(session id, bytes kept, bytes cut) of every session file whose last line is
        cut off or unreadable. Reads nothing but the files and changes nothing."""
        found = []
        for path in sorted(self._sessions_dir.glob("*.jsonl")):
            data = path.read_bytes()
            if not data:
                continue
            end = len(data)
            if not data.endswith(b"\n"):
                end = data.rfind(b"\n") + 1
            else:
                start = data.rfind(b"\n", 0, end - 1) + 1
                try:
                    _line_dec.decode(data[start:end - 1])
                except msgspec.DecodeError:
                    end = start
            if end != len(data):
                found.append((path.name[:-len(".jsonl")], end, len(data) - end))
        return found

    def repair(self, *, dry_run: bool = False) -> list[tuple[str, int, int]]:
        """Move every torn last line to ``<file>.corrupt`` (nothing is deleted); returns
        what was (with ``dry_run``: would be) moved, as :meth:`torn_tails` lists it."""
        with self._file_lock():
            torn = self.torn_tails()
            if not dry_run:
                for sid, keep, _ in torn:
                    self._move_corrupt(sid, keep, "a torn last line")
                self._tails_checked = True
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

    def _create_session(self, info: SessionInfo, genesis: bytes) -> None:
        with self._file_lock():
            meta_path = self._sessions_dir / f"{info.id}.meta.json"
            if meta_path.exists():
                raise SessionExists(info.id)
            self._flush_pending()
            meta = _Meta(info.id, info.created, genesis.hex(), info.parent, info.fork_seq)
            _write_atomic(meta_path, msgspec.json.encode(meta) + b"\n", durable=True)

    def _meta(self, session_id: str) -> _Meta:
        check_id("session", session_id)
        path = self._sessions_dir / f"{session_id}.meta.json"
        try:
            return _meta_dec.decode(path.read_bytes())
        except FileNotFoundError:
            raise UnknownSession(session_id) from None
        except msgspec.DecodeError as exc:
            raise CorruptLog(session_id, 0, f"unreadable {path.name}: {exc}") from None

    def session_info(self, session_id: str) -> SessionInfo:
        info = self._metas.get(session_id)
        if info is None:
            m = self._meta(session_id)
            info = self._metas[session_id] = SessionInfo(m.id, m.created, m.parent, m.fork_seq)
        return info

    def sessions(self) -> list[SessionInfo]:
        out = [self.session_info(p.name[:-len(".meta.json")])
               for p in self._sessions_dir.glob("*.meta.json")]
        return sorted(out, key=lambda s: (s.created, s.id))

    # ------------------------------------------------------------------ parsing

    def _state(self, session_id: str) -> _State:
        """The session's state, caught up with what other processes appended."""
        st = self._states.get(session_id)
        if st is None:
            m = self._meta(session_id)
            st = self._states[session_id] = _State(m.fork_seq or 0, bytes.fromhex(m.genesis))
        path = self._path(session_id)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return st
        if size > st.size:
            with open(path, "rb") as f:
                f.seek(st.size)
                data = f.read(size - st.size)
            end = data.rfind(b"\n") + 1  # a partial last line is being written (or torn)
            offset = st.size
            for line in data[:end].split(b"\n")[:-1]:
                try:
                    rec = _line_dec.decode(line)
                    env = _env_dec.decode(rec.event)
                    h = bytes.fromhex(rec.hash)
                except (msgspec.DecodeError, ValueError) as exc:
                    raise CorruptLog(session_id, st.version + 1,
                                     f"unreadable line at byte {offset}: {exc}") from None
                st.version += 1
                st.head = h
                st.offsets.append(offset)
                st.positions.append(rec.pos)
                self._ids[env.id] = (session_id, env.seq, rec.pos)
                offset += len(line) + 1
            st.size = offset
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

    def _lines(self, session_id: str, lo: int, hi: int) -> list[bytes]:
        """Own lines with index lo..hi-1 (index 0 is the first own event)."""
        st = self._state(session_id)
        hi = min(hi, len(st.offsets))
        if lo >= hi:
            return []
        start = st.offsets[lo]
        stop = st.offsets[hi] if hi < len(st.offsets) else st.size
        with open(self._path(session_id), "rb") as f:
            f.seek(start)
            data = f.read(stop - start)
        return data.split(b"\n")[:-1]

    def _decode_line(self, session_id: str, seq: int, line: bytes) -> tuple[int, AnyEvent]:
        try:
            rec = _line_dec.decode(line)
            return rec.pos, upgrade(decode_json(rec.event))  # a newer version raises
        except (msgspec.DecodeError, EventDecodeError) as exc:
            raise CorruptLog(session_id, seq, f"unreadable event: {exc}") from None

    # ------------------------------------------------------------------ writing

    def _head(self, session_id: str) -> tuple[int, bytes]:
        with self._lock:
            pending = self._pending_heads.get(session_id)
            if pending is not None:
                return pending[0], pending[1]
            st = self._state(session_id)
            return (st.version if st.offsets else 0), st.head

    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        self._check_tails()  # first, under the lock: before anything reads the files
        self.session_info(session_id)
        pending = self._pending_heads.get(session_id)
        if pending is not None:
            return pending[0], pending[1]
        st = self._state(session_id)  # its version starts at the fork point
        return st.version, st.head

    def _stored_ids(self, session_id: str, events: Sequence[Event]
                    ) -> dict[str, tuple[str, int, int]]:
        with self._file_lock():
            return self._early_ids(session_id, events)

    def _early_ids(self, session_id: str, events: Sequence[Event]
                   ) -> dict[str, tuple[str, int, int]]:
        """The lookup itself, with the file lock held (``_record`` holds it)."""
        self._refresh_all()  # ids of every session, for duplicate detection
        ids = self._ids
        return {e.id: ids[e.id] for e in events if e.id in ids}

    def _insert(self, session_id: str, batch: Prepared) -> int:
        if not self._pending:
            self._window_old = self._last
        pos0 = self._last + 1
        lines = self._pending.setdefault(session_id, [])
        for i, (e, h) in enumerate(zip(batch.events, batch.hashes, strict=True)):
            lines.append(_line_enc.encode(_LineOut(pos0 + i, h.hex(), e)) + b"\n")
            self._ids[e.id] = (session_id, e.seq, pos0 + i)
        n = len(batch.events)
        if self._indexed == self._last:  # our own events are indexed above
            self._indexed += n
        self._last += n
        size = self._pending_heads.get(session_id, (0, b"", self._state(session_id).size))[2]
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
        txn = _Txn(self._window_old, self._last, {sid: heads[sid][2] for sid in pending})
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
                    _fsync_dir(self._sessions_dir)
                version, head, _ = heads[sid]
                _write_atomic(self._sessions_dir / f"{sid}.head",
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

    def _own_version(self, session_id: str) -> int:
        with self._lock:
            self._readable()
            st = self._state(session_id)
            return st.version if st.offsets else 0

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
        with self._lock:
            self._readable()
            st = self._state(session_id)
            lo = max(first - st.base - 1, 0)
            hi = max(last - st.base, 0)
            lines = self._lines(session_id, lo, hi)
        for i, line in enumerate(lines):
            yield self._decode_line(session_id, st.base + lo + i + 1, line)[1]

    def find_event(self, event_id: str) -> tuple[str, int] | None:
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

    def read_all(self, after: int = 0, *, session_id: str | None = None,
                 limit: int | None = None) -> Iterator[Record]:
        with self._lock:
            self._readable()
            if session_id is not None:
                names = [session_id]
                self.session_info(session_id)
            else:
                names = [p.name[:-len(".meta.json")]
                         for p in self._sessions_dir.glob("*.meta.json")]
            runs: list[list[tuple[int, str, int]]] = []
            for sid in names:
                st = self._state(sid)
                runs.append([(pos, sid, i) for i, pos in enumerate(st.positions) if pos > after])
        for count, (pos, sid, index) in enumerate(heapq.merge(*runs), start=1):
            st = self._states[sid]
            line = self._lines(sid, index, index + 1)[0]
            yield Record(pos, self._decode_line(sid, st.base + index + 1, line)[1])
            if limit is not None and count >= limit:
                return

    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        m = self._meta(session_id)
        base = m.fork_seq or 0
        path = self._path(session_id)
        with self._lock:
            self._readable()
            data = path.read_bytes() if path.exists() else b""
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for i, line in enumerate(lines):
            seq = base + i + 1
            try:
                rec = _line_dec.decode(line)
                h = bytes.fromhex(rec.hash)
            except (msgspec.DecodeError, ValueError) as exc:
                yield Stored(seq, b"", None, f"unreadable line: {exc}")
                continue
            try:
                obj: Any = msgspec.json.decode(rec.event)
            except msgspec.DecodeError as exc:
                yield Stored(seq, h, None, f"unreadable event: {exc}", rec.pos)
                continue
            if not isinstance(obj, dict):
                yield Stored(seq, h, None, "the event is not a JSON object", rec.pos)
                continue
            yield Stored(int(obj.get("seq", seq)), h, obj, None, rec.pos)

    def _recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        """(own version, hash) from the head file, None when there is none yet; a damaged
        head file is damage (CorruptLog), not a missing head."""
        path = self._sessions_dir / f"{session_id}.head"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            version, head = data.decode("ascii").split()
            if not version.isdigit() or len(head) != 2 * HASH_BYTES:
                raise ValueError("not '<version> <hash>'")
            return int(version), bytes.fromhex(head)
        except ValueError as exc:  # UnicodeDecodeError included
            raise CorruptLog(session_id, 0, f"unreadable {path.name}: {exc}") from None

    def corrupt_files(self) -> list[Path]:
        return sorted(self._sessions_dir.glob("*.corrupt"))

    # ------------------------------------------------------------------ snapshots

    def _put_snapshot(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        self.session_info(session_id)
        folder = self._snap_dir / session_id / snapshot_file_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(folder / f"{seq:020d}", data, durable=self.durability == SYNC)

    def _latest_snapshot(self, session_id: str, name: str,
                         max_seq: int) -> tuple[int, bytes] | None:
        self.session_info(session_id)
        folder = self._snap_dir / session_id / snapshot_file_name(name)
        if not folder.is_dir():
            return None
        seqs = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
        best = max((s for s in seqs if s <= max_seq), default=None)
        if best is None:
            return None
        return best, (folder / f"{best:020d}").read_bytes()
