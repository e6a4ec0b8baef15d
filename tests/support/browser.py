"""A real server and a real browser for the viewer's tests and benchmark.

The server is uvicorn in a thread on 127.0.0.1 with a port the OS picks. The
browser is a chromium found the usual ways (:func:`find_chromium`) and driven by
Playwright; on these machines that is Debian's, since Playwright's own download
cannot work here.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import Browser, Playwright

# TestClient's default host name ("testserver") is not one the viewer answers to.
LOOPBACK = "http://127.0.0.1"
BROWSER_ENV = "CONVLOG_CHROMIUM"  # a chromium (or Chrome) executable to use first
# The names a chromium goes by on PATH, in the order they are tried.
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = ("install one: `apt-get install chromium` (Debian/Ubuntu), or "
                "`python -m playwright install chromium`, or set CONVLOG_CHROMIUM "
                "to a chromium or Chrome executable")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


class NoBrowser(RuntimeError):
    """No chromium was found; the message says how to install one."""


def _runnable(path: str | None) -> str | None:
    if path and Path(path).is_file() and os.access(path, os.X_OK):
        return path
    return None


def find_chromium(pw: Playwright | None = None) -> str | None:
    """A chromium to drive: ``$CONVLOG_CHROMIUM``, then Playwright's own download,
    then ``chromium``, ``chromium-browser`` or ``google-chrome`` on PATH."""
    given = os.environ.get(BROWSER_ENV, "")
    if given:
        # A wrong path is a mistake to report, not a reason to pick another browser.
        return _runnable(given) or _runnable(shutil.which(given))
    if pw is not None:
        try:
            own = _runnable(pw.chromium.executable_path)
        except Exception:
            own = None
        if own:
            return own
    for name in BROWSER_NAMES:
        found = _runnable(shutil.which(name))
        if found:
            return found
    return None


def missing_browser_reason() -> str:
    given = os.environ.get(BROWSER_ENV, "")
    if given:
        return f"{BROWSER_ENV}={given} is not an executable; {INSTALL_HINT}"
    return f"no chromium found (tried Playwright's own, {', '.join(BROWSER_NAMES)}); {INSTALL_HINT}"


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run ``app`` until the block ends; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer's server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def launch(pw: Playwright) -> Browser:
    """Headless chromium; Playwright gives each launch a fresh, temporary profile.

    Raises :class:`NoBrowser` (saying how to install one) when none is found."""
    path = find_chromium(pw)
    if path is None:
        raise NoBrowser(missing_browser_reason())
    return pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


@contextmanager
def chromium(pw: Playwright) -> Iterator[Browser]:
    """:func:`launch`, closed when the block ends."""
    browser = launch(pw)
    try:
        yield browser
    finally:
        browser.close()
