"""The ``convlog`` console script's entry: Ctrl-C at any moment of its startup is one
line and exit 130.

Loading the commands imports most of convlog (about 0.2 s), and a Ctrl-C in that
time used to print a traceback: the script imported :mod:`engine.cli` before any
handler ran. This module imports nothing heavy (``engine/__init__`` loads its names
lazily), so the handler below is in place before the engine's imports start.
:func:`engine.cli.main` names the command in its own message once it runs one.
"""

from __future__ import annotations

import sys

from engine.interrupts import hold_interrupts, release_interrupts
from engine.startup_gc import hold_collector, release_collector

INTERRUPTED = 130  # engine.cli.exits.INTERRUPTED, which cannot be imported before the try

def main() -> int:
    hold_interrupts()
    hold_collector()  # until the command is loaded (engine.startup_gc)
    try:
        try:
            from engine.cli import main as run  # noqa: PLC0415 - the import is what is guarded

            code = run()
        finally:
            release_interrupts()  # a SIGINT still held is answered below
            release_collector()
        return code
    except KeyboardInterrupt:
        print("convlog: interrupted", file=sys.stderr)
        return INTERRUPTED
