"""The ``convlog`` command line.

Write-side commands live here; read-side commands (``show``, ``demo``) are
plugged in through the ``convlog.commands`` entry-point group, so the engine
never imports projections. Exit codes: 0 ok, 2 usage or store error, 3 an event
was invalid or illegal (nothing appended), 4 ``verify`` found the log unsound.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Protocol

from engine import logging as cl_logging
from engine.codec import decode_json, encode_json
from engine.errors import (
    ConvlogError,
    DuplicateEventId,
    EventDecodeError,
    IllegalTransition,
    PartValidationError,
    StoreError,
    UnknownSchemaVersion,
    UnknownSession,
)
from engine.events import Event, tag_of
from engine.ids import is_uuid
from engine.session import Session
from engine.store import MemoryStore, Store, open_store
from engine.store.verify import verify

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
        if not is_uuid(args.session):
            print(f"convlog append: --session {args.session!r} is not a UUID", file=sys.stderr)
            return EXIT_USAGE
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
            try:
                session = Session.open(store, args.session)
            except UnknownSession:
                # Judge the batch on a scratch session first, so that a rejected first
                # append does not leave an empty session behind.
                for e in events:
                    where = store.find_event(e.id) if e.id else None
                    if where is not None:
                        print(f"rejected {_describe(e, events.index(e) + 1)}: its id is already "
                              f"used by session {where[0]} seq {where[1]}; nothing appended",
                              file=sys.stderr)
                        return EXIT_REJECTED
                if _append(Session.create(MemoryStore(), args.session), events) is None:
                    return EXIT_REJECTED
                session = Session.create(store, args.session)
            seqs = _append(session, events)
            if seqs is None:
                return EXIT_REJECTED
            print(f"appended {len(seqs)} event(s); session {session.id} at seq {session.version}")
            return EXIT_OK
        finally:
            store.close()


def _append(session: Session, events: list[Event]) -> list[int] | None:
    """Append, or print the one-line rejection and return None."""
    try:
        return session.append(events)
    except IllegalTransition as exc:
        index = exc.batch_index
        what = _describe(events[index - 1] if index else None, index or 0)
        if exc.message_id:
            target = f"message {exc.message_id}" + (f" part {exc.part_id}" if exc.part_id else "")
        else:
            target = f"{exc.entity} of session {exc.session_id}"
        valid = ", ".join(exc.valid) or "none (terminal)"
        reason = f"; {exc.reason}" if exc.reason else ""
        print(f"rejected {what if index else exc.event_type} on {target}: current state "
              f"'{exc.current}', attempted '{exc.attempted}', valid states: {valid}"
              f"{reason}; nothing appended", file=sys.stderr)
    except (PartValidationError, DuplicateEventId, UnknownSchemaVersion) as exc:
        index = exc.batch_index
        what = _describe(events[index - 1] if index else None, index or 0)
        print(f"rejected {what}: {exc}; nothing appended", file=sys.stderr)
    return None


EXIT_CORRUPT = 4


def _open_with_key(url: str, key_file: str | None) -> Store:
    return open_store(url, key_file=key_file) if key_file else open_store(url)


class VerifyCommand:
    name = "verify"
    help = "check seqs, the hash chain, decoding and every transition of a stored log"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("store", help="store URL, e.g. sqlite:///convlog.db")
        parser.add_argument("--session", help="one session (with its fork ancestry)")
        parser.add_argument("--key-file", help="the secret of a keyed (HMAC) hash chain")

    def run(self, args: argparse.Namespace) -> int:
        store = _open_with_key(args.store, args.key_file)
        try:
            report = verify(store, args.session)
        finally:
            store.close()
        if not report.ok:
            first = report.first
            assert first is not None
            where = "store" if first.session_id == "*" else f"session {first.session_id}"
            seq = f" seq {first.seq}" if first.seq else ""
            print(f"convlog verify: FAILED at {where}{seq}: {first.reason}", file=sys.stderr)
            for more in report.problems[1:]:
                print(f"  also: {more}", file=sys.stderr)
            return EXIT_CORRUPT
        print(f"ok: {report.sessions} session(s), {report.events} event(s); chain "
              f"{store.chain.algorithm}")
        for sid, (version, head) in report.heads.items():
            print(f"{sid} seq {version} head {head}")
        return EXIT_OK


class TailCommand:
    name = "tail"
    help = "print stored events as JSON lines in global order; --follow waits for new ones"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("store", help="store URL, e.g. sqlite:///convlog.db")
        parser.add_argument("--session", help="only this session's own events")
        parser.add_argument("--follow", "-f", action="store_true",
                            help="keep waiting for new events (Ctrl-C ends)")
        parser.add_argument("--from", dest="after", type=int, default=0, metavar="POSITION",
                            help="start after this global position (default: the beginning)")
        parser.add_argument("--idle-timeout", type=float, default=None,
                            help="with --follow: stop after this many idle seconds")

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store)
        out = sys.stdout.buffer
        try:
            if args.follow:
                records = store.subscribe(args.after, session_id=args.session,
                                          idle_timeout=args.idle_timeout)
            else:
                records = store.read_all(args.after, session_id=args.session)
            for rec in records:
                out.write(b'{"position":%d,"event":%s}\n' % (rec.position, encode_json(rec.event)))
                out.flush()
        except KeyboardInterrupt:
            pass
        finally:
            store.close()
        return EXIT_OK


def builtin_commands() -> list[Command]:
    return [AppendCommand(), TailCommand(), VerifyCommand()]


def plugin_commands() -> list[Command]:
    found: list[Command] = []
    for entry in entry_points(group="convlog.commands"):
        found.append(entry.load())
    return found


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convlog", description="Event-sourced message state for LLM agent sessions."
    )
    # Default "error": a rejection is reported by the command as its one stderr line;
    # the structlog warnings about it appear with --log-level warning.
    parser.add_argument("--log-level", default="error",
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
