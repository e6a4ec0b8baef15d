"""``convlog proxy`` / ``convlog replay`` run as the user runs them: a subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.proxy.clients import ROOT


@contextmanager
def verb(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start ``convlog ARGS`` (it prints ``convlog <verb> on URL``); yield (URL, process).
    Stopped with SIGINT (a clean shutdown) unless the test killed it."""
    proc = subprocess.Popen([sys.executable, "-m", "engine", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " on http://" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise RuntimeError(f"convlog {args[0]} did not start: {line!r} {err[-2000:]}")
    url = line.split(" on ", 1)[1].split()[0]
    try:
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
