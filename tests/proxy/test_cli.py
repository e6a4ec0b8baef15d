"""The verbs' refusals: a bad --upstream, a store that is not there, a taken port."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from engine.proxy.command import upstreams
from tests.proxy.clients import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_upstreams_are_origins() -> None:
    assert upstreams(["anthropic=http://127.0.0.1:9", "openai=https://x.example"]) == {
        "anthropic": "http://127.0.0.1:9", "openai-responses": "https://x.example",
        "openai-chat": "https://x.example"}
    for bad in ("claude=http://x", "anthropic=ftp://x", "anthropic=http://x/v1", "anthropic"):
        with pytest.raises(Exception, match="--upstream"):
            upstreams([bad])


def test_a_bad_upstream_is_a_usage_error(tmp_path: Path) -> None:
    got = _run("proxy", "--store", str(tmp_path / "s.db"), "--upstream", "anthropic=x")
    assert got.returncode == 2
    assert "an origin is scheme://host[:port]" in got.stderr


def test_replay_of_a_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    got = _run("replay", "--store", str(tmp_path / "missing.db"))
    assert got.returncode == 2
    assert "convlog replay:" in got.stderr


def test_a_taken_port_is_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        got = _run("proxy", "--store", str(tmp_path / "s.db"), "--listen",
                   f"127.0.0.1:{port}")
    assert got.returncode == 2
    assert "cannot listen" in got.stderr
