"""Stores, opened by URL: ``memory://``, ``sqlite:///path.db`` (the embedded default),
``jsonl:///dir`` and ``postgresql://user@host:port/db``.

Options come as keyword arguments or URL query parameters:
``durability=sync|batched``, ``batch_ms``, ``batch_events``, ``key_file`` (a secret
that turns the hash chain into an HMAC), ``max_event_bytes``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from engine.errors import ConcurrencyError, StoreError
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
from engine.store.chain import read_key
from engine.store.jsonl import JSONLStore
from engine.store.memory import MemoryStore
from engine.store.sqlite import SQLiteStore

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
               batch_events: int | None = None, max_event_bytes: int | None = None) -> Store:
    """Open a store from its URL.

    ``sqlite:///relative.db`` and ``sqlite:////absolute/path.db`` follow the
    SQLAlchemy convention (so does ``jsonl:///dir``); ``sqlite:///:memory:`` is a
    private in-memory database.
    """
    base, _, query = url.partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(params) - set(_OPTIONS))
    if unknown and not base.startswith(("postgresql:", "postgres:")):
        raise StoreError(f"{url!r}: unknown option(s) {', '.join(unknown)}; "
                         f"known: {', '.join(_OPTIONS)}")
    key_file = key_file or params.pop("key_file", None)
    if key is None and key_file:
        try:
            key = read_key(key_file)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read key file: {exc}") from None
    try:
        mode = durability or params.pop("durability", SYNC)
        window_ms = batch_ms if batch_ms is not None else float(params.pop("batch_ms", 50))
        window_events = (batch_events if batch_events is not None
                         else int(params.pop("batch_events", 1000)))
        limit = (max_event_bytes if max_event_bytes is not None
                 else int(params["max_event_bytes"]) if "max_event_bytes" in params else None)
    except ValueError as exc:
        raise StoreError(f"{url!r}: bad option value: {exc}") from None
    params.pop("max_event_bytes", None)
    if mode not in (SYNC, BATCHED):
        raise StoreError(f"{url!r}: durability must be sync or batched, not {mode!r}")

    if base.startswith("memory://"):
        return MemoryStore(base, key=key, durability=mode, max_event_bytes=limit)
    if base.startswith("sqlite:///"):
        path = base[len("sqlite:///"):]
        if not path:
            raise StoreError(f"{url!r}: missing database path")
        return SQLiteStore(path, url=url, durability=mode, batch_ms=window_ms,
                           batch_events=window_events, key=key, max_event_bytes=limit)
    if base.startswith("jsonl:///"):
        path = base[len("jsonl:///"):]
        if not path:
            raise StoreError(f"{url!r}: missing directory")
        return JSONLStore(path, url=url, durability=mode, batch_ms=window_ms,
                          batch_events=window_events, key=key, max_event_bytes=limit)
    if base.startswith(("postgresql://", "postgres://")):
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
