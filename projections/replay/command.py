"""The ``replay`` verb (needs ``convlog[proxy]``)."""

from __future__ import annotations

import argparse
import sys

from engine.cli import args as cli_args
from engine.cli.args import store_url
from engine.errors import ConvlogError
from engine.proxy.listen import (
    EXIT_OK,
    EXIT_USAGE,
    add_server_arguments,
    has_extra,
    listening,
    serve_asgi,
)
from engine.store import open_store


def _session_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", type=cli_args.session_id,
                        help="replay this session only (a fork: its own path)")


class ReplayCommand:
    name = "replay"
    help = "serve recorded model calls back as the provider APIs (convlog[proxy])"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        add_server_arguments(parser, "127.0.0.1:8788", _session_argument)

    def run(self, args: argparse.Namespace) -> int:
        if not has_extra("replay", "uvicorn"):
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
            sock = listening("replay", args.listen, f"{len(calls)} recorded calls")
            if sock is None:
                return EXIT_USAGE
            try:
                serve_asgi(ReplayApp(calls), sock)
            finally:
                sock.close()
        finally:
            store.close()
        return EXIT_OK


REPLAY = ReplayCommand()
