"""Stores, opened by URL: ``memory://``, ``sqlite:///path.db`` (the embedded default),
``jsonl:///dir`` and ``postgresql://user@host:port/db``.

Options come as keyword arguments or URL query parameters:
``durability=sync|batched``, ``batch_ms``, ``batch_events``, ``key_file`` (a secret
that turns the hash chain into an HMAC), ``max_event_bytes``.
"""

from __future__ import annotations

import importlib
import math
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import msgspec

from engine.errors import (
    ConcurrencyError,
    CorruptLog,
    ReadOnlyStore,
    StoreError,
    StoreNotFound,
    StoreUnreadable,
)
from engine.store.base import (
    ANY,
    BATCHED,
    NO_STREAM,
    STREAM_EXISTS,
    SYNC,
    Appended,
    Expected,
    Record,
    SessionInfo,
    Store,
    StreamState,
)
from engine.store.chain import Chain, read_key
from engine.store.jsonl_files import FORMAT as JSONL_FORMAT
from engine.store.sqlite import SQLiteStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from engine.store.jsonl import JSONLStore
    from engine.store.memory import MemoryStore


def __getattr__(name: str) -> object:
    """The JSONL and memory stores load when first named or opened (PEP 562): a SQLite
    store's reader (``convlog show``) never needs their modules (about 30 ms of its
    start). Each is then kept in the package, so later reads skip this function."""
    homes = {"JSONLStore": "engine.store.jsonl", "MemoryStore": "engine.store.memory"}
    if name not in homes:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found: object = getattr(importlib.import_module(homes[name]), name)
    globals()[name] = found
    return found


DEFAULT_URL = "sqlite:///convlog-demo.db"

__all__ = [
    "ANY",
    "BATCHED",
    "DEFAULT_URL",
    "NO_STREAM",
    "STREAM_EXISTS",
    "SYNC",
    "Appended",
    "Expected",
    "JSONLStore",
    "MemoryStore",
    "Record",
    "SQLiteStore",
    "SessionInfo",
    "Store",
    "StreamState",
    "open_store",
    "retry",
]

T = TypeVar("T")
_OPTIONS = ("durability", "batch_ms", "batch_events", "key_file", "max_event_bytes")


def open_store(url: str, *, key: bytes | None = None, key_file: str | None = None,
               durability: str | None = None, batch_ms: float | None = None,
               batch_events: int | None = None, max_event_bytes: int | None = None,
               create: bool = True, read_only: bool = False) -> Store:
    """Open a store from its URL.

    ``sqlite:///relative.db`` and ``sqlite:////absolute/path.db`` follow the
    SQLAlchemy convention (so does ``jsonl:///dir``); ``sqlite:///:memory:`` is a
    private in-memory database. Schemes are case-insensitive.

    ``create=False`` is for readers: a store that does not exist raises
    :class:`StoreNotFound` instead of being created empty (``memory://`` never
    exists outside the process that made it). Files that exist but cannot be read
    as a store raise :class:`StoreUnreadable`.

    ``read_only=True`` (the read commands) opens a SQLite file read-only
    (``mode=ro``): a crashed writer's WAL is read, never checkpointed, so reading
    leaves the file's bytes as they were; writes raise :class:`ReadOnlyStore`.
    """
    base, _, query = url.partition("?")
    scheme, sep, rest = base.partition(":")
    base = scheme.lower() + sep + rest  # SQLITE:///x works like sqlite:///x
    params = dict(parse_qsl(query, keep_blank_values=True))
    postgres = base.startswith(("postgresql:", "postgres:"))
    unknown = sorted(set(params) - set(_OPTIONS))
    if unknown and not postgres:
        raise StoreError(f"{url!r}: unknown option(s) {', '.join(unknown)}; "
                         f"known: {', '.join(_OPTIONS)}")
    key_file = key_file or params.pop("key_file", None)
    if key is None and key_file:
        try:
            key = read_key(key_file)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read key file: {exc}") from None
    mode = durability or params.pop("durability", SYNC)
    window_ms = _option(url, params, "batch_ms", batch_ms, kind=float, minimum=0.0)
    window_events = _option(url, params, "batch_events", batch_events, kind=int, minimum=1)
    limit = _option(url, params, "max_event_bytes", max_event_bytes, kind=int, minimum=1)
    if window_ms is None:
        window_ms = 50.0
    if window_events is None:
        window_events = 1000
    if mode not in (SYNC, BATCHED):
        raise StoreError(f"{url!r}: durability must be sync or batched, not {mode!r}")

    if base.startswith("memory://"):
        if not create:
            raise StoreNotFound(f"no such store: {url} (a memory:// store lives only inside "
                                "the process that made it)")
        from engine.store.memory import MemoryStore  # noqa: PLC0415 - on first use

        return MemoryStore(base, key=key, durability=mode, max_event_bytes=limit)
    if base.startswith("sqlite:///"):
        path = base[len("sqlite:///"):]
        if not path:
            raise StoreError(f"{url!r}: missing database path")
        if path != ":memory:":
            _check_place(url, "sqlite", path, create=create, is_store=_is_sqlite)
        try:
            return SQLiteStore(path, url=url, durability=mode, batch_ms=window_ms,
                               batch_events=window_events, key=key, max_event_bytes=limit,
                               read_only=read_only and path != ":memory:")
        except StoreError as exc:
            # A file that is there but fails as a database is unreadable; one that could
            # not be made (a read-only directory) or written keeps its own message.
            if (isinstance(exc.__context__, sqlite3.DatabaseError)
                    and not isinstance(exc, (ReadOnlyStore, StoreUnreadable))
                    and Path(path).exists()):
                raise StoreUnreadable(f"{url}: the database cannot be read: "
                                      f"{exc.__context__}") from None
            raise
        except UnicodeDecodeError as exc:  # SQLite hands back a damaged schema's text
            raise StoreUnreadable(f"{url}: the database cannot be read: {exc}") from None
    if base.startswith("jsonl:///"):
        path = base[len("jsonl:///"):]
        if not path:
            raise StoreError(f"{url!r}: missing directory")
        _check_place(url, "jsonl", path, create=create,
                     is_store=lambda p: (p / "convlog.json").is_file())
        _check_jsonl_format(url, Path(path) / "convlog.json")
        _check_jsonl_txn(url, Path(path) / "txn")
        from engine.store.jsonl import JSONLStore  # noqa: PLC0415 - on first use

        try:
            return JSONLStore(path, url=url, durability=mode, batch_ms=window_ms,
                              batch_events=window_events, key=key, max_event_bytes=limit)
        except CorruptLog as exc:
            raise StoreUnreadable(f"{url}: {exc.reason}") from None
    if postgres:
        try:
            from engine.store.postgres import PostgresStore  # noqa: PLC0415 - optional extra
        except ImportError as exc:
            raise StoreError(f"{url!r} needs psycopg 3: pip install 'convlog[postgres]' "
                             f"({exc})") from None
        dsn = base if not params else f"{base}?{urlencode(params, quote_via=quote)}"
        return PostgresStore(dsn, url=url, durability=mode, key=key, max_event_bytes=limit)
    scheme = urlsplit(base).scheme or base
    raise StoreError(f"unsupported store URL {url!r} (scheme {scheme!r}); use memory://, "
                     "sqlite:///path.db, jsonl:///dir or postgresql://user@host:port/db")


N = TypeVar("N", int, float)


def _option(url: str, params: dict[str, str], name: str, given: N | None, *,
            kind: Callable[[str], N], minimum: N) -> N | None:
    """A numeric option from a keyword or the URL query, refused at open when out of range."""
    text = params.pop(name, None)
    raw = str(given) if given is not None else text
    if raw is None:
        return None
    try:
        value = kind(raw)
    except (ValueError, OverflowError):
        raise StoreError(f"{url!r}: {name}={raw!r} is not a valid "
                         f"{'integer' if kind is int else 'number'}") from None
    if not math.isfinite(value) or value < minimum:
        raise StoreError(f"{url!r}: {name}={raw!r} must be at least {minimum}")
    return value


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(16)
    return head == b"SQLite format 3\x00"


def _check_jsonl_format(url: str, path: Path) -> None:
    """A damaged ``convlog.json`` makes the whole directory unreadable as a store."""
    try:
        meta = msgspec.json.decode(path.read_bytes())
    except FileNotFoundError:
        return  # a new store
    except (OSError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise StoreUnreadable(f"{url}: unreadable {path}: {exc}") from None
    keyed = Chain(b"k" * 16).algorithm
    fingerprint = meta.get("key", "") if isinstance(meta, dict) else None
    if not (isinstance(meta, dict) and meta.get("format") == JSONL_FORMAT
            and isinstance(meta.get("version"), int) and isinstance(fingerprint, str)
            and (meta.get("chain"), bool(fingerprint)) in ((Chain(None).algorithm, False),
                                                            (keyed, True))
            and all(c in "0123456789abcdef" for c in fingerprint)):
        raise StoreUnreadable(f"{url}: {path} is not a valid convlog JSONL format file")


def _check_jsonl_txn(url: str, path: Path) -> None:
    """The last write's record must be whole before anyone acts on it: opening a store
    finishes or undoes an interrupted write, and damage must not pass for one."""
    try:
        txn = msgspec.json.decode(path.read_bytes())
    except FileNotFoundError:
        return
    except (OSError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise StoreUnreadable(f"{url}: unreadable {path}: {exc}") from None
    fields = {"old": int, "new": int, "files": dict, "done": bool}
    if not (isinstance(txn, dict) and set(txn) == set(fields)
            and all(type(txn[k]) is t for k, t in fields.items())
            and all(isinstance(v, int) for v in txn["files"].values())):
        raise StoreUnreadable(f"{url}: {path} is not a valid record of the last write")


# What a JSONL store's creation writes before its convlog.json is in place: a writer
# killed then leaves only these, and the next one starts the store afresh.
_CREATION_LEFTOVERS = frozenset({"lock", "convlog.json.tmp"})


def _is_empty(place: Path) -> bool:
    if not place.is_dir():
        return place.stat().st_size == 0
    return all(p.name in _CREATION_LEFTOVERS
               or (p.name == "sessions" and p.is_dir() and not any(p.iterdir()))
               for p in place.iterdir())


def _check_place(url: str, scheme: str, path: str, *, create: bool,
                 is_store: Callable[[Path], bool]) -> None:
    """Refuse a missing store for a reader, and files that are not a store for anyone.

    The URL rule is SQLAlchemy's: three slashes then a relative path, four for an
    absolute one. A missing relative path whose absolute twin exists is the usual slip.
    A path the file system refuses to look up at all (a name over 255 bytes, ...)
    is a usage error, not a crash.
    """
    try:
        _check_path(url, scheme, path, create=create, is_store=is_store)
    except OSError as exc:
        raise StoreError(f"cannot open {url[:120]}...: {exc.strerror or exc}") from None


def _check_path(url: str, scheme: str, path: str, *, create: bool,
                is_store: Callable[[Path], bool]) -> None:
    place = Path(path)
    hint = ""
    if not place.is_absolute() and Path("/" + path).exists():
        hint = f" (did you mean {scheme}:////{path}? three slashes make a relative path)"
    elif not place.is_absolute():
        hint = (f" ({scheme}:///{path} is relative to the current directory; "
                f"{scheme}:////{path} would be absolute)")
    if not place.exists():
        if not create:
            raise StoreNotFound(f"no such store: {url}{hint}")
        if not place.parent.is_dir():
            raise StoreError(f"cannot open {url}: directory {place.parent} does not exist{hint}")
        return
    try:
        ok = is_store(place)
    except OSError as exc:
        raise StoreUnreadable(f"{url}: {exc}") from None
    if not ok:
        if create and _is_empty(place):
            return  # an empty file or directory becomes a new store
        if not create and scheme == "jsonl" and place.is_dir():
            raise StoreNotFound(f"no such store: {url} ({path} holds no convlog.json){hint}")
        raise StoreUnreadable(f"{url}: {path} is not a convlog {scheme} store")


def retry(fn: Callable[[], T], attempts: int = 5, *, backoff: float = 0.005,
          on_conflict: Callable[[ConcurrencyError], None] | None = None) -> T:
    """Call ``fn`` until it does not raise :class:`ConcurrencyError`, at most ``attempts``
    times, sleeping a jittered, doubling ``backoff`` between tries.

    ``fn`` must re-read what it decides on (e.g. ``Session.open`` then the command),
    so each try works from the log's latest version. The last conflict is re-raised.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    delay = backoff
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ConcurrencyError as exc:
            if attempt == attempts:
                raise
            if on_conflict is not None:
                on_conflict(exc)
            time.sleep(delay * (0.5 + random.random()))
            delay *= 2
    raise AssertionError("unreachable")
