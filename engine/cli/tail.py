"""``convlog tail``: stored events as JSON lines in global order."""

from __future__ import annotations

import argparse
import sys

from engine.cli import args as cli_args
from engine.cli import exits
from engine.codec import encode_json
from engine.mailbox_credentials import redacted
from engine.store import open_store


class TailCommand:
    name = "tail"
    help = "print stored events as JSON lines in global order; --follow waits for new ones"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--session", type=cli_args.session_id, metavar="ID",
                            help="only this session's own events")
        parser.add_argument("--follow", "-f", action="store_true",
                            help="keep waiting for new events (Ctrl-C ends, exit 0)")
        parser.add_argument("--from", dest="after", type=cli_args.natural, default=0,
                            metavar="POSITION",
                            help="start after this global position (default: the beginning)")
        parser.add_argument("--idle-timeout", type=cli_args.seconds, default=None,
                            metavar="SECONDS",
                            help="with --follow: stop after this many idle seconds")

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store, create=False, read_only=True)
        out = sys.stdout.buffer
        try:
            if args.session is not None:
                store.session_info(args.session)  # unknown: a usage error before any output
            if args.follow:
                records = store.subscribe(args.after, session_id=args.session,
                                          idle_timeout=args.idle_timeout)
            else:
                records = store.read_all(args.after, session_id=args.session)
            for rec in records:
                shown = encode_json(redacted(rec.event))  # never a credential verifier
                out.write(b'{"position":%d,"event":%s}\n' % (rec.position, shown))
                out.flush()
        except KeyboardInterrupt:
            if not args.follow:
                raise
        finally:
            store.close()
        return exits.OK.code
