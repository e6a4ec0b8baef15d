"""The Gemini stream ingest under the adapters' fuzz (tests/adapters/test_ingest_fuzz.py):
valid streams, damaged ones, odd values. Typed errors only, the session settled, the
log verifies; a valid stream gives back its text, thoughts and calls."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.gemini import GeminiIngest
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection
from tests.adapters.test_ingest_fuzz import (
    assert_consistent,
    assert_typed,
    broken,
    feed_all,
    valid_with_odd_values,
)

JSON = dict[str, Any]
FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)
_PART = st.one_of(
    st.builds(lambda t: {"text": t}, _TEXT),
    st.builds(lambda t: {"text": t, "thought": True}, _TEXT),
    st.builds(lambda n, a: {"functionCall": {"name": n, "args": a}},
              st.sampled_from(["read_file", "run_shell_command"]),
              st.dictionaries(st.sampled_from(["path", "command", "n"]),
                              st.one_of(_TEXT, st.integers(-5, 5)), max_size=2)))


@st.composite
def gemini_streams(draw: st.DrawFn) -> list[JSON]:
    parts = draw(st.lists(_PART, max_size=8))
    base = {"modelVersion": "gemini-x", "responseId": "r1"}
    chunks: list[JSON] = [{"candidates": [{"content": {"role": "model", "parts": [p]},
                                           "index": 0}], **base} for p in parts]
    usage = {"promptTokenCount": draw(st.integers(0, 100)),
             "candidatesTokenCount": draw(st.integers(0, 100))}
    chunks.append({"candidates": [{"content": {"role": "model", "parts": []},
                                   "finishReason": draw(st.sampled_from(["STOP",
                                                                         "MAX_TOKENS"])),
                                   "index": 0}], "usageMetadata": usage, **base})
    return chunks


@FUZZ
@given(gemini_streams())
def test_a_valid_stream_gives_back_its_parts(events: list[JSON]) -> None:
    session = Session.create(MemoryStore())
    ingest = GeminiIngest(session)
    result = ingest.ingest(events)
    view = WithPartsProjection(session.id).apply_all(session.store.read(session.id))
    message = view.message(result.message_id)
    want: list[tuple[str, str]] = []
    calls = []
    for chunk in events:
        for part in chunk["candidates"][0]["content"]["parts"]:
            if "functionCall" in part:
                calls.append((part["functionCall"]["name"], part["functionCall"]["args"]))
                want.append(("tool", part["functionCall"]["name"]))
            elif part["text"]:
                kind = "reasoning" if part.get("thought") else "text"
                if want and want[-1][0] == kind:
                    want[-1] = (kind, want[-1][1] + part["text"])
                else:
                    want.append((kind, part["text"]))
    got = [(p.TAG, p.tool if isinstance(p, v.ToolPart) else p.text) for p in message.parts
           if isinstance(p, v.TextPart | v.ReasoningPart | v.ToolPart)]
    assert got == want
    assert [(c.name, c.input) for c in result.tool_calls] == calls


@FUZZ
@given(st.data())
def test_broken_streams_raise_typed_errors_and_settle(data: st.DataObject) -> None:
    events = data.draw(gemini_streams().flatmap(broken))
    session = Session.create(MemoryStore())
    ingest = GeminiIngest(session, coalesce_chars=data.draw(st.sampled_from([0, 4])),
                          batch=data.draw(st.sampled_from([1, 8])))
    exc = feed_all(ingest, events)
    assert_typed(exc, ingest)
    assert_consistent(session, ingest)


@FUZZ
@given(st.data())
def test_odd_values_are_kept_or_refused_typed(data: st.DataObject) -> None:
    events = data.draw(gemini_streams().flatmap(valid_with_odd_values))
    session = Session.create(MemoryStore())
    ingest = GeminiIngest(session)
    exc = feed_all(ingest, events)
    assert_typed(exc, ingest)
    assert_consistent(session, ingest)
