"""`convlog demo` on every store (issue 9: the JSONL demo failed on its snapshot names).

The durable stores run the real command in a subprocess; memory (in-process by
nature) runs the same command object. All four must print the same session, up
to the generated ids and the URL, and leave a store that verifies, with the
snapshots the demo wrote readable back.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import InvalidId
from engine.store import open_store
from engine.store.verify import verify
from projections.commands import DEMO
from projections.timetravel import INDEX_NAME, message_snapshot_name

ROOT = Path(__file__).resolve().parents[2]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Generated ids as printed: whole, shortened to their last 12 digits, and part ids.
_IDS = re.compile(r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-)?[0-9a-f]{12}"
                  r"|prt_[0-9a-z]{26}")


def normalized(output: str, url: str) -> str:
    """Ids numbered by first appearance, the URL replaced: what must match across stores."""
    names: dict[str, str] = {}
    text = output.replace(url, "URL")
    return _IDS.sub(lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"), text)


def run_demo(url: str) -> str:
    if url.startswith("memory:"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert DEMO.run(argparse.Namespace(store=url, every=16)) == 0
        return out.getvalue()
    done = subprocess.run([sys.executable, "-m", "engine", "demo", "--store", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def memory_output() -> str:
    return normalized(run_demo("memory://"), "memory://")


def test_demo_runs_alike_on_every_store(any_url: str, memory_output: str) -> None:
    output = run_demo(any_url)
    assert normalized(output, any_url) == memory_output
    if any_url.startswith("memory:"):
        return  # its store lived in the command's process
    sid = re.search(r"recorded session (\S+): (\d+) events", output)
    assert sid is not None
    store = open_store(any_url)
    try:
        report = verify(store)
        assert report.ok, report.problems
        assert store.version(sid.group(1)) == int(sid.group(2))
        found = store.latest_snapshot(sid.group(1), INDEX_NAME, int(sid.group(2)))
        assert found is not None
        mid = _UUID.findall(output.split("== messages now")[1])[0]
        assert store.latest_snapshot(sid.group(1), message_snapshot_name(mid),
                                     int(sid.group(2))) is not None
    finally:
        store.close()


@pytest.mark.parametrize("name", ["withparts.v1.msg/0190a000-0000-7000-8000-000000000001",
                                  ".hidden", "..", "a%2Fb", "a/b", "ünï cödé", "x" * 390])
def test_snapshot_names_are_valid_on_every_store(any_url: str, name: str) -> None:
    """Distinct names stay distinct (``a/b`` vs ``a%2Fb``), whatever the store."""
    store = open_store(any_url)
    try:
        sid = "0190a000-0000-7000-8000-0000000d0d01"
        store.create_session(sid, created=1)
        store.put_snapshot(sid, name, 3, b"mine")
        store.put_snapshot(sid, name + "-other", 3, b"other")
        assert store.latest_snapshot(sid, name, 5) == (3, b"mine")
        assert store.latest_snapshot(sid, name, 2) is None
        assert store.latest_snapshot(sid, "a%2Fb" if name == "a/b" else "a/b", 5) is None
    finally:
        store.close()


@pytest.mark.parametrize("name", ["", "tab\tname", "nul\0", "lone \ud800", "x" * 401])
def test_invalid_snapshot_names_are_refused_on_every_store(any_url: str, name: str) -> None:
    store = open_store(any_url)
    try:
        sid = "0190a000-0000-7000-8000-0000000d0d02"
        store.create_session(sid, created=1)
        with pytest.raises(InvalidId):
            store.put_snapshot(sid, name, 1, b"x")
        with pytest.raises(InvalidId):
            store.latest_snapshot(sid, name, 1)
    finally:
        store.close()
