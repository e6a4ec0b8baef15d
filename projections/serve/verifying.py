"""The verify badge's answer, computed in a child process when the store allows it.

Verification is CPU-bound Python. In a thread of the server it shares the
interpreter with every answer the page waits for, and a 1M-event session takes
tens of seconds: scrubbing then waits on it. A store another process can open
(a file or a database, named by its URL) is verified in one child process shared
by the viewers of this process; a store private to this process (``memory://``,
an in-memory SQLite) is verified in place.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from engine.errors import KeyRequired
from engine.store import anchor as anchoring
from engine.store import open_store
from engine.store.base import Store

_SHAREABLE = ("sqlite:", "jsonl:", "postgresql:", "postgres:")
# The child's niceness above the server's: a verification is background work (a minute
# of CPU at 1M events), and on a busy machine the page's answers are to go first. Safe
# in a process of its own: a thread at a lower priority could be descheduled while it
# holds the interpreter lock the answers wait for.
VERIFY_NICE = 10
_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def verify_json(store: Store, sid: str, anchor: anchoring.Anchor | None) -> dict[str, Any]:
    """``{ok, version, verified_upto, problem, anchor}`` for one session."""
    version = store.version(sid)
    try:
        report = anchoring.check(store, [anchor] if anchor else [], sid)
    except KeyRequired as exc:
        return {"ok": None, "version": version, "verified_upto": 0, "problem": str(exc),
                "anchor": None}
    first = report.first
    upto = version if first is None else min(version, first.seq - 1)
    anchored = None
    if anchor is not None:  # a problem before the anchored seq, or about it, fails it
        broken = first is not None and (first.seq <= anchor.seq or "anchor" in first.reason)
        anchored = {"seq": anchor.seq, "holds": not broken}
    return {"ok": report.ok, "version": version, "verified_upto": upto,
            "problem": None if first is None else str(first), "anchor": anchored}


def _in_child(url: str, key: bytes | None, sid: str, token: str | None) -> dict[str, Any]:
    store = open_store(url, key=key, create=False)
    try:
        return verify_json(store, sid, anchoring.parse(token) if token else None)
    finally:
        store.close()


def _follow_parent(parent: int) -> None:
    """In the child: end when the viewer's process is gone. A server killed by a
    signal runs no exit handler, and the child would wait on its queue forever."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="convlog-verify-parent", daemon=True).start()


def _start_child(parent: int) -> None:
    """The child's initializer: it gives way to the server, and ends with it."""
    os.nice(VERIFY_NICE)
    _follow_parent(parent)


def shareable(store: Store) -> bool:
    url = store.url.lower()
    return url.startswith(_SHAREABLE) and ":memory:" not in url


def verify_elsewhere(store: Store, sid: str, anchor: anchoring.Anchor | None) -> dict[str, Any]:
    """``verify_json`` in the shared child process when the store can be opened there."""
    global _pool  # noqa: PLW0603 - one child for every viewer of this process
    if not shareable(store):
        return verify_json(store, sid, anchor)
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_start_child,
                                        initargs=(os.getpid(),))
        pool = _pool
    token = anchor.token() if anchor else None
    try:
        result: dict[str, Any] = pool.submit(_in_child, store.url, store.chain.key, sid,
                                             token).result()
    except BrokenProcessPool:  # the child died (killed, out of memory): start afresh
        with _pool_lock:
            _pool = None
        return verify_json(store, sid, anchor)
    return result
