"""Raising a JSONL store of format 1 or 2 to today's number (3) in ``convlog.json``.

The files of formats 1 and 2 are read as they are (their members by
``jsonl_blocks``, index version 1 by ``legacy.jsonl_index_v1``); only the number
changes, before the first member this release seals (packed payloads that the
releases before cannot read), so that those releases refuse the store as newer.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from engine.logging import get_logger
from engine.store.jsonl_files import FORMAT_VERSION, write_atomic

log = get_logger("convlog.store.jsonl")


def upgrade(root: Path, url: str) -> int:
    """With the file lock held: the format in ``convlog.json``, raised to today's
    unless a newer release has raised it further (the file is read again: it may have
    changed since the store opened). A number is never lowered."""
    path = root / "convlog.json"
    meta = msgspec.json.decode(path.read_bytes())
    version = int(meta.get("version", 0))
    if version > FORMAT_VERSION:
        log.warning("jsonl_format_newer", url=url, version=version)
    elif version < FORMAT_VERSION:
        meta["version"] = FORMAT_VERSION
        write_atomic(path, msgspec.json.encode(meta) + b"\n", durable=True)
        version = FORMAT_VERSION
        log.info("jsonl_format_upgraded", url=url, version=FORMAT_VERSION)
    return version
