"""Run ``convlog`` in-process with its own stdin/stdout/stderr, for fuzz tests that need
thousands of runs (a subprocess each would cost seconds)."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import structlog

from engine.cli import EXIT_CODES, main

DOCUMENTED = frozenset(c.code for c in EXIT_CODES)


@attrs.frozen
class Outcome:
    code: int
    out: str
    err: str

    def assert_clean(self) -> None:
        """A documented exit code, no traceback, and when it failed: one readable first
        line on stderr naming the program."""
        assert self.code in DOCUMENTED, self
        assert self.code != 1, f"internal error: {self.err}"
        assert "Traceback" not in self.err, self.err
        assert "Traceback" not in self.out, self.out
        if self.code != 0:
            first = self.err.splitlines()[0] if self.err else ""
            assert first.startswith(("convlog", "rejected")), self
            assert first.isprintable(), self


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="backslashreplace",
                            write_through=True)


def run_cli(argv: Sequence[str], stdin: bytes = b"") -> Outcome:
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = _stream(), _stream()
    sys.stdin, sys.stdout, sys.stderr = _stream(stdin), out, err
    try:
        code = main(list(argv))
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        structlog.reset_defaults()
    return Outcome(code, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", "backslashreplace")


@contextlib.contextmanager
def scratch_dir(name: str) -> Iterator[Path]:
    """A directory for fuzz stores, in RAM where the system has a tmpfs: every open of a
    SQLite store commits (fsyncs), and a fuzz run opens thousands; the disk adds nothing
    to what these tests check."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix=f"convlog-{name}-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_COPIES = itertools.count()


def fresh_copy(src: Path, base: Path) -> Path:
    """A copy of the store ``src`` (a file or a directory) in a new directory under
    ``base``: a store that failed to open may still hold its files until collected."""
    root = base / str(next(_COPIES))
    root.mkdir(parents=True)
    dst = root / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)
    return dst
