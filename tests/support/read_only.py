"""A reader that really cannot write: a subprocess run as an unprivileged user when the
tests run as root (chmod does not stop root), on files and directories made read-only.

Each test checks that the reader was in fact denied write access, so a sandbox where
the switch does not take effect fails instead of passing vacuously.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NOBODY = "65534"
# util-linux setpriv drops root for the child (subprocess's user= was refused exec of
# the venv interpreter under a private /root in the sandbox this was written in).
SETPRIV = shutil.which("setpriv")
READER: list[str] = ([SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
                     if os.getuid() == 0 and SETPRIV else [])
OTHER_USER: dict[str, Any] = (
    {"user": int(NOBODY), "group": int(NOBODY), "extra_groups": []}
    if os.getuid() == 0 and not SETPRIV else {})


@contextlib.contextmanager
def shared_dir() -> Iterator[Path]:
    """A temporary directory the reader can reach (pytest's tmp_path is private)."""
    place = Path(tempfile.mkdtemp(prefix="convlog-ro-"))
    place.chmod(0o755)
    try:
        yield place
    finally:
        for root, dirs, _ in os.walk(place):
            for d in dirs:
                (Path(root) / d).chmod(0o755)
        shutil.rmtree(place)


def make_read_only(place: Path) -> None:
    """Every file 0444 and every directory 0555, ``place`` included."""
    for root, dirs, files in os.walk(place, topdown=False):
        for f in files:
            (Path(root) / f).chmod(0o444)
        for d in dirs:
            (Path(root) / d).chmod(0o555)
    place.chmod(0o555 if place.is_dir() else 0o444)


def state(place: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every entry under ``place``: content, mtime and mode (new files show up too)."""
    found: dict[str, tuple[bytes, int, int]] = {}
    for root, dirs, files in os.walk(place):
        for name in dirs + files:
            path = Path(root) / name
            st = path.lstat()
            data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
            found[str(path.relative_to(place))] = (data, st.st_mtime_ns, st.st_mode)
    return found


def as_reader(code: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` (``sys.argv[1:]`` = ``args``) as the unprivileged reader."""
    return subprocess.run([*READER, sys.executable, "-c", code, *args], input=stdin,
                          capture_output=True, text=True, timeout=300, cwd="/", check=False,
                          **OTHER_USER)


CLI = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
CAN_WRITE = "import os, sys; print(os.access(sys.argv[1], os.W_OK))"
