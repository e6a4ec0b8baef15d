"""SIGINT held while convlog's commands load, delivered when the command starts
(used by :mod:`engine.launch` and :func:`engine.cli.main`; imports nothing of convlog)."""

from __future__ import annotations

import signal

# msgspec builds a decoder's type information in C, calling back into Python; a
# KeyboardInterrupt raised inside one of those calls can crash the interpreter
# (exit -11, seen about once in 60 Ctrl-Cs at start-up under load). So SIGINT is held
# by the kernel while the commands load and their decoders are built, and delivered
# (as one line and exit 130) the moment the command starts.
_CAN_HOLD = hasattr(signal, "pthread_sigmask")


def hold_interrupts() -> None:
    """Keep SIGINT pending (not lost) until :func:`release_interrupts`."""
    if _CAN_HOLD:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def release_interrupts() -> None:
    """Deliver a held SIGINT now (its handler raises KeyboardInterrupt here)."""
    if _CAN_HOLD:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
