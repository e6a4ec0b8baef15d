"""``convlog serve`` as a user runs it: a subprocess, its printed URL, real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from engine.cli.args import store_url
from engine.store import open_store
from projections.demo import record_demo

# A loaded machine can take seconds to start the server: its printed socket already
# listens, so a request waits in the backlog; give it time instead of httpx's 5 s.
HTTP = httpx.Client(timeout=60)


@contextmanager
def serve(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    convlog = str(Path(sys.executable).parent / "convlog")
    proc = subprocess.Popen([convlog, "serve", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("convlog viewer on http://127.0.0.1:"), (line, proc.stderr)
        yield line.split(" on ", 1)[1].strip(), proc
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_a_path_read_only(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with open_store(store_url(str(db))) as store:
        sid = record_demo(store).id
    with serve(str(db)) as (url, _):
        assert "#token" not in url
        base = url.rstrip("/")
        sessions = HTTP.get(f"{base}/api/sessions").json()
        assert [s["id"] for s in sessions] == [sid]
        assert "convlog" in HTTP.get(f"{base}/").text
        assert HTTP.post(f"{base}/api/sessions/{sid}/fork", json={"seq": 3}).status_code == 403


def test_serve_with_writes_prints_the_token(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with open_store(store_url(str(db))) as store:
        sid = record_demo(store).id
    with serve(f"sqlite:///{db}", "--allow-writes") as (url, _):
        base, token = url.split("/#token=")
        assert len(token) >= 20
        r = HTTP.post(f"{base}/api/sessions/{sid}/fork", json={"seq": 3},
                       headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
    with open_store(store_url(str(db))) as store:
        assert store.lineage(r.json()["id"]) == [(sid, 3), (r.json()["id"], None)]


def test_bare_paths_are_sqlite_files() -> None:
    assert store_url("x.db") == f"sqlite:///{os.path.abspath('x.db')}"  # the file, absolute
    assert store_url("jsonl:///tmp/d") == "jsonl:///tmp/d"


def test_serve_checks_the_log_against_an_anchor_file(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with open_store(store_url(str(db))) as store:
        sid = record_demo(store).id
    taken = subprocess.run([str(Path(sys.executable).parent / "convlog"), "anchor",
                            store_url(str(db))], capture_output=True, text=True, check=True)
    anchors = tmp_path / "anchors.txt"
    anchors.write_text(taken.stdout, encoding="utf-8")
    with serve(str(db), "--anchor", str(anchors)) as (url, _):
        got = HTTP.get(f"{url.rstrip('/')}/api/sessions/{sid}/verify").json()
        assert got["ok"] is True
        assert got["anchor"] == {"seq": int(taken.stdout.split("/")[2]), "holds": True}


def test_serve_refuses_a_malformed_anchor(tmp_path: Path) -> None:
    convlog = str(Path(sys.executable).parent / "convlog")
    for given in ("convlog-anchor-1/x/notanumber/00", str(tmp_path / "missing.txt")):
        done = subprocess.run([convlog, "serve", str(tmp_path / "x.db"), "--anchor", given],
                              check=False, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert "anchor" in done.stderr
        assert done.stdout == ""
