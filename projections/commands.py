"""Read-side CLI commands, plugged into ``convlog`` through entry points."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli import EXIT_OK, EXIT_USAGE
from engine.cli import args as cli_args
from engine.cli.output import Progress
from engine.codec import to_builtins
from engine.events import MessageStarted, tag_of
from engine.store import DEFAULT_URL, open_store
from engine.store.base import Store
from projections.text import render_event, render_messages, render_state
from projections.timetravel import Snapshotter, at, diff
from projections.withparts import WithPartsProjection

if TYPE_CHECKING:
    from engine.session import Session


def _pick_session(store: Store, given: str | None) -> str | None:
    if given:
        return given
    sessions = store.sessions()
    if len(sessions) == 1:
        return sessions[0].id
    print("sessions in this store (pick one with --session):")
    for info in sessions:
        lineage = f" fork of {info.parent} at {info.fork_seq}" if info.parent else ""
        print(f"  {info.id}  {store.version(info.id)} events{lineage}")
    return None


class ShowCommand:
    name = "show"
    help = "show a session's messages or events, now or at any seq"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--session", type=cli_args.session_id, metavar="ID",
                            help="session id (optional if the store has one)")
        parser.add_argument("--at", type=cli_args.natural, metavar="SEQ",
                            help="the state as of this seq (default: the latest)")
        parser.add_argument("--as", dest="view", choices=["withparts", "events"],
                            default="withparts", help="messages with parts, or the raw events")
        parser.add_argument("--json", action="store_true", help="JSON instead of text")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store, key_file=args.key_file, create=False,
                           read_only=True)
        try:
            _report_torn_tails(store)
            sid = _pick_session(store, args.session)
            if sid is None:
                return EXIT_OK if store.sessions() else EXIT_USAGE
            version = store.version(sid)
            seq = version if args.at is None else args.at
            if not 0 <= seq <= version:
                print(f"convlog show: --at {seq} is outside 0..{version}", file=sys.stderr)
                return EXIT_USAGE
            if args.view == "events":
                # (its hashing and secrets modules only for this branch)
                from engine.mailbox_credentials import redacted  # noqa: PLC0415

                progress = Progress("show")
                # Progress is for output going to a file: on the terminal the events
                # themselves show it.
                progress.enabled = progress.enabled and not sys.stdout.isatty()
                render = ((lambda e: json.dumps(to_builtins(redacted(e)), ensure_ascii=False))
                          if args.json else render_event)
                try:
                    for count, e in enumerate(store.read(sid, 1, seq), start=1):
                        print(render(e))
                        if not count & 1023:
                            progress(count)
                finally:
                    progress.done()
                return EXIT_OK
            proj = at(store, sid, seq)
            if args.json:
                print(json.dumps(proj.to_json(), ensure_ascii=False, indent=2))
            else:
                print(f"session {sid} at seq {seq} of {version}")
                print(render_state(proj))
            return EXIT_OK
        finally:
            store.close()


class DemoCommand:
    name = "demo"
    help = "record a realistic streamed session, then show time travel, a diff and a fork"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--store", default=DEFAULT_URL,
                            help=f"store URL (default {DEFAULT_URL}, recreated every run; "
                                 "a store holding anything but a demo is never deleted)")
        parser.add_argument("--every", type=cli_args.positive_int, default=16, metavar="K",
                            help="snapshot every K events (default 16)")

    def run(self, args: argparse.Namespace) -> int:
        if args.store.lower().startswith("sqlite:///") and args.store != "sqlite:///:memory:":
            path = Path(args.store[len("sqlite:///"):].partition("?")[0])
            if path.exists() and not _is_convlog_sqlite(path):
                print(f"convlog demo: {path} exists and is not a convlog store; not "
                      "overwriting it (pick another --store)", file=sys.stderr)
                return EXIT_USAGE
            if path.exists() and path.stat().st_size and (others := _foreign(args.store)):
                print(f"convlog demo: {path} holds {len(others)} session(s) the demo did not "
                      "record (imported sessions or a mailbox); not deleting it (pick "
                      "another --store)", file=sys.stderr)
                return EXIT_USAGE
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)  # a fresh demo every run
        store = open_store(args.store)
        try:
            session = _record(store, args.every)
            sid, last = session.id, session.version
            print(f"recorded session {sid}: {last} events in {args.store}\n")
            print("== messages now")
            print(render_messages(at(store, sid).messages()))
            mid = last // 2
            print(f"\n== the same session at seq {mid} (time travel)")
            print(render_messages(at(store, sid, mid).messages()))
            print(f"\n== what changed between seq {mid} and {last}")
            print(diff(store, sid, mid, last).render())
            tool_seq = _seq_of_first(store, sid, "tool.started")
            fork = session.fork(at=tool_seq)
            fork.abort(_assistant_id(store, sid), "user chose another path in the fork")
            print(f"\n== fork {fork.id} at seq {tool_seq}, then aborted there")
            print(f"shares {tool_seq} events with its parent, owns {fork.version - tool_seq}")
            print(render_messages(at(store, fork.id).messages()))
            print(f"\ntry: convlog show {args.store} --session {sid} --at {mid}")
            return EXIT_OK
        finally:
            store.close()


def _foreign(url: str) -> list[str]:
    from projections.demo import foreign_sessions  # noqa: PLC0415 - demo's only

    store = open_store(url, create=False)
    try:
        return foreign_sessions(store)
    finally:
        store.close()


def _is_convlog_sqlite(path: Path) -> bool:
    """A demo may only replace a database convlog made (it has the chain in ``meta``)."""
    if path.stat().st_size == 0:
        return True
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT 1 FROM meta WHERE key='chain'").fetchone() is not None
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False


def _report_torn_tails(store: Store) -> None:
    """Reads change nothing: a torn last line is said, and left for `convlog repair`."""
    torn = getattr(store, "torn_tails", None)
    for sid, _, cut in torn() if torn is not None else []:
        print(f"convlog show: warning: session {sid} ends with a torn line ({cut} bytes) that "
              "is not shown; `convlog repair` moves it aside", file=sys.stderr)


def _record(store: Store, every: int) -> Session:
    # The demo's recorder loads the write side's commands: not on `show`'s path.
    from projections.demo import record_demo  # noqa: PLC0415

    session = record_demo(store)
    # Snapshots are caches: write them after the fact so `show --at` starts nearby.
    snap = Snapshotter(store, WithPartsProjection(session.id), every=every)
    for e in store.read(session.id):
        snap(e)
    return session


def _seq_of_first(store: Store, sid: str, tag: str) -> int:
    return next(e.seq for e in store.read(sid) if tag_of(type(e)) == tag)


def _assistant_id(store: Store, sid: str) -> str:
    return next(e.message_id for e in store.read(sid)
                if isinstance(e, MessageStarted) and e.role == "assistant")


SHOW = ShowCommand()
DEMO = DemoCommand()
