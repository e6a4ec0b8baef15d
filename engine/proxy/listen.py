"""``--listen HOST:PORT`` and serving an ASGI app on a bound socket (shared by
``convlog proxy`` and ``convlog replay``)."""

from __future__ import annotations

import argparse
import socket
from typing import Any


def listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (bound first so that port 0 can be printed)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(app: Any, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until interrupted. No ``server`` or
    ``date`` header is added: the answers are the upstream's (or the recording's)."""
    import uvicorn  # noqa: PLC0415 - the optional extra

    config = uvicorn.Config(app, log_level="warning", lifespan="on", server_header=False,
                            date_header=False, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
