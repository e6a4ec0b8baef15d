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
answered, and a stop obeyed, only after a commit. (Committing a call's events
as soon as it ended, tried on 2026-11-29, saved no CPU over the 100 ms window
and put each commit, its fsync included, at the moment the next call starts.)

The child is an idle process (``SCHED_IDLE`` on Linux: it runs only on a core
nothing else wants, and is preempted by any other process that wakes), so its
work never delays the forwarder, the client or the upstream; where it could not
be moved back from that policy it is a batch process
(:func:`engine.proxy.quiet.background_priority`). What it has not
read waits in the pipe (1 MiB), then in the forwarder's memory; once the pipe is
full the forwarder makes the child a batch process (``SCHED_BATCH``: a full
share of the CPU) until it has read everything, so a busy machine cannot starve
it. If the backlog still passes :data:`BACKLOG_LIMIT` (64 MiB), the calls'
copies are dropped instead of queued: a recording gap. Once the recorder has
caught up, each call the gap cut is ended in the log with :data:`BEHIND_ERROR`,
the calls that started during it are not recorded, and the gap's account is
logged (``proxy.recording_gap``, an error, ``reason=behind``) and noted in the
recording-gaps session, as for a dead recorder below. The client's traffic is
never held up by any of it.

If the proxy dies (``kill -9``), the pipe ends: the child records everything
already written to it, commits, ends the calls in flight as broken (``the
proxy stopped``) and exits: nothing the forwarder handed over is lost. If the
recorder dies (``kill -9`` of the child), what it had recorded but not
committed (at most one window: the chunks of the last ``COMMIT_WINDOW``) and
what was still in the pipe are lost; everything committed before stays and
the log verifies. The forwarder's next write fails: it logs
``proxy.recorder_lost`` (an error), forwards on unrecorded (the client's traffic
is never affected) and starts a new recorder, from a thread of its own, after
:data:`RESTART_BACKOFF` seconds (doubled after each failed start, up to
:data:`RESTART_BACKOFF_MAX`). Until the new one takes over, nothing is recorded:
that is a gap, and the record says so. The first job the new recorder gets is
the gap's account, which it writes as a ``transcript.noted`` line in the
proxy's *recording gaps* session (:data:`~engine.proxy.recorder.GAPS_TITLE`),
and the forwarder logs it as ``proxy.recording_gap`` (an error): when the
recorder died and when the new one took over, how many calls started in between
(forwarded, not recorded) and how many were in flight at its death (recorded up
to its last commit, their answers left open).
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
import threading
import time
from collections.abc import Iterator
from typing import Any

from engine.errors import StoreError
from engine.logging import get_logger
from engine.proxy.quiet import background_priority
from engine.proxy.recorder import CHUNK, END, GAP, REQUEST, STOP, SYNC, Recorder

_READY = "ready"
_FRAME = struct.Struct(">BII")  # kind, call id, payload length
_PICKLED = 255
_PIPE_SIZE = 1 << 20  # the most an unprivileged process may ask for
# How long the child gathers jobs before it commits them (seconds): the most a
# streamed answer's events wait, in memory, to be committed. Each commit is a
# store transaction (with SQLite's fsync, 0.5-1 ms of CPU): 20 ms made a
# streamed answer two or three of them a call in the benchmark, 50 a second of
# stream; 100 ms makes it one or two a call, ten a second of stream.
COMMIT_WINDOW = 0.1
_DRAIN_READS = 8
# How long after a recorder's death the next one is started (seconds), and the
# most that wait grows to while starts keep failing (a store that is down).
RESTART_BACKOFF = 0.2
RESTART_BACKOFF_MAX = 30.0
# The most the forwarder keeps in memory for a recorder that is behind (bytes, on
# top of the pipe's 1 MiB). Past it, the calls' copies are dropped instead: a
# recording gap, logged and recorded as such once the recorder has caught up.
BACKLOG_LIMIT = 64 << 20
# The error a call cut by such a gap is ended with in the log.
BEHIND_ERROR = ("recording gap: the recorder fell behind and the rest of this call was "
                "not recorded (the client got all of it)")

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


class _Child:
    """One recorder process and the two pipes to it."""

    def __init__(self, store_url: str, key_file: str | None, *, daemon: bool = False
                 ) -> None:
        ctx = multiprocessing.get_context("spawn")  # no inherited threads or sockets
        jobs_out, self.jobs = ctx.Pipe(duplex=False)  # (child's end, ours)
        self.acks, acks_out = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_child, name="convlog-proxy-recorder",
                                   args=(store_url, key_file, jobs_out, acks_out),
                                   daemon=daemon)
        self.fd = self.jobs.fileno()
        self.process.start()
        jobs_out.close()  # the child's end: the child alone holds it now
        acks_out.close()
        with contextlib.suppress(OSError):  # a bigger pipe: fewer waits in memory
            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        os.set_blocking(self.fd, False)

    def ready(self, timeout: float) -> None:
        answer = self.acks.recv() if self.acks.poll(timeout) else "no answer"
        if answer != _READY:
            self.end(10)
            raise StoreError(str(answer))

    def end(self, timeout: float) -> None:
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)
        self.jobs.close()
        self.acks.close()


class _Gap:
    """What went unrecorded while no recorder ran."""

    def __init__(self, in_flight: int) -> None:
        self.since = time.time()
        self.in_flight = in_flight  # calls the dead recorder had not seen end
        self.unrecorded = 0  # calls that started during the gap
        self.restarts = 0  # failed starts


class _Behind:
    """A recording gap while the recorder is behind (the backlog at its limit)."""

    def __init__(self) -> None:
        self.since = time.time()
        self.cut: set[int] = set()  # calls handed over whose later copies were dropped
        self.unrecorded = 0  # calls that started during it (never handed over)


class RecorderProcess:
    """The :class:`Recorder` API (``start``, ``put``, ``sync``, ``stop``) over a child
    process, started again when it dies."""

    def __init__(self, store_url: str, *, key_file: str | None = None) -> None:
        self.store_url = store_url
        self.key_file = key_file
        self._child: _Child | None = None
        self._fd = -1
        self._backlog: list[memoryview] = []
        self._waiting = 0  # bytes in the backlog
        self._behind: _Behind | None = None
        self._dropping: set[int] = set()  # calls whose copies are dropped until their end
        self._policy: int | None = None  # the child's scheduling policy, when idle
        self._waiting_loop: asyncio.AbstractEventLoop | None = None
        self._broken = False
        self._tokens = itertools.count(1)
        self._open: set[int] = set()  # calls handed over and not ended
        self._gap: _Gap | None = None
        self._fresh: _Child | None = None  # a restarted recorder, not yet taken over
        self._stopping = threading.Event()
        self._restarter: threading.Thread | None = None
        self.gaps: list[dict[str, Any]] = []  # each gap's account (the log's too)

    def start(self, timeout: float = 60.0) -> None:
        child = _Child(self.store_url, self.key_file)
        child.ready(timeout)
        self._adopt(child)

    def _adopt(self, child: _Child) -> None:
        if self._waiting_loop is not None:  # still watching the dead one's pipe
            with contextlib.suppress(RuntimeError, OSError, ValueError):
                self._waiting_loop.remove_writer(self._fd)
            self._waiting_loop = None
        self._child, self._fd = child, child.fd
        self._backlog.clear()
        self._waiting = 0
        self._behind = None
        self._dropping.clear()
        self._broken = False
        self._policy = None
        idle = getattr(os, "SCHED_IDLE", None)
        pid = child.process.pid
        with contextlib.suppress(OSError, AttributeError):
            if idle is not None and pid is not None and os.sched_getscheduler(pid) == idle:
                self._policy = idle

    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None

    # ------------------------------------------------------------------ handing over

    def put(self, job: tuple[Any, ...]) -> None:
        op = job[0]
        call = job[1] if op <= END else None  # a call's copy (not sync, stop, gap)
        if call is not None and call in self._dropping:  # cut or never handed over
            if op == END:
                self._dropping.discard(call)
                self._open.discard(call)
            return
        data = memoryview(frame(job))
        if call is not None and not self._broken:
            if (self._behind is None and self._backlog
                    and self._waiting + len(data) > BACKLOG_LIMIT):
                self._behind = _Behind()  # a gap begins
                log.error("proxy.recorder_behind", waiting_bytes=self._waiting,
                          limit_bytes=BACKLOG_LIMIT)
            if self._behind is not None:
                self._drop(op, call)
                return
        if op == REQUEST:
            self._open.add(job[1])
        elif op == END:
            self._open.discard(job[1])
        if self._broken and not self._take_over(op):
            return  # a gap: forwarded, not recorded
        self._write(data)

    def _take_over(self, op: int) -> bool:
        """In a gap: let a restarted recorder take over (the gap's account first).
        False while none is ready (the job is not recorded)."""
        fresh, gap = self._fresh, self._gap
        if fresh is None or gap is None:
            if gap is not None and op == REQUEST:
                gap.unrecorded += 1
            return False
        self._fresh, self._gap = None, None
        self._adopt(fresh)
        account = {"since": _iso(gap.since), "until": _iso(time.time()),
                   "unrecorded_calls": gap.unrecorded, "cut_calls": gap.in_flight,
                   "failed_starts": gap.restarts}
        self.gaps.append(account)
        log.error("proxy.recording_gap", **account)
        self._write(memoryview(frame((GAP, 0, account))))
        return True

    def _write(self, data: memoryview) -> None:
        if self._broken:
            return
        if self._backlog:
            self._backlog.append(data)
            self._waiting += len(data)
            return
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:  # the recorder died: the traffic goes on unrecorded
            self._lost(exc)
            return
        if written < len(data):
            rest = data[written:]
            self._backlog.append(rest)
            self._waiting += len(rest)
            self._urge(behind=True)
            self._wait_writable()

    # ------------------------------------------------------------------ a recorder behind

    def _urge(self, *, behind: bool) -> None:
        """An idle recorder (``SCHED_IDLE``: it runs only on a core nothing else wants)
        that fills the pipe gets a full share of the CPU (``SCHED_BATCH``) until it
        has read everything waiting, then goes back to idle: the traffic keeps the
        cores while the recorder keeps up, and a busy machine cannot starve it."""
        pid = self._child.process.pid if self._child is not None else None
        policy = getattr(os, "SCHED_BATCH", None) if behind else self._policy
        if self._policy is None or pid is None or policy is None:
            return
        with contextlib.suppress(OSError):
            os.sched_setscheduler(pid, policy, os.sched_param(0))

    def _drop(self, op: int, call: int) -> None:
        """A call's copy not handed over (the recorder is behind, past the limit)."""
        behind = self._behind
        assert behind is not None
        if op == REQUEST:  # never handed over: none of it is recorded
            behind.unrecorded += 1
            self._dropping.add(call)
            return
        if call in self._open:  # recorded up to here: ended with the gap's error
            behind.cut.add(call)
        if op == END:
            self._open.discard(call)
        else:
            self._dropping.add(call)

    def _caught_up(self) -> None:
        """The backlog is in the pipe again: the gap ends. Each call it cut is ended
        with :data:`BEHIND_ERROR`, and its account is recorded and logged."""
        behind, self._behind = self._behind, None
        if behind is None:
            return
        account = {"since": _iso(behind.since), "until": _iso(time.time()),
                   "reason": "behind", "unrecorded_calls": behind.unrecorded,
                   "cut_calls": len(behind.cut), "limit_bytes": BACKLOG_LIMIT}
        self.gaps.append(account)
        log.error("proxy.recording_gap", **account)
        for call in sorted(behind.cut):
            self._write(memoryview(frame((END, call, BEHIND_ERROR))))
        self._write(memoryview(frame((GAP, 0, account))))

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
            self._waiting -= written
            if written < len(data):
                self._backlog[0] = data[written:]
                return
            self._backlog.pop(0)
        if not self._backlog and not self._broken:
            self._urge(behind=False)
            if self._behind is not None:
                self._caught_up()

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
        if self._broken:
            return
        self._broken = True
        self._backlog.clear()
        self._waiting = 0
        self._behind = None  # the restart's gap accounts for everything from here
        self._dropping.clear()
        # An error, not a warning: nothing is recorded until a new recorder runs,
        # and the default log level (error) must show it.
        log.error("proxy.recorder_lost", error=repr(exc)[:500])
        if self._stopping.is_set():
            return
        # The calls in flight: the new recorder never hears of them (their later
        # jobs name calls it does not know, and it ignores them).
        self._gap = _Gap(len(self._open))
        self._open.clear()
        dead = self._child
        self._restarter = threading.Thread(target=self._restart, args=(dead,), daemon=True,
                                           name="convlog-proxy-restart")
        self._restarter.start()

    def _restart(self, dead: _Child | None) -> None:
        """Start a new recorder (off the forwarder's thread: it waits, with backoff);
        the forwarder's next job hands it over (:meth:`_take_over`)."""
        backoff = RESTART_BACKOFF
        while not self._stopping.wait(backoff):
            if dead is not None:  # reaped (its pipes closed) once the forwarder let go
                with contextlib.suppress(OSError):
                    dead.end(0)
                dead = None
            try:
                # Daemonic: one still starting when the proxy exits is ended with
                # it (stop() ends the one it hands over, as the first).
                child = _Child(self.store_url, self.key_file, daemon=True)
                child.ready(60.0)
            except Exception as exc:  # the store is down, say: try again later
                if self._gap is not None:
                    self._gap.restarts += 1
                log.error("proxy.recorder_restart_failed", error=repr(exc)[:500],
                          retry_in=min(backoff * 2, RESTART_BACKOFF_MAX))
                backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
                continue
            if self._stopping.is_set():
                child.end(0)
                return
            log.info("proxy.recorder_restarted", pid=child.process.pid)
            self._fresh = child
            return

    # ------------------------------------------------------------------ shutdown

    def sync(self, timeout: float = 30.0) -> bool:
        """Wait until everything handed over so far is recorded (False in a gap)."""
        token = next(self._tokens)
        self.put((SYNC, 0, token))
        self._flush_blocking(timeout)
        if self._broken or self._child is None:
            return False
        acks = self._child.acks
        try:
            while acks.poll(timeout):
                if acks.recv() == token:
                    return True
        except (EOFError, OSError):
            pass
        return False

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self._restarter is not None:  # a start under way ends what it started
            self._restarter.join(min(timeout, 5.0))
        child, self._child = self._child, None
        if child is not None:
            if child.process.is_alive() and not self._broken:
                self.put((STOP, 0))
                self._flush_blocking(timeout)
            child.end(timeout)
        fresh, self._fresh = self._fresh, None
        if fresh is not None:  # restarted, never taken over
            fresh.end(0)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + \
        f".{int(seconds * 1000) % 1000:03d}Z"


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
