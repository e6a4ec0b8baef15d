"""The ``convlog`` command line (see ``docs/cli.md``, generated from these parsers)."""

from engine.cli import exits
from engine.cli.app import (
    Command,
    all_commands,
    build_parser,
    builtin_commands,
    main,
    plugin_commands,
)
from engine.cli.exits import EXIT_CODES

EXIT_OK = exits.OK.code
EXIT_INTERNAL = exits.INTERNAL.code
EXIT_USAGE = exits.USAGE.code
EXIT_REJECTED = exits.REJECTED.code
EXIT_CORRUPT = exits.CORRUPT.code
EXIT_UNREADABLE = exits.UNREADABLE.code
EXIT_KEY_NEEDED = exits.KEY_NEEDED.code
EXIT_BUSY = exits.BUSY.code
EXIT_INTERRUPTED = exits.INTERRUPTED.code
EXIT_PIPE_CLOSED = exits.PIPE_CLOSED.code

__all__ = [
    "EXIT_BUSY",
    "EXIT_CODES",
    "EXIT_CORRUPT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_KEY_NEEDED",
    "EXIT_OK",
    "EXIT_PIPE_CLOSED",
    "EXIT_REJECTED",
    "EXIT_UNREADABLE",
    "EXIT_USAGE",
    "Command",
    "all_commands",
    "build_parser",
    "builtin_commands",
    "main",
    "plugin_commands",
]
