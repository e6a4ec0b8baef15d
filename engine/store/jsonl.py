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
    snapshots/<id>/<name>/<seq>  snapshot bodies (names encoded: ``snapshot_file_name``)

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
"""

from __future__ import annotations

import base64
import binascii
import errno
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

from engine.codec import (
    canonical,
    decode_json,
    decode_msgpack,
    encode_msgpack,
    from_stored,
    unpackb,
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
from engine.store import jsonl_blocks, packed
from engine.store.base import (
    BATCHED,
    SYNC,
    Prepared,
    Record,
    SessionInfo,
    Span,
    Store,
    Stored,
    check_chain,
    check_id,
    newer_store,
)
from engine.store.batching import DEFAULT_BATCH_EVENTS, DEFAULT_BATCH_MS, GroupCommit
from engine.store.chain import HASH_BYTES
from engine.store.jsonl_blocks import SEAL_AT, SEAL_BYTES, BadMember, BlockRef

log = get_logger("convlog.store.jsonl")

FORMAT = "convlog-jsonl"
# 2: sealed members carry a block link (jsonl_blocks index version 2).
# 3: sealed members may hold packed payload format 2 (engine.store.packed).
# An older store opens as it is; its convlog.json says 3 from the first seal this
# release writes into it, so the releases before refuse the store as newer rather
# than taking a member they cannot read for damage.
FORMAT_VERSION = 3


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


_typed_event_dec = msgspec.json.Decoder(AnyEvent)
_line_enc = msgspec.json.Encoder()
_str_dec = msgspec.json.Decoder(str)
_line_dec = msgspec.json.Decoder(_LineIn)
_env_dec = msgspec.json.Decoder(_Envelope)
_meta_dec = msgspec.json.Decoder(_Meta)
_txn_dec = msgspec.json.Decoder(_Txn)


# An event holding a lone surrogate (engine.codec) has no exact JSON: the escape
# ``\\ud800`` is refused by msgspec's parser, and two halves of a pair in one str,
# escaped, read back as one character. Its line holds the event's msgpack bytes
# (engine.codec.encode_msgpack, exact) as a base64 JSON string instead of an
# object: every reader parses the line, and those that look inside the event
# read those bytes.
_MSGPACK = "msgpack:"


def _line(pos: int, h: bytes, e: Event) -> bytes:
    try:
        return _line_enc.encode(_LineOut(pos, h.hex(), e)) + b"\n"
    except UnicodeEncodeError:
        text = _MSGPACK + base64.b64encode(encode_msgpack(e)).decode()
        return _line_enc.encode({"pos": pos, "hash": h.hex(), "event": text}) + b"\n"


def _quoted(raw: msgspec.Raw) -> bool:
    return bytes(memoryview(raw)[:1]) == b'"'


def _event_bytes(raw: msgspec.Raw) -> bytes:
    """The msgpack bytes of a line whose event is a string."""
    text = _str_dec.decode(raw)
    if not text.startswith(_MSGPACK):
        raise msgspec.DecodeError("the event is a string, not msgpack bytes")
    try:
        return base64.b64decode(text[len(_MSGPACK):], validate=True)
    except binascii.Error as exc:
        raise msgspec.DecodeError(f"the event's base64: {exc}") from None


def _event_obj(raw: msgspec.Raw) -> Any:
    """The builtins of a line's event (either form)."""
    if _quoted(raw):
        return unpackb(_event_bytes(raw))
    return msgspec.json.decode(raw)


def _envelope(raw: msgspec.Raw) -> _Envelope:
    if _quoted(raw):
        try:
            return msgspec.convert(_event_obj(raw), _Envelope)
        except msgspec.ValidationError as exc:
            raise msgspec.DecodeError(str(exc)) from None
    return _env_dec.decode(raw)


def _typed_event(raw: msgspec.Raw) -> AnyEvent:
    """A line's event as stored (no upcasting)."""
    if _quoted(raw):
        return decode_msgpack(_event_bytes(raw))
    event: AnyEvent = _typed_event_dec.decode(raw)
    return event


def _event(raw: msgspec.Raw) -> AnyEvent:
    """A line's event at the current schema version (a newer one raises)."""
    if _quoted(raw):
        return upgrade(from_stored(unpackb(_event_bytes(raw))))
    return upgrade(decode_json(raw))


class _State:
    """What this process knows of one session's files (parsed incrementally)."""

    __slots__ = ("bad_block", "base", "blocks", "blocks_size", "gap", "genesis", "head",
                 "offsets", "paths", "positions", "sealed", "sealed_head", "size", "stale",
                 "stale_end", "tail_ino", "version")

    def __init__(self, base: int, genesis: bytes) -> None:
        self.base = base  # own seqs start after it (a fork's fork_seq)
        self.genesis = genesis
        self.blocks: list[BlockRef] = []
        self.blocks_size = 0  # bytes of .blocks parsed
        self.bad_block: BadMember | None = None  # the first unreadable member
        self.sealed = base  # the last seq in blocks
        self.sealed_head = genesis
        self.tail_ino = -1
        self.paths = ("", "")  # the tail's and the blocks' file names
        self._reset_tail()

    def _reset_tail(self) -> None:
        self.size = 0  # bytes of the tail parsed
        self.stale = 0  # tail lines a block holds already (a seal cut short)
        self.stale_end = 0  # byte offset of the first tail line after them
        self.offsets: list[int] = []  # of the tail lines after the stale ones
        self.positions: list[int] = []
        self.version = self.sealed
        self.head = self.sealed_head
        self.gap: str | None = None

    def own(self) -> bool:
        return bool(self.blocks or self.offsets)


_NAME_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+=-")
_NAME_MAX = 200  # bytes: below every file system's limit on one name


def _ranges(ref: BlockRef) -> Iterator[tuple[int, int, int]]:
    """(first seq, first position, count) of a sealed member's position runs."""
    seq = ref.first_seq
    for pos, n in ref.runs:
        yield seq, pos, n
        seq += n


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
        self._block_cache: dict[tuple[str, int, int], bytes] = {}  # the last block read
        self._metas: dict[str, SessionInfo] = {}
        self._ids: dict[str, tuple[str, int, int]] = {}
        self._flocked = False
        self._format = FORMAT_VERSION  # of the files, from convlog.json
        # Position ranges the last verification walk of a session saw (_own_units).
        self._walked_positions: dict[str, list[tuple[int, int, int]]] = {}
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
                    self._refuse = self._init_format()
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
            self._refuse = self._init_format()
            txn = self._read_txn()
        finally:
            if self._lock_fd >= 0:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        if txn is not None and not txn.done:
            raise StoreUnreadable(
                f"{self.url}: its last write was interrupted; finishing or undoing it "
                f"needs write access to {self.root}, which this process does not have")
        self._last = 0 if txn is None else txn.new

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"cannot write {self.url}: the store is read-only "
                                f"(no write access to {self.root})")

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
                self._format = int(meta.get("version", 0))
                if self._format > FORMAT_VERSION:
                    raise newer_store(self.url, meta["version"], FORMAT_VERSION, "format")
            except (msgspec.DecodeError, AttributeError, ValueError) as exc:
                raise StoreError(f"{self.url}: unreadable {path}: {exc}") from None
        else:
            # convlog.json.tmp: a creation killed before its rename (written anew below).
            if any(p for p in self.root.iterdir()
                   if p.name not in ("lock", "sessions", "convlog.json.tmp")):
                raise StoreError(f"{self.url}: {self.root} is not empty and not a convlog store")
            meta = {"format": FORMAT, "version": FORMAT_VERSION,
                    "chain": self.chain.algorithm, "key": self.chain.fingerprint()}
            _write_atomic(path, msgspec.json.encode(meta) + b"\n", durable=True)
            self._format = FORMAT_VERSION
        return check_chain(self.url, str(meta["chain"]), str(meta.get("key", "")), self.chain)

    def _upgrade_format(self) -> bool:
        """Before the first member this release seals (file lock held): say so in
        ``convlog.json``, so that the releases before refuse the store. The file is
        read again: a newer release may have raised it since this store opened. Its
        number is never lowered: False (no seal; the events stay in the tail) when it
        is newer than this release's."""
        if self._format == FORMAT_VERSION:
            return True
        path = self.root / "convlog.json"
        meta = msgspec.json.decode(path.read_bytes())
        self._format = int(meta.get("version", 0))
        if self._format > FORMAT_VERSION:
            log.warning("jsonl_format_newer", url=self.url, version=self._format)
            return False
        if self._format < FORMAT_VERSION:
            meta["version"] = FORMAT_VERSION
            _write_atomic(path, msgspec.json.encode(meta) + b"\n", durable=True)
            self._format = FORMAT_VERSION
            log.info("jsonl_format_upgraded", url=self.url, version=FORMAT_VERSION)
        return True

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
        self._move_aside(self._path(session_id), keep, session_id, why)

    def _move_aside(self, path: Path, keep: int, session_id: str, why: str) -> None:
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
            m = _meta_dec.decode(path.read_bytes())
            bytes.fromhex(m.genesis)  # every later read of it may take it as it is
            if len(m.genesis) != 2 * HASH_BYTES or m.id != session_id:
                raise ValueError("not this session's id and chain start")
        except FileNotFoundError:
            raise UnknownSession(session_id) from None
        except (msgspec.DecodeError, ValueError) as exc:
            raise CorruptLog(session_id, 0, f"unreadable {path.name}: {exc}") from None
        return m

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

    def _blocks_path(self, session_id: str) -> Path:
        return self._sessions_dir / f"{session_id}.blocks"

    def _state(self, session_id: str) -> _State:
        """The session's state, caught up with what other processes appended or sealed.

        A seal appends its blocks before it replaces the tail, so a tail that seems
        to start after the blocks end was replaced after the blocks were read: read
        the blocks again (a few times) before calling it damage.
        """
        st = self._states.get(session_id)
        if st is None:
            m = self._meta(session_id)
            st = self._states[session_id] = _State(m.fork_seq or 0, bytes.fromhex(m.genesis))
            st.paths = (str(self._path(session_id)), str(self._blocks_path(session_id)))
        elif self._unchanged(st):
            return st
        for _ in range(5):
            if self._parse_blocks(session_id, st):
                st.tail_ino = -1  # the tail is counted against the new blocks again
            self._read_tail(session_id, st)
            if st.gap is None or not self._blocks_grew(session_id, st):
                break
            st.gap = None
            st.tail_ino = -1
        return st

    @staticmethod
    def _unchanged(st: _State) -> bool:
        """Two stats instead of two reads when no one wrote since ``st`` was read."""
        try:
            tail = os.stat(st.paths[0])
        except FileNotFoundError:
            return False
        if tail.st_ino != st.tail_ino or tail.st_size != st.size:
            return False
        try:
            return os.stat(st.paths[1]).st_size == st.blocks_size
        except FileNotFoundError:
            return st.blocks_size == 0

    def _blocks_grew(self, session_id: str, st: _State) -> bool:
        try:
            size = self._blocks_path(session_id).stat().st_size
        except FileNotFoundError:
            return False
        return st.bad_block is None and size > st.blocks_size

    def _read_tail(self, session_id: str, st: _State) -> None:
        path = self._path(session_id)
        try:
            with open(path, "rb") as f:
                info = os.fstat(f.fileno())
                if info.st_ino != st.tail_ino:  # new, or replaced by a seal
                    st.tail_ino = info.st_ino
                    st._reset_tail()
                data = b""
                if info.st_size > st.size:
                    f.seek(st.size)
                    data = f.read(info.st_size - st.size)
        except FileNotFoundError:
            st.tail_ino = -1
            st._reset_tail()
            return
        end = data.rfind(b"\n") + 1  # a partial last line is being written (or torn)
        offset = st.size
        for line in data[:end].split(b"\n")[:-1]:
            try:
                rec = _line_dec.decode(line)
                env = _envelope(rec.event)
                h = bytes.fromhex(rec.hash)
            except (msgspec.DecodeError, ValueError) as exc:
                raise CorruptLog(session_id, st.version + 1,
                                 f"unreadable line at byte {offset}: {exc}") from None
            if offset == 0 and (st.blocks or st.bad_block is not None):
                self._place_tail(st, env.seq)
            if st.stale_end == offset and st.base < env.seq <= st.sealed and st.stale:
                st.stale_end = offset + len(line) + 1  # a line a block holds already
            else:
                st.version += 1
                st.head = h
                st.offsets.append(offset)
                st.positions.append(rec.pos)
                self._ids[env.id] = (session_id, env.seq, rec.pos)
            offset += len(line) + 1
        st.size = offset
        if st.bad_block is not None and not st.offsets and not st.stale and st.gap is None:
            st.gap = f"sealed events after seq {st.sealed} are unreadable: {st.bad_block}"

    @staticmethod
    def _place_tail(st: _State, first_seq: int) -> None:
        """Where the tail starts, from its first line's seq: right after the blocks, or
        earlier when a seal was cut short (those lines are skipped)."""
        if st.base < first_seq <= st.sealed:
            st.stale = st.sealed - first_seq + 1
        elif first_seq > st.sealed + 1:
            st.gap = (f"sealed events from seq {st.sealed + 1} are unreadable: "
                      f"{st.bad_block}" if st.bad_block is not None else
                      f"the tail starts at seq {first_seq}, but the sealed blocks end at "
                      f"seq {st.sealed}")

    def _parse_blocks(self, session_id: str, st: _State) -> bool:
        """Index new members of ``.blocks`` (each one's ids: members are inflated once).
        True when there were new ones."""
        if st.bad_block is not None:
            return False
        path = self._blocks_path(session_id)
        try:
            with open(path, "rb") as f:
                f.seek(st.blocks_size)
                data = f.read()
        except FileNotFoundError:
            return False
        if not data:
            return False
        before = len(st.blocks)
        refs, bad = jsonl_blocks.scan(data, 0, st.sealed + 1)
        for found in refs:
            member = data[found.offset:found.offset + found.length]
            ref = found._replace(offset=found.offset + st.blocks_size)
            try:
                events = packed.unpack_json(jsonl_blocks.payload(member), session_id,
                                            ref.first_seq)
            except (BadMember, EventDecodeError) as exc:
                bad = BadMember(ref.offset, str(exc))
                break
            for e, pos in zip(events, ref.positions, strict=True):
                self._ids[e.id] = (session_id, e.seq, pos)
            st.blocks.append(ref)
            st.sealed = ref.last_seq
            st.sealed_head = ref.head
        if bad is not None:
            st.bad_block = BadMember(bad.offset + st.blocks_size if bad.offset < len(data)
                                     else bad.offset, str(bad), torn=bad.torn)
        st.blocks_size = st.blocks[-1].offset + st.blocks[-1].length if st.blocks else 0
        return len(st.blocks) > before

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

    def _tail_lines(self, session_id: str, st: _State, lo: int, hi: int) -> list[bytes] | None:
        """Tail lines with index lo..hi-1 (index 0: seq ``st.sealed + 1``); None when the
        tail file was replaced (sealed by another process) since ``st`` was read."""
        hi = min(hi, len(st.offsets))
        if lo >= hi:
            return []
        start = st.offsets[lo]
        stop = st.offsets[hi] if hi < len(st.offsets) else st.size
        try:
            with open(self._path(session_id), "rb") as f:
                if os.fstat(f.fileno()).st_ino != st.tail_ino:
                    return None
                f.seek(start)
                data = f.read(stop - start)
        except FileNotFoundError:
            return None
        return data.split(b"\n")[:-1]

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
                body = jsonl_blocks.payload(member)
                self._block_cache = {key: body}
            if upcasting_active():
                objs = packed.unpack_builtins(body, session_id, ref.first_seq, json=True)
                lo, hi = max(first - ref.first_seq, 0), max(last - ref.first_seq + 1, 0)
                return [from_stored(o) for o in objs[lo:hi]]
            events = packed.unpack_range(body, session_id, ref.first_seq, first, last,
                                         json=True)
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
            lines = self._tail_lines(session_id, st, lo, hi)
            if lines is None:  # sealed meanwhile: read the new state
                continue
            for i, line in enumerate(lines):
                out.append(self._decode_line(session_id, st.sealed + lo + i + 1, line)[1])
            return out
        raise StoreError(f"{self.url}: the files of session {session_id} keep changing "
                         "under the reader")

    def _decode_line(self, session_id: str, seq: int, line: bytes) -> tuple[int, AnyEvent]:
        try:
            rec = _line_dec.decode(line)
            return rec.pos, _event(rec.event)  # a newer version raises
        except (msgspec.DecodeError, EventDecodeError) as exc:
            raise CorruptLog(session_id, seq, f"unreadable event: {exc}") from None

    # ------------------------------------------------------------------ writing

    def _head(self, session_id: str) -> tuple[int, bytes]:
        with self._lock:
            pending = self._pending_heads.get(session_id)
            if pending is not None:
                return pending[0], pending[1]
            st = self._state(session_id)
            return (st.version if st.own() else 0), st.head

    def _write_head(self, session_id: str) -> tuple[int, bytes]:
        self._check_tails()  # first, under the lock: before anything reads the files
        self.session_info(session_id)
        pending = self._pending_heads.get(session_id)
        if pending is not None:
            return pending[0], pending[1]
        st = self._state(session_id)
        if st.stale or st.bad_block is not None:
            self._finish_seal(session_id)
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
            lines.append(_line(pos0 + i, h, e))
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
        for sid, lines in pending.items():
            st = self._states.get(sid)
            if st is not None and (len(st.offsets) + len(lines) >= SEAL_AT
                                   or st.size + sum(map(len, lines)) >= SEAL_BYTES):
                self._seal(sid)

    # ------------------------------------------------------------------ sealing

    def _seal(self, session_id: str) -> None:
        """Move the whole tail into ``.blocks`` once it holds ``SEAL_AT`` events or
        ``SEAL_BYTES`` (file lock held, the write done). A seal that cannot be made
        leaves the tail as it is: the events are safe there, only bigger."""
        st = self._state(session_id)
        n = len(st.offsets)
        if (not n or (n < SEAL_AT and st.size - st.offsets[0] < SEAL_BYTES)
                or st.gap is not None or st.bad_block is not None or st.stale):
            return
        path = self._path(session_id)
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_ino != st.tail_ino:
                    return
                f.seek(st.offsets[0])
                data = f.read()
            members = self._members(session_id, st, data.split(b"\n")[:n])
            if members is None:
                return
            cut = st.size - st.offsets[0]  # whole lines; anything after them stays
            if not self._upgrade_format():
                return
            blocks_path = self._blocks_path(session_id)
            new_file = not blocks_path.exists()
            with open(blocks_path, "ab") as f:
                start = f.seek(0, os.SEEK_END)
                f.write(b"".join(m for m, _ in members))
                f.flush()
                os.fsync(f.fileno())
            if new_file:
                _fsync_dir(self._sessions_dir)
            # The blocks are durable: now the tail may lose its lines. The new tail is
            # normally empty (nothing to fsync); the rename itself must last before a
            # later append lands in the new file.
            rest = data[cut:]
            _write_atomic(path, rest, durable=bool(rest))
            if not rest:
                _fsync_dir(self._sessions_dir)
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

    def _members(self, session_id: str, st: _State,
                 lines: list[bytes]) -> list[tuple[bytes, BlockRef]] | None:
        """The gzip members of these tail lines (and what they will index), or None
        (with a warning) when their events, decoded, would not reproduce the stored
        hashes exactly."""
        events: list[Event] = []
        hashes: list[bytes] = []
        positions: list[int] = []
        prev = st.sealed_head
        try:
            for line in lines:
                rec = _line_dec.decode(line)
                e = _typed_event(rec.event)
                h = bytes.fromhex(rec.hash)
                if self.chain.link(prev, canonical(e)) != h:
                    raise ValueError(f"seq {e.seq} would not hash to its stored hash")
                events.append(e)
                hashes.append(h)
                positions.append(rec.pos)
                prev = h
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            log.warning("jsonl_seal_skipped", session_id=session_id, reason=str(exc))
            return None
        out = []
        before = st.sealed_head
        for i in range(0, len(events), SEAL_AT):
            chunk = events[i:i + SEAL_AT]
            head = hashes[i + len(chunk) - 1]
            member = jsonl_blocks.encode(chunk, session_id, head, positions[i:i + SEAL_AT],
                                         link=self.chain.link, prev=before)
            before = head
            refs, bad = jsonl_blocks.scan(member, 0, chunk[0].seq)
            if bad is not None or len(refs) != 1:  # never: the member was just made
                raise StoreError(f"a new block does not read back: {bad}")
            out.append((member, refs[0]))
        return out

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
                _write_atomic(path, data[st.stale_end:], durable=True)
                log.warning("jsonl_seal_finished", session_id=session_id, lines=st.stale)
                st.tail_ino = -1
        except OSError as exc:  # appends stay correct with the lines left: readers skip them
            log.warning("jsonl_seal_not_finished", session_id=session_id, error=str(exc))

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
            return st.version if st.own() else 0

    def _own_read(self, session_id: str, first: int, last: int) -> Iterator[AnyEvent]:
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

    def _own_stored(self, session_id: str) -> Iterator[Stored]:
        """Every own event with its chain hash (those inside a sealed block recomputed:
        only a block's last hash is stored)."""
        return (u for u in self._walk_files(session_id, spans=False, deep=True)
                if isinstance(u, Stored))

    def _own_units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        """A :class:`Span` per linked (version 2) sealed member, followed when ``deep``
        by its events; per event a :class:`Stored` for version 1 members and the tail.
        The position ranges seen are kept for :meth:`_own_positions`."""
        return self._walk_files(session_id, spans=True, deep=deep)

    def _own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        # The ranges of the files the walk read, not of a later state of them.
        return self._walked_positions.pop(session_id, None)

    def _recorded_genesis(self, session_id: str) -> bytes | None:
        try:
            return bytes.fromhex(self._meta(session_id).genesis)
        except ValueError as exc:
            raise CorruptLog(session_id, 0, f"unreadable genesis in its meta file: {exc}"
                             ) from None

    def _link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        return jsonl_blocks.link_holds(self.chain.link, session_id, prev, span.body)

    def _span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        objs = packed.unpack_builtins(jsonl_blocks.payload(span.body), session_id, span.seq,
                                      json=True)
        return self.chain.links(prev, [canonical(o) for o in objs])

    def _walk_files(self, session_id: str, *, spans: bool, deep: bool
                    ) -> Iterator[Stored | Span]:
        m = self._meta(session_id)
        base = m.fork_seq or 0
        path = self._path(session_id)
        self._walked_positions.pop(session_id, None)
        with self._lock:
            self._readable()
            # The tail first: a seal appends its blocks before it replaces the tail.
            data = path.read_bytes() if path.exists() else b""
            blocks_path = self._blocks_path(session_id)
            sealed_data = blocks_path.read_bytes() if blocks_path.exists() else b""
        refs, bad = jsonl_blocks.scan(sealed_data, 0, base + 1)
        try:
            prev = bytes.fromhex(m.genesis)
        except ValueError:
            prev = b""  # verify reports the meta file (_recorded_genesis)
        sealed = base
        ranges: list[tuple[int, int, int]] = []
        for ref in refs:
            member = sealed_data[ref.offset:ref.offset + ref.length]
            if spans and ref.link:
                yield Span(ref.first_seq, ref.last_seq, ref.head, member,
                           row_first=ref.first_seq, row_last=ref.last_seq)
            if spans and ref.link and deep:
                found = self._typed_block(session_id, ref, member)
                if isinstance(found, str):
                    yield Stored(ref.first_seq, b"", None, found)
                    return
                if found is not None:  # the span's last hash is what these must reach
                    for i, e in enumerate(found):
                        yield Stored(ref.first_seq + i, b"", None, None, canon=canonical(e),
                                     event=e)
                    prev, sealed = ref.head, ref.last_seq
                    ranges.extend(_ranges(ref))
                    continue
            if not (spans and ref.link) or deep:
                try:
                    objs = packed.unpack_builtins(jsonl_blocks.payload(member), session_id,
                                                  ref.first_seq, json=True)
                    if len(objs) != ref.size:
                        raise BadMember(-1, f"it holds {len(objs)} events, its index "
                                            f"{ref.size}")
                except (BadMember, EventDecodeError) as exc:
                    yield Stored(ref.first_seq, b"", None,
                                 f"unreadable block at byte {ref.offset}: {exc}")
                    return
                if spans and ref.link:  # the span's last hash is what these must reach
                    for i, built in enumerate(objs):
                        yield Stored(ref.first_seq + i, b"", built, None, canon=canonical(built))
                else:
                    # Only a block's last hash is stored: the others are the chain's own
                    # links, so a change anywhere in the block shows at its last seq.
                    last = len(objs) - 1
                    for i, (built, pos) in enumerate(zip(objs, ref.positions, strict=True)):
                        c = canonical(built)
                        h = ref.head if i == last else self.chain.link(prev, c)
                        yield Stored(ref.first_seq + i, h, built, None, pos, c)
                        prev = h
            prev, sealed = ref.head, ref.last_seq
            ranges.extend(_ranges(ref))
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        first = base + 1
        if (refs or bad is not None) and lines:
            first = self._tail_seq(lines[0], base, sealed)
        if bad is not None and (not lines or first > sealed + 1):
            yield Stored(sealed + 1, b"", None, f"unreadable sealed block: {bad}")
            return
        for i, line in enumerate(lines):
            seq = first + i
            if seq <= sealed:
                continue  # a line a block holds already (a seal cut short)
            try:
                rec = _line_dec.decode(line)
                h = bytes.fromhex(rec.hash)
            except (msgspec.DecodeError, ValueError) as exc:
                yield Stored(seq, b"", None, f"unreadable line: {exc}")
                continue
            try:
                obj: Any = _event_obj(rec.event)
            except msgspec.DecodeError as exc:
                yield Stored(seq, h, None, f"unreadable event: {exc}", rec.pos)
                continue
            if not isinstance(obj, dict):
                yield Stored(seq, h, None, "the event is not a JSON object", rec.pos)
                continue
            at = int(obj.get("seq", seq)) if isinstance(obj.get("seq", seq), int) else seq
            if ranges and ranges[-1][0] + ranges[-1][2] == at \
                    and ranges[-1][1] + ranges[-1][2] == rec.pos:
                ranges[-1] = (ranges[-1][0], ranges[-1][1], ranges[-1][2] + 1)
            else:
                ranges.append((at, rec.pos, 1))
            yield Stored(int(obj.get("seq", seq)), h, obj, None, rec.pos)
        if spans:
            self._walked_positions[session_id] = ranges

    @staticmethod
    def _typed_block(session_id: str, ref: BlockRef, member: bytes
                     ) -> list[AnyEvent] | str | None:
        """A sealed member's events as stored, decoded in bulk (a seal wrote only
        events whose typed form hashes to the chain); None when they do not decode
        typed (an older shape: read as builtins instead), a reason when unreadable."""
        try:
            body = jsonl_blocks.payload(member)
        except BadMember as exc:
            return f"unreadable block at byte {ref.offset}: {exc}"
        try:
            events = packed.unpack_json(body, session_id, ref.first_seq)
        except EventDecodeError:
            return None
        if len(events) != ref.size:
            return (f"unreadable block at byte {ref.offset}: it holds {len(events)} events, "
                    f"its index {ref.size}")
        return events

    @staticmethod
    def _tail_seq(line: bytes, base: int, sealed: int) -> int:
        """The seq of the tail's first line after sealed blocks (sealed + 1 when it
        cannot be read or is not a seq of the session: the line is then reported)."""
        try:
            seq = _envelope(_line_dec.decode(line).event).seq
        except (msgspec.DecodeError, ValueError):
            return sealed + 1
        return seq if seq > base else sealed + 1

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
        self._refuse_read_only()
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
