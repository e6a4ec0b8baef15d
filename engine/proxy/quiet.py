"""Keeping the forwarding path free of pauses that are not its own.

Two processes share the machine with the client and the upstream: the
forwarder, whose every millisecond is the client's, and the recorder, whose
work can wait. Measured with a timestamp per stage (benchmarks/proxy.py), the
forwarder's slow first bytes came from pauses outside its code:

- the cyclic garbage collector: a young-generation collection, which the
  interpreter starts after 700 net allocations, walked the survivors for 0.2 to
  0.65 ms in the middle of a call, once every 30 calls or so. The forwarding
  path makes no reference cycles (a test checks it), so the start-up heap is
  frozen out of every collection and collections are made rare;
- the recorder waking on the pipe: as an ordinary process, a woken recorder may
  preempt the client or the upstream on the core it lands on. As an idle
  process (``SCHED_IDLE``) it never does, and is itself preempted by any of
  them waking; :mod:`engine.proxy.process` makes it a batch process
  (``SCHED_BATCH``: a full share of the CPU) while it is behind, so that it
  cannot be starved.
"""

from __future__ import annotations

import contextlib
import gc
import os

# Net allocations of container objects before a young collection (the default is
# 700). Nothing on the forwarding path makes cycles, so this bounds only how much
# a collection walks when it comes: about 1 ms, once every few hundred calls.
YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """The forwarder's start-up heap (modules, the store's code, the routes) moved out
    of the collector's reach, and young collections made rare. Call once, after
    start-up and before serving."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def background_priority() -> str | None:
    """This process (the recorder) as an idle process (``SCHED_IDLE``): it runs on a
    core only when nothing else wants it, and any other process waking on that
    core takes it at once; so its work can never delay the forwarder, the client
    or the upstream. Only if it may leave that policy again (the forwarder makes a
    recorder that falls behind a batch process: see :mod:`engine.proxy.process`);
    otherwise, and where that policy is missing or refused, a batch process
    (``SCHED_BATCH``: a full share of the CPU, but a wake-up never preempts).
    Returns the policy's name, or None where the platform has neither."""
    names = ("SCHED_IDLE", "SCHED_BATCH") if _may_leave_idle() else ("SCHED_BATCH",)
    for name in names:
        policy = getattr(os, name, None)
        if policy is None:
            continue
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))
            return name
    return None


# CAP_SYS_NICE's bit in a capability mask (linux/capability.h).
_CAP_SYS_NICE = 23


def _may_leave_idle() -> bool:
    """Whether this process could be moved from ``SCHED_IDLE`` back to a normal policy:
    Linux allows it with ``CAP_SYS_NICE``, or when the process's nice value is within
    its ``RLIMIT_NICE`` (by default it is not: an ordinary user's idle process stays
    idle for good)."""
    try:
        import resource  # noqa: PLC0415 - Unix only

        limit = resource.getrlimit(resource.RLIMIT_NICE)[0]
        nice = os.getpriority(os.PRIO_PROCESS, 0)
        infinity = resource.RLIM_INFINITY
    except (ImportError, AttributeError, OSError, ValueError):
        return False
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            caps = next((line.split()[1] for line in status if line.startswith("CapEff:")),
                        "0")
    except OSError:
        caps = "0"
    return may_leave_idle(limit, nice, int(caps, 16), infinity=infinity)


def may_leave_idle(limit: int, nice: int, effective_caps: int, *, infinity: int) -> bool:
    """The kernel's rule for leaving ``SCHED_IDLE`` (``can_nice``): ``20 - nice`` within
    the ``RLIMIT_NICE`` soft limit, or ``CAP_SYS_NICE`` among the effective capabilities."""
    if effective_caps >> _CAP_SYS_NICE & 1:
        return True
    return limit == infinity or 20 - nice <= limit
