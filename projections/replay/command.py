"""The ``replay`` verb (needs ``convlog[proxy]``)."""

from __future__ import annotations

import argparse
import sys

from engine.cli import args as cli_args
from engine.cli.args import STORE_HELP, store_url
from engine.errors import ConvlogError
from engine.proxy.listen import bind, listen_address, serve, url_of
from engine.store import open_store

EXIT_OK, EXIT_USAGE = 0, 2


class ReplayCommand:
    name = "replay"
    help = "serve recorded model calls back as the provider APIs (convlog[proxy])"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--store", required=True, help=STORE_HELP)
        parser.add_argument("--session", type=cli_args.session_id,
                            help="replay this session only (a fork: its own path)")
        parser.add_argument("--listen", type=listen_address, default="127.0.0.1:8788",
                            metavar="HOST:PORT",
                            help="where to listen (port 0: any free one)")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        try:
            import uvicorn  # noqa: F401, PLC0415 - the optional extra
        except ImportError:
            print("convlog replay: install the extra: pip install 'convlog[proxy]'",
                  file=sys.stderr)
            return EXIT_USAGE
        from projections.replay.app import ReplayApp  # noqa: PLC0415
        from projections.replay.catalog import load  # noqa: PLC0415

        try:
            store = open_store(store_url(args.store), key_file=args.key_file, create=False)
        except ConvlogError as exc:
            print(f"convlog replay: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            try:
                calls = load(store, args.session)
            except ConvlogError as exc:
                print(f"convlog replay: {exc}", file=sys.stderr)
                return EXIT_USAGE
            host, port = args.listen
            try:
                sock = bind(host, port)
            except OSError as exc:
                print(f"convlog replay: cannot listen on {host}:{port}: {exc}",
                      file=sys.stderr)
                return EXIT_USAGE
            print(f"convlog replay on {url_of(sock, host)} ({len(calls)} recorded calls)",
                  flush=True)
            try:
                serve(ReplayApp(calls), sock)
            finally:
                sock.close()
        finally:
            store.close()
        return EXIT_OK


REPLAY = ReplayCommand()
