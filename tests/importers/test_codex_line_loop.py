"""The Codex main pass reads its lines in a loop of its own (issue 30 target 5): a whole
line that decodes into the envelope is taken there, every other goes through
``read_line``. Whatever the file holds, it must yield what ``json_lines`` with
``_decode_line`` yields (the same numbers and values), note and skip the same lines,
and refuse the same line with the same error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers import codex
from engine.importers.base import ImportInputError, ImportReport, json_lines

_ENVELOPE = st.builds(
    lambda kind, payload: json.dumps({"timestamp": "2026-01-02T03:04:05.678Z", "type": kind,
                                      "payload": payload}).encode(),
    st.sampled_from(["response_item", "event_msg", "session_meta", "turn_context", "x"]),
    st.one_of(st.dictionaries(st.sampled_from(["type", "text", "message", "role"]),
                              st.text(max_size=4), max_size=3), st.integers(), st.none()))
_LINE = st.one_of(
    _ENVELOPE, _ENVELOPE.map(lambda b: b" " + b),  # leading whitespace
    st.just(b""), st.just(b"   "), st.just(b"{"), st.just(b"[1, 2]"), st.just(b"7"),
    st.just(b'{"type": "event_msg", "payload": {"message": "\\ud83d"}}'),  # lone surrogate
    st.just(b'{"a": ' * 3000 + b"1" + b"}" * 3000),  # nested past the interpreter
    st.just(b'{"type": "response_item", "payload": {"type": "message", "content": "'
            + b"x" * 300 + b'"}}'),  # over a small max_line
    st.just(b"\x00junk"), st.just(b'{"timestamp": 1} trailing'))


def _outcome(lines: Any, report: ImportReport) -> tuple[list[tuple[int, Any]], str | None]:
    out: list[tuple[int, Any]] = []
    try:
        for number, value in lines:
            out.append((number, value))
    except ImportInputError as exc:
        return out, str(exc)
    return out, None


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINE, min_size=1, max_size=8), last_newline=st.booleans(),
       lenient=st.booleans(), max_line=st.sampled_from([200, 1 << 20]))
def test_the_loop_reads_every_line_as_json_lines_does(
        tmp_path: Path, lines: list[bytes], last_newline: bool, lenient: bool,
        max_line: int) -> None:
    path = tmp_path / "rollout-x.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if last_newline else b""))
    mine = ImportReport(str(path), "codex")
    rollout = codex._Rollout(path, mine, lenient, max_line)
    theirs = ImportReport(str(path), "codex")
    got = _outcome(rollout._records(), mine)
    want = _outcome(json_lines(path, theirs, lenient=lenient, max_line=max_line,
                               decoder=codex._decode_line), theirs)
    assert got == want
    assert mine.to_json() == theirs.to_json()
