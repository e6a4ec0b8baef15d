"""Recovery of a JSONL store's files after a crash (``engine.store.jsonl``): whether
an interrupted write reached the disk whole, torn last lines, and moving damaged
bytes aside to ``<file>.corrupt`` (nothing is deleted)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from engine.store import jsonl_lines
from engine.store.jsonl_files import Txn


def written_whole(txn: Txn, path_of: Callable[[str], Path]) -> bool:
    """Whether every line of an interrupted write ``txn`` is on disk, whole: then it
    is finished; else what it wrote is moved aside."""
    complete = 0
    whole = True
    for sid, before in txn.files.items():
        path = path_of(sid)
        data = path.read_bytes() if path.exists() else b""
        tail = data[before:]
        if tail and not tail.endswith(b"\n"):
            whole = False
        for line in tail.split(b"\n")[:-1]:
            try:
                jsonl_lines.line_dec.decode(line)
                complete += 1
            except msgspec.DecodeError:
                whole = False
    return whole and complete == txn.new - txn.old


def move_aside(path: Path, keep: int) -> tuple[Path, int] | None:
    """Cut ``path`` back to ``keep`` bytes, the cut bytes appended to
    ``<path>.corrupt`` first (both fsynced): (that file, bytes cut), or None when
    there was nothing to cut."""
    if not path.exists():
        return None
    with open(path, "r+b") as f:
        f.seek(keep)
        cut = f.read()
        if not cut:
            return None
        corrupt = path.with_name(path.name + ".corrupt")
        with open(corrupt, "ab") as out:
            out.write(cut if cut.endswith(b"\n") else cut + b"\n")
            out.flush()
            os.fsync(out.fileno())
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return corrupt, len(cut)


def torn_tails(sessions_dir: Path) -> list[tuple[str, int, int]]:
    """(session id, bytes kept, bytes cut) of every session file whose last line is
    cut off or unreadable. Reads nothing but the files and changes nothing."""
    found = []
    for path in sorted(sessions_dir.glob("*.jsonl")):
        data = path.read_bytes()
        if not data:
            continue
        end = len(data)
        if not data.endswith(b"\n"):
            end = data.rfind(b"\n") + 1
        else:
            start = data.rfind(b"\n", 0, end - 1) + 1
            try:
                jsonl_lines.line_dec.decode(data[start:end - 1])
            except msgspec.DecodeError:
                end = start
        if end != len(data):
            found.append((path.name[:-len(".jsonl")], end, len(data) - end))
    return found
