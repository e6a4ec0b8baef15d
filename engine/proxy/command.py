"""The ``proxy`` verb."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from engine.cli.args import store_url
from engine.errors import ConvlogError
from engine.proxy.listen import EXIT_OK, EXIT_USAGE, add_server_arguments, listening


def upstreams(values: list[str]) -> dict[str, str]:
    """``anthropic=https://…,openai=…`` (repeatable) -> provider -> origin."""
    from engine.proxy.forward import UPSTREAM_NAMES  # noqa: PLC0415

    out: dict[str, str] = {}
    for value in values:
        for item in filter(None, (v.strip() for v in value.split(","))):
            name, sep, origin = item.partition("=")
            parts = urlsplit(origin)
            if not sep or name not in UPSTREAM_NAMES:
                raise argparse.ArgumentTypeError(
                    f"--upstream {item!r}: use NAME=ORIGIN with NAME one of "
                    f"{', '.join(UPSTREAM_NAMES)}")
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip(
                    "/") or parts.query:
                raise argparse.ArgumentTypeError(
                    f"--upstream {item!r}: an origin is scheme://host[:port], no path")
            for provider in UPSTREAM_NAMES[name]:
                out[provider] = f"{parts.scheme}://{parts.netloc}"
    return out


def _upstream_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upstream", action="append", default=[],
                        metavar="NAME=ORIGIN,...",
                        help="where each API goes (anthropic=, openai=, gemini=); the "
                             "default is the provider's public origin")


class ProxyCommand:
    name = "proxy"
    help = "record an agent's model calls: a reverse proxy for the model APIs"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        add_server_arguments(parser, "127.0.0.1:8787", _upstream_argument)

    def run(self, args: argparse.Namespace) -> int:
        from engine.proxy.forward import Forwarder  # noqa: PLC0415
        from engine.proxy.process import RecorderProcess  # noqa: PLC0415

        try:
            origins = upstreams(args.upstream)
        except argparse.ArgumentTypeError as exc:
            print(f"convlog proxy: {exc}", file=sys.stderr)
            return EXIT_USAGE
        recorder = RecorderProcess(store_url(args.store), key_file=args.key_file)
        try:
            recorder.start()
        except ConvlogError as exc:
            print(f"convlog proxy: {exc}", file=sys.stderr)
            return EXIT_USAGE
        sock = listening("proxy", args.listen)
        if sock is None:
            recorder.stop()
            return EXIT_USAGE
        try:
            Forwarder(recorder, origins, preconnect=True).run(sock)
        finally:
            sock.close()
            recorder.sync(10)
            recorder.stop()
        return EXIT_OK


PROXY = ProxyCommand()
