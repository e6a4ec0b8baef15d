"""The recorder in a process of its own (what ``convlog proxy`` runs).

In a thread, the recorder's work (parsing, checking, hashing, committing each
event) would hold the interpreter lock while the forwarder waits to send the
next chunk. In its own process it never does. The forwarder hands each job over
with one non-blocking write to a pipe, from its own event loop: no queue, no
feeder thread, no lock to take on the path of a chunk (a chunk is framed as its
bytes, the rarer jobs are pickled). If the pipe is full (the recorder is behind)
the rest waits in memory and is written when the pipe can take it: the
forwarder never waits for the recorder.

The child reads the pipe and records the jobs in order. It commits in windows:
woken by the first job after a commit, it records what is there, sleeps
:data:`COMMIT_WINDOW`, records what came meanwhile and commits it all as one
append (:meth:`Recorder.commit`). A streamed answer's chunks thus cost the
child one wake-up and one store transaction per window instead of one per
chunk, and the forwarder's two cores are left to the traffic. A sync is
answered, and a stop obeyed, only after a commit.

If the proxy dies (``kill -9``), the pipe ends: the child records everything
already written to it, commits, ends the calls in flight as broken (``the
proxy stopped``) and exits: nothing the forwarder handed over is lost. If the
recorder dies (``kill -9`` of the child), what it had recorded but not
committed (at most one window: the chunks of the last ``COMMIT_WINDOW``) and
what was still in the pipe are lost; everything committed before stays and
the log verifies. The forwarder's next write fails, it logs
``proxy.recorder_lost`` and forwards on, unrecorded: the client's traffic is
never affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import multiprocessing
import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Iterator
from typing import Any

from engine.errors import StoreError
from engine.logging import get_logger
from engine.proxy.quiet import background_priority
from engine.proxy.recorder import CHUNK, END, STOP, SYNC, Recorder

_READY = "ready"
_FRAME = struct.Struct(">BII")  # kind, call id, payload length
_PICKLED = 255
_PIPE_SIZE = 1 << 20  # the most an unprivileged process may ask for
# How long the child gathers jobs before it commits them (seconds): the most a
# streamed answer's events wait, in memory, to be committed.
COMMIT_WINDOW = 0.02
_DRAIN_READS = 8

log = get_logger("convlog.proxy")


def frame(job: tuple[Any, ...]) -> bytes:
    """One job as bytes on the pipe."""
    if job[0] == CHUNK:
        data: bytes = job[2]
        return _FRAME.pack(CHUNK, job[1], len(data)) + data
    data = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(_PICKLED, 0, len(data)) + data


def unframe(buffer: bytearray) -> Iterator[tuple[Any, ...]]:
    """The whole jobs at the start of ``buffer`` (consumed from it)."""
    at, size = 0, len(buffer)
    while size - at >= _FRAME.size:
        kind, call_id, length = _FRAME.unpack_from(buffer, at)
        start = at + _FRAME.size
        if size - start < length:
            break
        payload = bytes(buffer[start:start + length])
        at = start + length
        yield (CHUNK, call_id, payload) if kind == CHUNK else pickle.loads(payload)
    del buffer[:at]


class RecorderProcess:
    """The :class:`Recorder` API (``start``, ``put``, ``sync``, ``stop``) over a child
    process."""

    def __init__(self, store_url: str, *, key_file: str | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")  # no inherited threads or sockets
        self._jobs_out, self._jobs_in = ctx.Pipe(duplex=False)  # (child's end, ours)
        self._acks_in, self._acks_out = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_child, name="convlog-proxy-recorder",
                                    args=(store_url, key_file, self._jobs_out,
                                          self._acks_out))
        self._fd = self._jobs_in.fileno()
        self._backlog: list[memoryview] = []
        self._waiting_loop: asyncio.AbstractEventLoop | None = None
        self._broken = False
        self._tokens = itertools.count(1)

    def start(self, timeout: float = 60.0) -> None:
        self._process.start()
        self._jobs_out.close()  # the child's end: the child alone holds it now
        self._acks_out.close()
        with contextlib.suppress(OSError):  # a bigger pipe: fewer waits in memory
            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        os.set_blocking(self._fd, False)
        answer = self._acks_in.recv() if self._acks_in.poll(timeout) else "no answer"
        if answer != _READY:
            self._process.join(10)
            raise StoreError(str(answer))

    @property
    def pid(self) -> int | None:
        return self._process.pid

    # ------------------------------------------------------------------ handing over

    def put(self, job: tuple[Any, ...]) -> None:
        self._write(memoryview(frame(job)))

    def _write(self, data: memoryview) -> None:
        if self._broken:
            return
        if self._backlog:
            self._backlog.append(data)
            return
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:  # the recorder died: the traffic goes on unrecorded
            self._lost(exc)
            return
        if written < len(data):
            self._backlog.append(data[written:])
            self._wait_writable()

    def _wait_writable(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (shutdown): written by sync() or stop()
            return
        if self._waiting_loop is None:
            loop.add_writer(self._fd, self._flush)
            self._waiting_loop = loop

    def _write_backlog(self) -> None:
        """Write what the pipe takes now of what waits."""
        while self._backlog and not self._broken:
            data = self._backlog[0]
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lost(exc)
                return
            if written < len(data):
                self._backlog[0] = data[written:]
                return
            self._backlog.pop(0)

    def _flush(self) -> None:
        """The event loop's call when the pipe can take more."""
        self._write_backlog()
        if not self._backlog and self._waiting_loop is not None:
            self._waiting_loop.remove_writer(self._fd)
            self._waiting_loop = None

    def _flush_blocking(self, timeout: float) -> None:
        """Write the backlog outside the event loop (sync, stop)."""
        if self._waiting_loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                self._waiting_loop.remove_writer(self._fd)
            self._waiting_loop = None
        while self._backlog and not self._broken:
            if not select.select([], [self._fd], [], timeout)[1]:
                return
            self._write_backlog()

    def _lost(self, exc: OSError) -> None:
        self._broken = True
        self._backlog.clear()
        # An error, not a warning: nothing more is recorded, and the default log
        # level (error) must show it.
        log.error("proxy.recorder_lost", error=repr(exc)[:500])

    # ------------------------------------------------------------------ shutdown

    def sync(self, timeout: float = 30.0) -> bool:
        """Wait until everything handed over so far is recorded."""
        token = next(self._tokens)
        self.put((SYNC, 0, token))
        self._flush_blocking(timeout)
        try:
            while self._acks_in.poll(timeout):
                if self._acks_in.recv() == token:
                    return True
        except (EOFError, OSError):
            pass
        return False

    def stop(self, timeout: float = 30.0) -> None:
        if self._process.is_alive():
            self.put((STOP, 0))
            self._flush_blocking(timeout)
            self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(10)
        self._jobs_in.close()
        self._acks_in.close()


def _child(store_url: str, key_file: str | None, jobs: Any, acks: Any) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the proxy stops the
    # recorder itself, after what it handed over is recorded.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    recorder = Recorder(store_url, key_file=key_file)
    try:
        recorder.open()
    except Exception as exc:  # reported by start() in the proxy
        acks.send(f"{type(exc).__name__}: {exc}")
        return
    background_priority()  # its wake-ups never preempt the traffic's processes
    acks.send(_READY)
    fd = jobs.fileno()
    buffer = bytearray()
    try:
        while True:
            data = os.read(fd, _PIPE_SIZE)  # the first job after a commit
            ended = not data
            buffer += data
            stop = _record(recorder, buffer, acks)
            if not ended and not stop and recorder.uncommitted:
                time.sleep(COMMIT_WINDOW)  # let the rest of the burst come
                more, ended = _drain(fd)
                buffer += more
                stop = _record(recorder, buffer, acks)
            recorder.commit()
            if stop:
                return
            if ended:  # every writer is gone: the proxy died or closed the pipe
                for call_id in recorder.in_flight():
                    recorder.handle((END, call_id, "the proxy stopped before the call "
                                                   "ended"))
                return
    finally:
        recorder.close()


def _drain(fd: int) -> tuple[bytes, bool]:
    """What the pipe holds now, without waiting (at most a few pipefuls: a writer
    that keeps it full cannot hold the commit off); and whether it has ended."""
    got = bytearray()
    for _ in range(_DRAIN_READS):
        if not select.select([fd], [], [], 0)[0]:
            break
        data = os.read(fd, _PIPE_SIZE)
        if not data:
            return bytes(got), True
        got += data
    return bytes(got), False


def _record(recorder: Recorder, buffer: bytearray, acks: Any) -> bool:
    """Record the whole jobs in ``buffer``; True if one says stop (after a commit)."""
    for job in unframe(buffer):
        if job[0] == STOP:
            recorder.commit()
            return True
        if job[0] == SYNC:
            recorder.commit()
            acks.send(job[2])
            continue
        recorder.handle(job)
    return False
