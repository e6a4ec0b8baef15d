"""``convlog append STORE --session ID``: JSON lines on stdin, all or nothing."""

from __future__ import annotations

import argparse
import contextlib
import sys

from engine.cli import args as cli_args
from engine.cli import exits
from engine.cli.output import deferred_interrupt, one_line
from engine.codec import decode_json
from engine.errors import (
    ConvlogError,
    DuplicateEventId,
    EventDecodeError,
    IllegalTransition,
    PartValidationError,
    StoreBusy,
    StoreNotFound,
    UnknownSchemaVersion,
    UnknownSession,
)
from engine.events import Event, tag_of
from engine.session import Session
from engine.store import MemoryStore, Store, open_store


def _say(text: str) -> None:
    """A refusal: one printable line on stderr (messages can quote control characters)."""
    print(one_line(text), file=sys.stderr)


def _describe(e: Event | None, index: int) -> str:
    if e is None:
        return f"event #{index}"
    return f"event #{index} ({tag_of(type(e))}{' ' + e.id if e.id else ''})"


class AppendCommand:
    name = "append"
    help = "append events given as JSON lines on stdin (all or nothing); creates the store " \
           "and the session when new"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--session", required=True, type=cli_args.new_session_id, metavar="ID",
                            help="session id, a UUID (created if new)")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        events: list[Event] = []
        for number, line in enumerate(sys.stdin.buffer, start=1):
            if not line.strip():
                continue
            try:
                events.append(decode_json(line, line=number))
            except EventDecodeError as exc:
                _say(f"rejected event #{number}: {exc}; nothing appended")
                return exits.REJECTED.code
            except RecursionError:  # the decoder's own depth limit
                _say(f"rejected event #{number}: invalid event (line {number}): JSON nested "
                      "too deeply; nothing appended")
                return exits.REJECTED.code
        if not events:  # nothing to do: no store or session is created for it
            with contextlib.suppress(StoreNotFound):  # but one that is there must be a
                open_store(args.store, key_file=args.key_file, create=False,  # store
                           read_only=True).close()
            print("appended 0 event(s); the input held none")
            return exits.OK.code
        store = open_store(args.store, key_file=args.key_file)
        # Once the store is open the command runs to its end: the write and its
        # report (an interrupt that came meanwhile is dropped; the work is done).
        with deferred_interrupt():
            return self._write(store, args, events)

    def _write(self, store: Store, args: argparse.Namespace, events: list[Event]) -> int:
        """Create the session when new, append, print the result: one step that Ctrl-C
        does not cut (deferred_interrupt), so an acknowledged batch is never reported
        as interrupted and a new session is never left empty."""
        try:
            try:
                session = Session.open(store, args.session)
            except UnknownSession:
                # Judge the batch on a scratch session first, so that a rejected first
                # append does not leave an empty session behind.
                for index, e in enumerate(events, start=1):
                    where = store.find_event(e.id) if e.id else None
                    if where is not None:
                        _say(f"rejected {_describe(e, index)}: its id is already "
                             f"used by session {where[0]} seq {where[1]}; nothing appended")
                        return exits.REJECTED.code
                if _append(Session.create(MemoryStore(), args.session), events) is None:
                    return exits.REJECTED.code
                session = Session.create(store, args.session)
            present = sum(1 for e in events if e.id and _in_session(store, e.id, session.id))
            seqs = _append(session, events)
            if seqs is None:
                return exits.REJECTED.code
            already = f", {present} already present" if present else ""
            print(f"appended {len(seqs) - present} event(s){already}; session {session.id} "
                  f"at seq {session.version}")
            return exits.OK.code
        finally:
            store.close()


def _in_session(store: Store, event_id: str, session_id: str) -> bool:
    where = store.find_event(event_id)
    return where is not None and where[0] == session_id


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
        _say(f"rejected {what if index else exc.event_type} on {target}: current state "
              f"'{exc.current}', attempted '{exc.attempted}', valid states: {valid}"
              f"{reason}; nothing appended")
    except (PartValidationError, DuplicateEventId, UnknownSchemaVersion) as exc:
        index = exc.batch_index
        what = _describe(events[index - 1] if index else None, index or 0)
        _say(f"rejected {what}: {exc}; nothing appended")
    except StoreBusy:
        raise  # not a refusal of the events: the store's own exit code (7)
    except ConvlogError as exc:
        # Any other typed refusal (e.g. an id conflict, a value a store cannot hold).
        index = exc.batch_index or 0
        what = (f"rejected {_describe(events[index - 1], index)}: "
                if 0 < index <= len(events) else "rejected: ")
        _say(f"{what}{' '.join(str(exc).split())}; nothing appended")
    return None

