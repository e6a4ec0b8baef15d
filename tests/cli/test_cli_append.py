"""``convlog append STORE --session ID``: JSON lines on stdin, all or nothing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from engine.cli import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, main
from engine.store import open_store

SID = "0190a000-0000-7000-8000-0000000000aa"
MID = "0190a000-0000-7000-8000-0000000000bb"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """main() points structlog at the captured stderr; don't leak that to other tests."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def lines(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def started() -> dict[str, Any]:
    return {"type": "message.started", "message_id": MID, "role": "assistant", "agent": "build"}


def text(part_id: str, value: str = "Hel") -> dict[str, Any]:
    return {"type": "text.added", "message_id": MID, "part_id": part_id, "text": value}


def delta(part_id: str, value: str = "lo") -> dict[str, Any]:
    return {"type": "text.delta", "message_id": MID, "part_id": part_id, "delta": value}


def run(monkeypatch: pytest.MonkeyPatch, data: bytes, *argv: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    return main(list(argv))


def stored(url: str) -> list[str]:
    store = open_store(url)
    try:
        if all(s.id != SID for s in store.sessions()):
            return []
        return [type(e).__name__ for e in store.read(SID)]
    finally:
        store.close()


def test_all_appended(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                      url: str) -> None:
    data = lines(started(), text("p1"), delta("p1"),
                 {"type": "part.ended", "message_id": MID, "part_id": "p1"},
                 {"type": "message.completed", "message_id": MID, "finish": "stop"})
    assert run(monkeypatch, data + b"\n", "append", url, "--session", SID) == EXIT_OK
    out, err = capsys.readouterr()
    assert "appended 5 event(s)" in out
    assert err == ""
    assert stored(url) == ["MessageStarted", "TextAdded", "TextDelta", "PartEnded",
                           "MessageCompleted"]


def test_second_run_continues_the_session(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert run(monkeypatch, lines(started(), text("p1")), "append", url, "--session",
               SID) == EXIT_OK
    assert run(monkeypatch, lines(delta("p1", "!")), "append", url, "--session", SID) == EXIT_OK
    assert stored(url) == ["MessageStarted", "TextAdded", "TextDelta"]
    # The reopened session knows the message is open: an identical start is a no-op,
    # a different one is rejected.
    assert run(monkeypatch, lines(started()), "append", url, "--session", SID) == EXIT_OK
    assert run(monkeypatch, lines({**started(), "agent": "plan"}), "append", url, "--session",
               SID) == EXIT_REJECTED
    assert "current state 'open'" in capsys.readouterr().err
    assert stored(url) == ["MessageStarted", "TextAdded", "TextDelta"]


def test_illegal_event_rejects_the_whole_batch(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str],
                                               url: str) -> None:
    data = lines(started(), text("p1"), delta("p2"), delta("p1"))
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    line = err.strip()
    assert "event #3" in line
    assert "text.delta" in line
    assert "part p2" in line
    assert "current state 'absent'" in line
    assert "attempted 'streaming'" in line
    assert "valid states: streaming" in line
    assert line.endswith("nothing appended")
    assert stored(url) == []


def test_terminal_state_lists_no_valid_states(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              url: str) -> None:
    data = lines(started(), text("p1"),
                 {"type": "part.ended", "message_id": MID, "part_id": "p1"}, delta("p1"))
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "event #4" in err
    assert "current state 'done'" in err
    assert "valid states: none (terminal)" in err
    assert stored(url) == []


def test_business_rule_violation(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str], url: str) -> None:
    data = lines(started(), {"type": "tool.added", "message_id": MID, "part_id": "t1",
                             "call_id": "", "tool": "bash"})
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "event #2 (tool.added)" in err
    assert "BR-01" in err
    assert stored(url) == []


@pytest.mark.parametrize("bad", [b"{not json\n", b'{"type": "text.exploded"}\n',
                                 b'{"type": "text.delta", "message_id": "m"}\n'])
def test_malformed_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                        url: str, bad: bytes) -> None:
    data = lines(started()) + bad + lines(text("p1"))
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "event #2" in err
    assert "nothing appended" in err
    assert stored(url) == []


def test_unknown_store_scheme(monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    code = run(monkeypatch, lines(started()), "append", "postgres://db/x", "--session", SID)
    assert code == EXIT_USAGE
    assert "postgres" in capsys.readouterr().err


def test_python_dash_m_engine(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/sub.db"
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "append", url, "--session", SID],
        input=lines(started(), text("p1"), delta("p2")), capture_output=True, cwd=REPO,
        timeout=60, check=False,
    )
    assert proc.returncode == EXIT_REJECTED
    assert proc.stdout == b""
    assert len(proc.stderr.decode().splitlines()) == 1
    assert b"event #3 (text.delta)" in proc.stderr

    proc = subprocess.run(
        [sys.executable, "-m", "engine", "append", url, "--session", SID],
        input=lines(started(), text("p1"), delta("p1")), capture_output=True, cwd=REPO,
        timeout=60, check=False,
    )
    assert proc.returncode == EXIT_OK, proc.stderr.decode()
    assert b"appended 3 event(s)" in proc.stdout
    assert stored(url) == ["MessageStarted", "TextAdded", "TextDelta"]


def test_rejected_first_append_leaves_no_session(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    data = lines(started(), delta("p-missing"))
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("rejected event #2 (text.delta)")
    store = open_store(url)
    try:
        assert store.sessions() == []
    finally:
        store.close()


def test_session_id_must_be_a_uuid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    assert run(monkeypatch, lines(started()), "append", url, "--session", "../x") == EXIT_USAGE
    assert "not a UUID" in capsys.readouterr().err


def test_unsupported_schema_version_is_rejected(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    data = lines(started(), {**text("p1"), "v": 2})
    assert run(monkeypatch, data, "append", url, "--session", SID) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert "rejected event #2 (text.added)" in err
    assert "version 2 is not supported" in err
    assert stored(url) == []
