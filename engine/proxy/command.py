"""The ``proxy`` verb (needs ``convlog[proxy]``)."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from engine.cli import args as cli_args
from engine.cli.args import STORE_HELP, store_url
from engine.errors import ConvlogError
from engine.proxy.listen import bind, listen_address, serve, url_of

EXIT_OK, EXIT_USAGE = 0, 2


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


class ProxyCommand:
    name = "proxy"
    help = "record an agent's model calls: a reverse proxy for the model APIs (convlog[proxy])"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--store", required=True, help=STORE_HELP)
        parser.add_argument("--listen", type=listen_address, default="127.0.0.1:8787",
                            metavar="HOST:PORT", help="where to listen ("
                            "port 0: any free one)")
        parser.add_argument("--upstream", action="append", default=[],
                            metavar="NAME=ORIGIN,...",
                            help="where each API goes (anthropic=, openai=, gemini=); the "
                                 "default is the provider's public origin")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        try:
            import httpx  # noqa: F401, PLC0415 - the optional extra
            import uvicorn  # noqa: F401, PLC0415

            from engine.proxy.forward import ProxyApp  # noqa: PLC0415
            from engine.proxy.process import RecorderProcess  # noqa: PLC0415
        except ImportError:
            print("convlog proxy: install the extra: pip install 'convlog[proxy]'",
                  file=sys.stderr)
            return EXIT_USAGE
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
        host, port = args.listen
        try:
            sock = bind(host, port)
        except OSError as exc:
            print(f"convlog proxy: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
            recorder.stop()
            return EXIT_USAGE
        print(f"convlog proxy on {url_of(sock, host)}", flush=True)
        try:
            serve(ProxyApp(recorder, origins), sock)
        finally:
            sock.close()
            recorder.sync(10)
            recorder.stop()
        return EXIT_OK


PROXY = ProxyCommand()
