"""``convlog import --follow PATH``: keep importing as the agent writes.

Each round re-reads the path into a plan and writes what the store does not hold
yet: ids are the source's, so a round over an unchanged file writes nothing, and a
grown file (new lines of a live JSONL, new files of a directory) adds only its new
events. A round runs only when some file's size or modification time changed.

Crash safety comes from the same two facts: each session is appended whole (one
atomic append), and importing again writes exactly what is missing. A follower
killed at any point (``kill -9`` too) and started again loses and doubles nothing.
A round that fails (a live file's last line still being written reads as a
truncated line) writes nothing and is tried again at the next change.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from engine.importers.base import ImportInputError, drop_empty
from engine.importers.detect import plan_path
from engine.importers.write import write_plan
from engine.store.base import Store

DEFAULT_INTERVAL: Final = 1.0  # seconds between two looks at the path

Signature = tuple[tuple[str, int, int], ...]


def signature(path: Path) -> Signature:
    """Every file under ``path`` (or ``path`` itself) with its size and mtime."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:  # gone between the listing and the stat: the next round sees it
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(out)


def follow_round(store: Store, path: Path, fmt: str, *, lenient: bool) -> tuple[int, int]:
    """One round: the path read and written; (events written, sessions in the plan)."""
    plan = plan_path(path, fmt, lenient=lenient)
    if lenient:
        drop_empty(plan)
    if not plan.sessions:
        return 0, 0
    write_plan(store, plan)
    return plan.report.written, len(plan.sessions)


def follow(store: Store, path: Path, fmt: str, *, lenient: bool = False,
           interval: float = DEFAULT_INTERVAL, rounds: int | None = None,
           say: Callable[[str], None] | None = None) -> None:
    """Import ``path`` into ``store`` whenever it changes, until interrupted (or after
    ``rounds`` looks, for tests)."""
    seen: Signature | None = None
    failure = ""
    looked = 0
    while rounds is None or looked < rounds:
        looked += 1
        now = signature(path)
        if now != seen:
            try:
                written, sessions = follow_round(store, path, fmt, lenient=lenient)
            except ImportInputError as exc:
                if str(exc) != failure:  # said once, tried again at the next change
                    failure = str(exc)
                    print(f"convlog import --follow: {exc}; nothing written this round, "
                          "trying again when it changes", file=sys.stderr, flush=True)
                seen = now  # tried again when it changes (a line still being written)
                time.sleep(interval)
                continue
            failure = ""
            seen = now
            if written:
                (say or _say)(f"{time.strftime('%H:%M:%S')} {written} event(s) written "
                    f"({sessions} session(s) in {path.name})")
        time.sleep(interval)


def _say(line: str) -> None:
    print(line, flush=True)  # a follower's output is read as it comes (a pipe, a log)
