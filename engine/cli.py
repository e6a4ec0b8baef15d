"""The ``convlog`` command line.

Write-side commands live here; read-side commands (``show``, ``demo``) are
plugged in through the ``convlog.commands`` entry-point group, so the engine
never imports projections. Exit codes: 0 ok, 2 usage or store error, 3 an event
was invalid or illegal (nothing appended).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Protocol

from engine import logging as cl_logging
from engine.codec import decode_json
from engine.errors import (
    ConvlogError,
    EventDecodeError,
    IllegalTransition,
    PartValidationError,
    StoreError,
    UnknownSession,
)
from engine.events import Event, tag_of
from engine.session import Session
from engine.store import open_store

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REJECTED = 3


class Command(Protocol):
    name: str
    help: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _describe(e: Event | None, index: int) -> str:
    if e is None:
        return f"event #{index}"
    return f"event #{index} ({tag_of(type(e))}{' ' + e.id if e.id else ''})"


class AppendCommand:
    name = "append"
    help = "append events given as JSON lines on stdin (all or nothing)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("store", help="store URL, e.g. sqlite:///convlog.db")
        parser.add_argument("--session", required=True, help="session id (created if new)")

    def run(self, args: argparse.Namespace) -> int:
        events: list[Event] = []
        for number, line in enumerate(sys.stdin.buffer, start=1):
            if not line.strip():
                continue
            try:
                events.append(decode_json(line, line=number))
            except EventDecodeError as exc:
                print(f"rejected event #{number}: {exc}; nothing appended", file=sys.stderr)
                return EXIT_REJECTED
        store = open_store(args.store)
        try:
            session = Session.open_or_create(store, args.session)
            try:
                seqs = session.append(events)
            except IllegalTransition as exc:
                index = exc.batch_index
                what = _describe(events[index - 1] if index else None, index or 0)
                valid = ", ".join(exc.valid) or "none (terminal)"
                target = f"message {exc.message_id}" + (f" part {exc.part_id}" if exc.part_id
                                                        else "")
                reason = f"; {exc.reason}" if exc.reason else ""
                print(f"rejected {what if index else exc.event_type} on {target}: current state "
                      f"'{exc.current}', attempted '{exc.attempted}', valid states: {valid}"
                      f"{reason}; nothing appended", file=sys.stderr)
                return EXIT_REJECTED
            except PartValidationError as exc:
                index = exc.batch_index
                what = _describe(events[index - 1] if index else None, index or 0)
                print(f"rejected {what}: {exc}; nothing appended", file=sys.stderr)
                return EXIT_REJECTED
            print(f"appended {len(seqs)} event(s); session {session.id} at seq {session.version}")
            return EXIT_OK
        finally:
            store.close()


def builtin_commands() -> list[Command]:
    return [AppendCommand()]


def plugin_commands() -> list[Command]:
    found: list[Command] = []
    for entry in entry_points(group="convlog.commands"):
        found.append(entry.load())
    return found


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convlog", description="Event-sourced message state for LLM agent sessions."
    )
    parser.add_argument("--log-level", default="warning",
                        choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-json", action="store_true", help="structured JSON logs on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in sorted(commands, key=lambda c: c.name):
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(p)
        p.set_defaults(_command=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    commands = builtin_commands() + plugin_commands()
    args = build_parser(commands).parse_args(argv)
    cl_logging.configure(args.log_level, json=args.log_json)
    command: Command = args._command
    try:
        return command.run(args)
    except (StoreError, UnknownSession) as exc:
        print(f"convlog {command.name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConvlogError as exc:
        print(f"convlog {command.name}: {exc}", file=sys.stderr)
        return EXIT_REJECTED


if __name__ == "__main__":
    sys.exit(main())
