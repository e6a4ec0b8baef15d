"""The files of a JSONL store (``engine.store.jsonl``) that are not a session's events:
``convlog.json`` (the format), ``txn`` (the last write's intent), and the small
helpers every writer of the directory uses (an atomic replace, a directory fsync,
snapshot file names)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from engine.codec import OnFirstUse
from engine.errors import CorruptLog, StoreError
from engine.store.base import check_chain, newer_store
from engine.store.chain import Chain

FORMAT = "convlog-jsonl"
# 2: sealed members carry a block link (jsonl_blocks index version 2).
# 3: sealed members may hold packed payload format 2 (engine.store.packed).
# An older store opens as it is; its convlog.json says 3 from the first seal this
# release writes into it (engine.store.legacy.jsonl_format), so the releases before
# refuse the store as newer rather than taking a member they cannot read for damage.
FORMAT_VERSION = 3


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def init_format(root: Path, url: str, chain: Chain) -> tuple[int, str | None]:
    """(the format of the files, the reason writes are refused or None): read from
    ``convlog.json``, or written there for a new store (the directory is empty)."""
    path = root / "convlog.json"
    if path.exists():
        try:
            meta = msgspec.json.decode(path.read_bytes())
            if meta.get("format") != FORMAT:
                raise StoreError(f"{url}: {path} is not a convlog JSONL store")
            version = int(meta.get("version", 0))
            if version > FORMAT_VERSION:
                raise newer_store(url, meta["version"], FORMAT_VERSION, "format")
        except (msgspec.DecodeError, AttributeError, ValueError) as exc:
            raise StoreError(f"{url}: unreadable {path}: {exc}") from None
    else:
        # convlog.json.tmp: a creation killed before its rename (written anew below).
        if any(p for p in root.iterdir()
               if p.name not in ("lock", "sessions", "convlog.json.tmp")):
            raise StoreError(f"{url}: {root} is not empty and not a convlog store")
        meta = {"format": FORMAT, "version": FORMAT_VERSION,
                "chain": chain.algorithm, "key": chain.fingerprint()}
        write_atomic(path, msgspec.json.encode(meta) + b"\n", durable=True)
        version = FORMAT_VERSION
    return version, check_chain(url, str(meta["chain"]), str(meta.get("key", "")), chain)


class Txn(msgspec.Struct):
    old: int
    new: int
    files: dict[str, int]  # session id -> file size before the write
    done: bool = False


_txn_dec = OnFirstUse(lambda: msgspec.json.Decoder(Txn))  # built on first use


def read_txn(root: Path) -> Txn | None:
    try:
        data = (root / "txn").read_bytes()
    except FileNotFoundError:
        return None
    try:
        return _txn_dec.decode(data)
    except msgspec.DecodeError as exc:
        raise CorruptLog("*", 0, f"unreadable {root / 'txn'}: {exc}") from None


def write_txn(root: Path, txn: Txn, *, durable: bool) -> None:
    path = root / "txn"
    with open(path, "r+b" if path.exists() else "wb") as f:
        data = msgspec.json.encode(txn) + b"\n"
        f.write(data)
        f.truncate(len(data))
        if durable:
            f.flush()
            os.fsync(f.fileno())


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


class SnapshotFiles:
    """``snapshots/<session id>/<name>/<seq>``: one file a snapshot body, the name
    encoded (:func:`snapshot_file_name`), the seq zero-padded so names sort."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _folder(self, session_id: str, name: str) -> Path:
        return self.root / session_id / snapshot_file_name(name)

    def put(self, session_id: str, name: str, seq: int, data: bytes, *, durable: bool) -> None:
        folder = self._folder(session_id, name)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{seq:020d}", data, durable=durable)

    def latest(self, session_id: str, name: str, max_seq: int) -> tuple[int, bytes] | None:
        folder = self._folder(session_id, name)
        if not folder.is_dir():
            return None
        seqs = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
        best = max((s for s in seqs if s <= max_seq), default=None)
        if best is None:
            return None
        return best, (folder / f"{best:020d}").read_bytes()
