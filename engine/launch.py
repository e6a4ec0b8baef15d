"""The ``convlog`` console script's entry: Ctrl-C at any moment of its startup is one
line and exit 130.

Loading the commands imports most of convlog (about 0.2 s), and a Ctrl-C in that
time used to print a traceback: the script imported :mod:`engine.cli` before any
handler ran. This module imports nothing heavy (``engine/__init__`` loads its names
lazily), so the handler below is in place before the engine's imports start.
:func:`engine.cli.main` names the command in its own message once it runs one.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130  # engine.cli.exits.INTERRUPTED, which cannot be imported before the try

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


def main() -> int:
    hold_interrupts()
    try:
        try:
            from engine.cli import main as run  # noqa: PLC0415 - the import is what is guarded

            code = run()
        finally:
            release_interrupts()  # a SIGINT still held is answered below
        return code
    except KeyboardInterrupt:
        print("convlog: interrupted", file=sys.stderr)
        return INTERRUPTED
