"""``convlog``: the parser, the command plug-in point and the one place where errors
become exit codes and one line on stderr.

Write-side commands live in this package; read-side commands (``show``, ``demo``) are
plugged in through the ``convlog.commands`` entry-point group, so the engine never
imports projections.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import NoReturn, Protocol

import msgspec

from engine import logging as cl_logging
from engine.cli import exits
from engine.cli.args import session_id, store_url
from engine.cli.exits import ExitCode
from engine.cli.output import one_line, silence_stdout
from engine.errors import (
    ConvlogError,
    CorruptLog,
    KeyRequired,
    StoreBusy,
    StoreError,
    StoreUnreadable,
    UnknownSession,
)
from engine.store.anchor import BadAnchor

LOG_LEVELS = ("debug", "info", "warning", "error")


class Command(Protocol):
    name: str
    help: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``convlog verify: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(exits.USAGE.code,
                  one_line(f"{self.prog}: error: {message} (see {self.prog} --help)") + "\n")


def package_version() -> str:
    try:
        return version("convlog")
    except PackageNotFoundError:
        return "unknown"


def builtin_commands() -> list[Command]:
    from engine.cli.append import AppendCommand  # noqa: PLC0415 - commands import app helpers
    from engine.cli.check import AnchorCommand, RepairCommand, VerifyCommand  # noqa: PLC0415
    from engine.cli.tail import TailCommand  # noqa: PLC0415

    return [AnchorCommand(), AppendCommand(), RepairCommand(), TailCommand(), VerifyCommand()]


def plugin_commands() -> list[Command]:
    return [entry.load() for entry in entry_points(group="convlog.commands")]


def all_commands() -> list[Command]:
    return sorted(builtin_commands() + plugin_commands(), key=lambda c: c.name)


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = Parser(prog="convlog",
                    description="Event-sourced message state for LLM agent sessions.")
    parser.add_argument("--version", action="version",
                        version=f"convlog {package_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show log records on stderr: -v warnings, -vv info, -vvv debug "
                             "(default: errors only)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None,
                        help="log level, instead of -v")
    parser.add_argument("--log-json", action="store_true", help="structured JSON logs on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in sorted(commands, key=lambda c: c.name):
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(p)
        _store_paths(p)
        p.set_defaults(_command=command)
    return parser


def _store_paths(parser: argparse.ArgumentParser) -> None:
    """Every store argument, positional or ``--store``, of every command (plug-ins too)
    takes a bare path as well as a URL: ``convlog import x.jsonl --store my.db`` means
    what ``convlog verify my.db`` does, instead of "unsupported store URL". Every
    ``--session`` without a type of its own is checked as an id."""
    for action in parser._actions:
        if action.dest == "store" and action.type is None:
            action.type = store_url
        # The one rule for --session holds in plug-ins too: a malformed id (a byte
        # that is no character, a path separator) is exit 2, not a failure later on.
        if action.dest == "session" and action.type is None:
            action.type = session_id
        if isinstance(action, argparse._SubParsersAction):  # `convlog mailbox export`
            for sub in action.choices.values():
                _store_paths(sub)


def exit_for(exc: ConvlogError) -> ExitCode:
    """The exit code of a typed error (subclasses first: CorruptLog is a StoreError)."""
    if isinstance(exc, KeyRequired):
        return exits.KEY_NEEDED
    if isinstance(exc, StoreBusy):
        return exits.BUSY
    if isinstance(exc, StoreUnreadable):
        return exits.UNREADABLE
    if isinstance(exc, CorruptLog):
        return exits.CORRUPT
    if isinstance(exc, (StoreError, UnknownSession, BadAnchor)):
        return exits.USAGE
    return exits.REJECTED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # Loading the commands imports most of convlog: Ctrl-C here is one line too.
        parser = build_parser(all_commands())
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error already printed
        return done.code if isinstance(done.code, int) else exits.USAGE.code
    except KeyboardInterrupt:
        print("convlog: interrupted", file=sys.stderr)
        return exits.INTERRUPTED.code
    # A path argument that is not UTF-8 prints back as the bytes it was (as a C locale
    # would), instead of failing a strict stdout after the work was done.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", "") == "strict":
        reconfigure(errors="surrogateescape")
    level = args.log_level or LOG_LEVELS[max(0, 3 - args.verbose)]
    cl_logging.configure(level, json=args.log_json)
    command: Command = args._command
    name = f"convlog {command.name}"
    try:
        return command.run(args)
    except BrokenPipeError:
        silence_stdout()
        return exits.PIPE_CLOSED.code
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED.code
    except ConvlogError as exc:
        print(f"{name}: {one_line(str(exc))}", file=sys.stderr)
        return exit_for(exc).code
    except (sqlite3.DatabaseError, UnicodeDecodeError, msgspec.DecodeError) as exc:
        # A read met damaged bytes below the store's own checks: damage, not a bug.
        print(f"{name}: the store's data is damaged: {type(exc).__name__}: "
              f"{one_line(str(exc))} (run `convlog verify`)", file=sys.stderr)
        return exits.CORRUPT.code
    except Exception as exc:  # a bug, unless the store is damaged: still one line
        if args.verbose or args.log_level == "debug":
            traceback.print_exc()
        damage = damage_behind(args)
        if damage is not None:
            print(f"{name}: the store's data is damaged: {one_line(damage)} "
                  f"({type(exc).__name__} while reading; run `convlog verify`)",
                  file=sys.stderr)
            return exits.CORRUPT.code
        print(f"{name}: internal error: {type(exc).__name__}: {one_line(str(exc))} "
              "(run with -v for the traceback)", file=sys.stderr)
        return exits.INTERNAL.code


# Commands that may fail holding a write window open: a second handle could wait on
# their own lock. Their failures stay exit 1.
_BULK_WRITERS = frozenset({"append", "demo", "import", "mailbox", "mcp", "serve"})


def damage_behind(args: argparse.Namespace) -> str | None:
    """What ``verify`` finds wrong with the command's store, or None (sound, or no store).

    Reads fold stored events without re-checking them (verify's job), so a damaged log
    can make a fold fail in ways no typed error names. Asked only after such a
    failure: the engine's verdict decides between damage (exit 4) and a bug (exit 1).
    """
    url = getattr(args, "store", None)
    if not isinstance(url, str) or args._command.name in _BULK_WRITERS:
        return None
    from engine.store import open_store  # noqa: PLC0415 - only on this error path
    from engine.store.verify import verify  # noqa: PLC0415

    try:
        store = open_store(url, key_file=getattr(args, "key_file", None), create=False,
                           read_only=True)
    except ConvlogError as exc:
        return str(exc) if isinstance(exc, (CorruptLog, StoreUnreadable)) else None
    try:
        report = verify(store)
    except ConvlogError:
        return None  # a keyed store without its key: no verdict
    finally:
        store.close()
    return None if report.first is None else f"FAILED at {report.first}"
