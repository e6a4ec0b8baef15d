"""The ``serve`` verb, plugged into ``convlog`` through the ``convlog.commands`` entry point."""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
from pathlib import Path

from engine.cli import args as cli_args
from engine.cli.args import STORE_HELP, store_url
from engine.errors import ConvlogError
from engine.store import anchor as anchors
from engine.store import open_store

EXIT_OK, EXIT_USAGE = 0, 2


class ServeCommand:
    name = "serve"
    help = "browse sessions in a time-travel viewer (needs convlog[serve])"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("store", help=STORE_HELP)
        parser.add_argument("--host", default="127.0.0.1", help="bind address (loopback)")
        parser.add_argument("--port", type=int, default=8000, help="port (0: any free one)")
        parser.add_argument("--allow-writes", action="store_true",
                            help="allow forking from the page (needs the token)")
        parser.add_argument("--token", help="the token writes need (default: a random one)")
        parser.add_argument("--anchor", action="append", default=[], metavar="FILE|TOKEN",
                            help="anchors printed earlier by `convlog anchor` (a file of tokens "
                                 "or one token; may be repeated): the verify badge checks the "
                                 "log against them")
        parser.add_argument("--public", action="store_true",
                            help="show every mailbox project's messages without a session "
                                 "token (default: reading a project needs one of its tokens)")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        try:
            import uvicorn  # noqa: PLC0415 - the optional extra

            from projections.serve.app import create_app  # noqa: PLC0415
        except ImportError:
            print("convlog serve: install the extra: pip install 'convlog[serve]'",
                  file=sys.stderr)
            return EXIT_USAGE
        try:
            given = load_anchors(args.anchor)  # a malformed anchor fails before serving
        except ConvlogError as exc:
            print(f"convlog serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        store = open_store(store_url(args.store), key_file=args.key_file, create=False)
        token = (args.token or secrets.token_urlsafe(18)) if args.allow_writes else None
        app = create_app(store, allow_writes=args.allow_writes, token=token, anchors=given,
                         public_mailbox=args.public, host=args.host)
        # Bind first, so that --port 0 prints the port the OS picked.
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((args.host, args.port))
        except OSError as exc:
            print(f"convlog serve: cannot listen on {args.host}:{args.port}: {exc}",
                  file=sys.stderr)
            store.close()
            return EXIT_USAGE
        # Listen before printing the URL: a browser or script that connects at once
        # waits in the backlog until the server accepts, instead of being refused.
        sock.listen(128)
        port = sock.getsockname()[1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        fragment = f"#token={token}" if token else ""
        print(f"convlog viewer on http://{host}:{port}/{fragment}", flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
            store.close()
        return EXIT_OK


def load_anchors(given: list[str]) -> list[anchors.Anchor]:
    """Each ``--anchor`` is a token, or a file of tokens as ``convlog anchor`` prints them."""
    found: list[anchors.Anchor] = []
    for item in given:
        if item.startswith(anchors.PREFIX):
            found.append(anchors.parse(item))
            continue
        try:
            text = Path(item).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise anchors.BadAnchor(f"cannot read anchor file {item}: {exc}") from None
        found.extend(anchors.parse_many(text))
    return found


SERVE = ServeCommand()
