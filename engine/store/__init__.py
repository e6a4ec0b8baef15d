"""Stores, opened by URL: ``memory://`` and ``sqlite:///path.db`` (the embedded default)."""

from __future__ import annotations

from engine.errors import StoreError
from engine.store.base import SessionInfo, Store
from engine.store.memory import MemoryStore
from engine.store.sqlite import SQLiteStore

DEFAULT_URL = "sqlite:///convlog-demo.db"

__all__ = ["DEFAULT_URL", "MemoryStore", "SQLiteStore", "SessionInfo", "Store", "open_store"]


def open_store(url: str) -> Store:
    """Open a store from its URL.

    ``sqlite:///relative.db`` and ``sqlite:////absolute/path.db`` follow the
    SQLAlchemy convention; ``sqlite:///:memory:`` is a private in-memory database.
    """
    if url == "memory://" or url.startswith("memory://"):
        return MemoryStore(url)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if not path:
            raise StoreError(f"{url!r}: missing database path")
        return SQLiteStore(path, url=url)
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise StoreError(f"unsupported store URL {url!r} (scheme {scheme!r}); use memory:// or sqlite:///")
