"""``convlog import``: a transcript file or directory into a store, with a one-screen report."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from engine.cli import EXIT_OK, EXIT_USAGE
from engine.cli.args import STORE_HELP, store_url
from engine.cli.output import one_line
from engine.importers.base import PROGRESS, ImportInputError, drop_empty, printable
from engine.importers.detect import FORMATS, plan_path
from engine.importers.follow import DEFAULT_INTERVAL, follow
from engine.importers.write import write_plan
from engine.store import open_store

MB = 1024 * 1024
EXIT_INTERRUPTED = 130  # as every convlog command after Ctrl-C
PROGRESS_MIN_BYTES = 8 * MB  # smaller files import too fast to need it


# Not the demo's store: ``convlog demo`` deletes that one on every run.
IMPORT_URL = "sqlite:///convlog.db"


class ImportCommand:
    name = "import"
    help = ("import Claude Code, Codex, OpenCode, Gemini CLI, Q CLI or aider sessions "
            "(nothing written on bad input)")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", help="a transcript file or a directory of them")
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument("--store", default=IMPORT_URL, type=store_url,
                            help=f"{STORE_HELP} (default: {IMPORT_URL})")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--lenient", action="store_true",
                            help="skip bad lines (listed in the report) instead of failing")
        parser.add_argument("--follow", action="store_true",
                            help="keep importing as the agent writes (new lines, new files) "
                                 "until Ctrl-C; each round writes only what is new")
        parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL,
                            help="with --follow: seconds between two looks at the path "
                                 f"(default {DEFAULT_INTERVAL})")

    def run(self, args: argparse.Namespace) -> int:
        token = PROGRESS.set(_show_progress if sys.stderr.isatty() else None)
        try:
            return self._run(args)
        finally:
            PROGRESS.reset(token)

    def _run(self, args: argparse.Namespace) -> int:
        if args.follow:
            return _follow(args)
        try:
            given = Path(args.path).absolute()  # a team dir, its inboxes/, or an inbox file
            team = next((d for d in (given, given.parent, given.parent.parent)
                         if (d / "config.json").is_file() and (d / "inboxes").is_dir()), None)
            if team is not None:  # Agent Teams inboxes are mail, not sessions
                raise ImportInputError(args.path, f"{team} is a Claude Code Agent Teams team "
                                       "directory: its inboxes go into the mailbox with "
                                       f"`convlog mailbox import {team} --project ID --assign`")
            plan = plan_path(Path(args.path), args.format, lenient=args.lenient)
            if args.lenient:
                drop_empty(plan)
            if len(plan.sessions) == 0:
                raise ImportInputError(args.path, "no session found in the input")
            store = open_store(args.store)
            try:
                write_plan(store, plan)
            except KeyboardInterrupt:
                # Each session is appended whole, so the store stays consistent; the ids are
                # the source's, so importing again writes only what is missing.
                done = len(plan.report.sessions)
                print(f"convlog import: interrupted after {done} of {len(plan.sessions)} "
                      "session(s) were written whole; import the same path again to finish",
                      file=sys.stderr)
                return EXIT_INTERRUPTED
            finally:
                store.close()
        except ImportInputError as exc:
            # one_line: a path or a record's text may hold a newline or control bytes
            print(one_line(f"convlog import: {exc}; nothing written"), file=sys.stderr)
            return EXIT_USAGE
        # A path that is not UTF-8 (kept by Python as lone surrogates) prints as U+FFFD:
        # a strict stdout would fail after the import was written.
        if args.json:
            print(printable(json.dumps(plan.report.to_json(), ensure_ascii=False, indent=2)))
        else:
            print(printable(plan.report.render()))
        return EXIT_OK


def _follow(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(one_line(f"convlog import: {path}: no such file or directory"), file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args.store)
    # A follower run as a service is stopped with SIGTERM: it stops as on Ctrl-C.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(f"following {printable(str(path))} (Ctrl-C stops; each round writes only what "
              "is new)", file=sys.stderr, flush=True)
        follow(store, path, args.format, lenient=args.lenient,
               interval=max(args.interval, 0.01))
    except KeyboardInterrupt:
        # Each session is appended whole: stopping at any moment leaves the store whole.
        print("convlog import: stopped following", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
        store.close()
    return EXIT_OK


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _show_progress(path: str, done: int, size: int) -> None:
    """One self-overwriting stderr line per report: large files take seconds."""
    if size < PROGRESS_MIN_BYTES:
        return
    end = "\n" if done >= size else ""
    print(f"\rreading {path}: {done / MB:.0f} of {size / MB:.0f} MB", end=end,
          file=sys.stderr, flush=True)


IMPORT = ImportCommand()
