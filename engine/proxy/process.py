"""The recorder in a process of its own (what ``convlog proxy`` runs).

In a thread, the recorder's work (parsing, checking, hashing, committing each
event) would hold the interpreter lock while the forwarder waits to send the
next chunk. In its own process it never does: the forwarder only puts each
job on a queue (a feeder thread writes it to a pipe). The child records the
jobs in order. If the proxy dies (``kill -9``), the child records what was
already queued, ends the calls in flight as broken (``the proxy stopped``),
and exits: nothing the forwarder handed over is lost.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import queue
import signal
from typing import Any

from engine.errors import StoreError
from engine.proxy.recorder import END, STOP, SYNC, Recorder

_READY = "ready"


class RecorderProcess:
    """The :class:`Recorder` API (``start``, ``put``, ``sync``, ``stop``) over a child
    process."""

    def __init__(self, store_url: str, *, key_file: str | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")  # no inherited threads or sockets
        self._jobs: Any = ctx.Queue()
        self._acks: Any = ctx.Queue()
        self._process = ctx.Process(target=_child, name="convlog-proxy-recorder",
                                    args=(store_url, key_file, self._jobs, self._acks,
                                          os.getpid()))
        self._tokens = itertools.count(1)

    def start(self, timeout: float = 60.0) -> None:
        self._process.start()
        answer = self._acks.get(timeout=timeout)
        if answer != _READY:
            self._process.join(10)
            raise StoreError(str(answer))

    def put(self, job: tuple[Any, ...]) -> None:
        self._jobs.put_nowait(job)

    def sync(self, timeout: float = 30.0) -> bool:
        token = next(self._tokens)
        self._jobs.put_nowait((SYNC, 0, token))
        try:
            while self._acks.get(timeout=timeout) != token:
                pass
        except queue.Empty:
            return False
        return True

    def stop(self, timeout: float = 30.0) -> None:
        if self._process.is_alive():
            self._jobs.put_nowait((STOP, 0))
            self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
        for q in (self._jobs, self._acks):
            q.close()
            q.join_thread()


def _child(store_url: str, key_file: str | None, jobs: Any, acks: Any, parent: int) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the proxy stops the
    # recorder itself, after what it queued is recorded.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    recorder = Recorder(store_url, key_file=key_file)
    try:
        recorder.open()
    except Exception as exc:  # reported by start() in the proxy
        acks.put(f"{type(exc).__name__}: {exc}")
        return
    acks.put(_READY)
    try:
        while True:
            try:
                job = jobs.get(timeout=0.5)
            except queue.Empty:
                if os.getppid() != parent:  # the proxy died: record what is left
                    _drain(recorder, jobs)
                    return
                continue
            if job[0] == STOP:
                return
            if job[0] == SYNC:
                acks.put(job[2])
                continue
            recorder.handle(job)
    finally:
        recorder.close()


def _drain(recorder: Recorder, jobs: Any) -> None:
    with contextlib.suppress(queue.Empty, OSError, EOFError):
        while True:
            job = jobs.get(timeout=0.2)
            if job[0] not in (STOP, SYNC):
                recorder.handle(job)
    for call_id in recorder.in_flight():
        recorder.handle((END, call_id, "the proxy stopped before the call ended"))
