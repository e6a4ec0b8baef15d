"""Fuzz ``convlog append``'s input: JSON of every shape and type, wrong field types,
sizes, unicode (lone surrogates and escapes included), odd ids, raw bytes. Every run
ends with a documented exit code, one readable line on failure, no traceback, and a
log that is unchanged by a refused batch and still verifies."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import EXIT_OK, EXIT_REJECTED
from engine.store import open_store
from engine.store.verify import verify
from tests.support.cli_run import run_cli, scratch_dir

SID = "0190a000-0000-7000-8000-0000000000aa"
MID = "0190a000-0000-7000-8000-0000000000bb"
TALLY: Counter[tuple[str, int]] = Counter()
TRIALS = 300

TEMPLATES: list[dict[str, Any]] = [
    {"type": "message.started", "message_id": MID, "role": "assistant"},
    {"type": "text.added", "message_id": MID, "part_id": "prt_a", "text": "hi"},
    {"type": "text.delta", "message_id": MID, "part_id": "prt_a", "delta": "there"},
    {"type": "part.ended", "message_id": MID, "part_id": "prt_a"},
    {"type": "tool.added", "message_id": MID, "part_id": "prt_t", "call_id": "c1",
     "tool": "bash", "input": {"command": "ls"}},
    {"type": "tool.started", "message_id": MID, "part_id": "prt_t"},
    {"type": "tool.completed", "message_id": MID, "part_id": "prt_t", "output": "a.txt"},
    {"type": "message.completed", "message_id": MID, "finish": "stop"},
]

texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.sampled_from(["", "\x00", "\u202e", "𝄞", "\ufeff", "a" * 5000, "../x", "' OR 1=1"]),
)
numbers = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.sampled_from([0, -1, 2**63, 2**63 - 1, -(2**63), 10**30]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)), max_leaves=12)


@st.composite
def event_lines(draw: st.DrawFn) -> bytes:
    """One input line: a mutated template, a random JSON value, deep nesting or raw bytes."""
    kind = draw(st.sampled_from(["valid", "valid", "mutated", "mutated", "mutated", "value",
                                 "deep", "bytes"]))
    if kind == "valid":  # a legal next event carrying odd but well-typed text
        return json.dumps({"type": "text.delta", "message_id": MID, "part_id": "prt_a",
                           "delta": draw(texts)},
                          ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "value":
        return json.dumps(draw(values)).encode()
    if kind == "deep":
        depth = draw(st.sampled_from([64, 1000, 100_000]))
        head = {"type": "tool.added", "message_id": MID, "part_id": "p", "call_id": "c",
                "tool": "t"}
        return (json.dumps(head)[:-1] + ', "input": ' + "[" * depth + "1" + "]" * depth
                + "}").encode()
    if kind == "bytes":
        return draw(st.binary(max_size=80)).replace(b"\n", b" ")
    event = dict(draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "drop", "add", "id", "time", "seq"]))
        keys = sorted(event)
        if action == "set":
            event[draw(st.sampled_from(keys))] = draw(values)
        elif action == "drop":
            event.pop(draw(st.sampled_from(keys)), None)
        elif action == "add":
            event[draw(texts)] = draw(values)
        elif action == "id":
            event["id"] = draw(st.one_of(texts, st.uuids().map(str), values))
        else:
            event[action] = draw(numbers)
    encoded = json.dumps(event, ensure_ascii=draw(st.booleans()))
    return encoded.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with scratch_dir("append-fuzz") as root:
        url = f"sqlite:///{root}/fuzz.db"
        seed = b"".join(json.dumps(e).encode() + b"\n" for e in TEMPLATES[:3])
        assert run_cli(["append", url, "--session", SID], seed).code == EXIT_OK
        yield url


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    for (kind, code), n in sorted(TALLY.items()):
        print(f"append fuzz: {kind:8} exit {code}: {n}")


def _state(url: str) -> tuple[int, list[str]]:
    store = open_store(url, create=False)
    try:
        report = verify(store)
        assert report.ok, report.first
        return store.last_position(), sorted(report.heads)
    finally:
        store.close()


@settings(max_examples=TRIALS, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(event_lines(), min_size=1, max_size=4))
def test_any_append_input_ends_cleanly(url: str, lines: list[bytes]) -> None:
    before = _state(url)
    done = run_cli(["append", url, "--session", SID], b"\n".join(lines) + b"\n")
    done.assert_clean()
    assert done.code in (EXIT_OK, EXIT_REJECTED), done
    after = _state(url)  # verifiable either way
    if done.code != EXIT_OK:
        assert after == before  # a refused batch leaves the log exactly as it was
        assert done.err.count("\n") == 1, done.err
    TALLY["accepted" if done.code == EXIT_OK else "refused", done.code] += 1
