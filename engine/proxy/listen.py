"""What ``convlog proxy`` and ``convlog replay`` share as verbs: their arguments
(``--store``, ``--listen HOST:PORT``, ``--key-file``), the check for the optional
extra, and binding the listening socket before the address is printed."""

from __future__ import annotations

import argparse
import importlib
import socket
import sys
from collections.abc import Callable
from typing import Any

from engine.cli import args as cli_args
from engine.cli.args import STORE_HELP

EXIT_OK, EXIT_USAGE = 0, 2


def listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def add_server_arguments(parser: argparse.ArgumentParser, default_listen: str,
                         extra: Callable[[argparse.ArgumentParser], None] | None = None
                         ) -> None:
    """``--store``, the verb's own arguments (``extra``), ``--listen``, ``--key-file``."""
    parser.add_argument("--store", required=True, help=STORE_HELP)
    if extra is not None:
        extra(parser)
    parser.add_argument("--listen", type=listen_address, default=default_listen,
                        metavar="HOST:PORT", help="where to listen (port 0: any free one)")
    cli_args.add_key_file(parser)


def has_extra(verb: str, *modules: str) -> bool:
    """Whether the optional ``convlog[proxy]`` modules import (else says so)."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        print(f"convlog {verb}: install the extra: pip install 'convlog[proxy]'",
              file=sys.stderr)
        return False
    return True


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (bound first so that port 0 can be printed). Its protocol is
    named: asyncio turns Nagle's algorithm off only on sockets whose protocol says
    TCP, and an accepted connection inherits the listener's (with protocol 0, each
    small write waited for the client's delayed ACK: up to 40 ms a chunk)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def listening(verb: str, address: tuple[str, int], what: str = "") -> socket.socket | None:
    """The verb's bound socket, its address printed (``convlog VERB on URL``: how
    scripts and tests learn a port 0), or None with the reason on stderr."""
    host, port = address
    try:
        sock = bind(host, port)
    except OSError as exc:
        print(f"convlog {verb}: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return None
    print(f"convlog {verb} on {url_of(sock, host)}{f' ({what})' if what else ''}",
          flush=True)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve_asgi(app: Any, sock: socket.socket) -> None:
    """Serve an ASGI ``app`` on ``sock`` with uvicorn until interrupted. No ``server``
    or ``date`` header is added: the answers are the recording's."""
    import uvicorn  # noqa: PLC0415 - the optional extra

    config = uvicorn.Config(app, log_level="warning", lifespan="on", server_header=False,
                            date_header=False, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
