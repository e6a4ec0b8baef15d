"""A reader that really cannot write: a subprocess run as an unprivileged user when the
tests run as root (chmod does not stop root), on files and directories made read-only.

Each test checks that the reader was in fact denied write access, so a sandbox where
the switch does not take effect fails instead of passing vacuously.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import importlib.util
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


REPO = Path(__file__).resolve().parents[2]
# What the reader imports: the project and its four runtime dependencies (with theirs).
RUNTIME = ("engine", "projections", "convlog", "attr", "attrs", "cattrs", "msgspec",
           "structlog", "typing_extensions", "exceptiongroup")
_runtime: list[Path] = []


def _reachable_runtime() -> Path:
    """A world-readable copy of what the reader imports. The clone and its .venv may sit
    under a directory the unprivileged user cannot enter (a CI checkout under /root), so
    the reader runs the real interpreter on this copy instead of the venv's entry point."""
    if _runtime:
        return _runtime[0]
    place = Path(tempfile.mkdtemp(prefix="convlog-ro-runtime-"))
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in RUNTIME:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # exceptiongroup is only needed before Python 3.11
        origin = Path(spec.origin)
        if spec.submodule_search_locations:
            shutil.copytree(origin.parent, place / origin.parent.name, ignore=skip)
        else:
            shutil.copy2(origin, place / origin.name)
    # The CLI finds its plug-in commands (show, export, ...) by entry point.
    dist = importlib.metadata.distribution("convlog")
    info = place / f"convlog-{dist.version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: convlog\nVersion: {dist.version}\n")
    (info / "entry_points.txt").write_text(dist.read_text("entry_points.txt") or "")
    for root, dirs, files in os.walk(place):
        for d in dirs:
            (Path(root) / d).chmod(0o755)
        for f in files:
            (Path(root) / f).chmod(0o644)
    place.chmod(0o755)
    atexit.register(shutil.rmtree, place, True)
    _runtime.append(place)
    return place


def as_reader(code: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` (``sys.argv[1:]`` = ``args``) as the unprivileged reader."""
    # -S: no site-packages of the real interpreter; the copy is the whole import path.
    python = os.path.realpath(sys.executable)
    env = {**os.environ, "PYTHONPATH": str(_reachable_runtime()),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*READER, python, "-S", "-c", code, *args], input=stdin,
                          capture_output=True, text=True, timeout=300, cwd="/", check=False,
                          env=env, **OTHER_USER)


CLI = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
CAN_WRITE = "import os, sys; print(os.access(sys.argv[1], os.W_OK))"
