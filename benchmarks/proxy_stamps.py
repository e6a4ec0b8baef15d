"""``convlog proxy`` with the forwarder's own time per chunk stamped (for
``benchmarks/proxy.py``; nothing of it is in the proxy itself).

Usage: ``python benchmarks/proxy_stamps.py STAMPS_FILE proxy --store ... ``

For each response chunk the forwarder passes on, two monotonic stamps: when the
event loop starts handling the upstream socket's readiness (before the ``recv``
that reads the chunk) and when the write of that chunk to the client returns
(the bytes are the kernel's: sent). Beside them, the forwarder thread's CPU time
(``time.thread_time_ns``) at both points. Their difference is the proxy's own
time on the chunk; the wall time minus the CPU time is what it spent waiting for
a core (preempted by other processes: the machine's load, not the proxy's work).
What happens between the upstream's write and the loop's wake-up (the kernel's
loopback, the scheduler waking the forwarder) is in the benchmark's end-to-end
figures, not here. At exit the stamps are written to STAMPS_FILE as three
arrays of int64 nanoseconds (wall, CPU, and the client write's size in bytes).
"""

from __future__ import annotations

import array
import asyncio
import atexit
import sys
import time
from asyncio import selector_events
from collections.abc import Callable
from typing import Any

from engine.proxy import forward

_monotonic, _cpu = time.monotonic_ns, time.thread_time_ns


def install(path: str) -> None:
    walls, cpus, sizes = array.array("q"), array.array("q"), array.array("q")
    started = [0, 0]  # wall, CPU at the start of an upstream read (0: none)
    transport_class: Any = getattr(selector_events, "_SelectorSocketTransport")  # noqa: B009

    def stamping(read: Callable[[Any], None]) -> Callable[[Any], None]:
        def stamped_read(self: Any) -> None:
            if self._protocol.__class__ is not forward.Upstream:
                read(self)
                return
            started[0], started[1] = _monotonic(), _cpu()
            try:
                read(self)
            finally:
                started[0] = 0

        return stamped_read

    # Whichever way the protocol reads (into its own buffer, or given new bytes).
    for name in ("_read_ready__get_buffer", "_read_ready__data_received"):
        setattr(transport_class, name, stamping(getattr(transport_class, name)))
    made = forward.Client.connection_made

    def connection_made(self: forward.Client, transport: asyncio.BaseTransport) -> None:
        made(self, transport)
        write = self.transport.write

        def stamped_write(data: bytes | bytearray | memoryview) -> None:
            write(data)
            if started[0]:
                walls.append(_monotonic() - started[0])
                cpus.append(_cpu() - started[1])
                sizes.append(len(data))
                started[0] = 0

        self.transport.write = stamped_write  # type: ignore[method-assign]

    forward.Client.connection_made = connection_made  # type: ignore[method-assign]

    def dump() -> None:
        with open(path, "wb") as out:
            for values in (walls, cpus, sizes):
                out.write(len(values).to_bytes(8, "little"))
                values.tofile(out)

    atexit.register(dump)


def load(path: str) -> tuple[list[int], list[int], list[int]]:
    """(wall, CPU, size) per stamped chunk, as :func:`install` wrote them."""
    out: list[list[int]] = []
    with open(path, "rb") as data:
        for _ in range(3):
            values = array.array("q")
            values.fromfile(data, int.from_bytes(data.read(8), "little"))
            out.append(values.tolist())
    return out[0], out[1], out[2]


if __name__ == "__main__":
    install(sys.argv[1])
    from engine.launch import main

    sys.argv = ["convlog", *sys.argv[2:]]
    sys.exit(main())
