"""Any JSON value a model can produce is held: integers of any size and strings with
lone surrogates, written through every door and read back identical from every store
(memory, SQLite, JSONL, PostgreSQL), before and after sealing, after reopening, by
verify, and through the public JSON (export, ``convlog tail``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import codec
from engine import events as ev
from engine.errors import InvalidEvent
from engine.store import Store, open_store
from engine.store.door import admit
from engine.store.verify import verify

SID = "0190a000-0000-7000-8000-00000000e000"
MID = "0190a000-0000-7000-8000-00000000e001"

# Values no msgpack encoder writes natively, and their neighbours that it does.
BIG = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**40),
       int("9" * 400)]
LONE = ["\ud800", "\udfff", "a\ud83d", "\ude00b", "\ud83d\ude00", "x\udc00y\ud800"]


JSON_LONE = [s for s in LONE if s != "\ud83d\ude00"]


def awkward_input(lone: list[str]) -> dict[str, Any]:
    return {"n": BIG, "s": lone, "\ud800key": {"deep": [{"v": 2**70, "t": "\udc01"}]},
            "plain": "é", "f": 1.5}


def payload(i: int, lone: list[str] = LONE) -> list[ev.Event]:
    """A message's worth of events holding the awkward values in every free place."""
    pid = f"prt_{i:04d}"
    return [
        ev.TextDelta(message_id=MID, part_id="prt_text", delta=lone[i % len(lone)]),
        ev.ReasoningDelta(message_id=MID, part_id="prt_reason", delta="\udbff"),
        ev.ToolAdded(message_id=MID, part_id=pid, call_id=f"c\ud800{i}", tool="t",
                     input={"id": BIG[i % len(BIG)]}),
        ev.ToolInputDelta(message_id=MID, part_id=pid, fragment='{"n": 1' + "0" * 30),
        ev.ToolInputReady(message_id=MID, part_id=pid, input=awkward_input(lone)),
        ev.ToolStarted(message_id=MID, part_id=pid, actor="tool"),
        ev.ToolCompleted(message_id=MID, part_id=pid, output="out\udc00",
                         metadata={"big": 2**65 + i, "s": "\ud800"}),
    ]


def stored(store: Store, count: int) -> list[ev.Event]:
    events: list[ev.Event] = [
        ev.MessageStarted(message_id=MID, role="assistant"),
        ev.TextAdded(message_id=MID, part_id="prt_text"),
        ev.ReasoningAdded(message_id=MID, part_id="prt_reason")]
    for i in range(count):
        events.extend(payload(i))
    for seq, e in enumerate(events, 1):
        events[seq - 1] = e.__class__(**{  # stamp as the store will
            **{f: getattr(e, f) for f in e.__struct_fields__},
            "id": f"0190a000-0000-7000-8000-{seq:012x}", "session_id": SID, "seq": seq,
            "time": 1_700_000_000_000 + seq, "actor": e.actor or "assistant"})
    store.create_session(SID, created=1_700_000_000_000)
    for at in range(0, len(events), 37):
        store.append(SID, events[at:at + 37], at)
    return events


@pytest.mark.parametrize("count", [3, 60])  # 60 messages: past SEAL_AT, sealed blocks
def test_every_store_reads_back_the_same_values(any_url: str, count: int) -> None:
    store = open_store(any_url)
    try:
        events = stored(store, count)
        assert list(store.read(SID)) == events
        assert [r.event for r in store.read_all(session_id=SID)] == events
        assert verify(store, SID).ok
    finally:
        store.close()
    if any_url.startswith("memory"):
        return
    again = open_store(any_url)
    try:  # what the file holds, read by a fresh process's store
        assert list(again.read(SID)) == events
        report = verify(again, SID)
        assert report.ok, report
    finally:
        again.close()


def test_public_json_round_trips() -> None:
    """Public JSON (export, ``convlog tail``, the viewer) writes each lone surrogate as
    its escape. Two halves of a pair side by side in one str have no JSON of their
    own (JSON reads them as the character): the stores keep them exactly."""
    pair = ev.TextDelta(message_id=MID, part_id="p", delta="\ud83d\ude00")
    back = codec.decode_json(codec.encode_json(pair))
    assert isinstance(back, ev.TextDelta)
    assert back.delta == "\U0001f600"
    for e in payload(1, JSON_LONE):
        text = codec.encode_json(e)
        text.decode("utf-8")  # valid UTF-8: each lone surrogate is its escape
        assert codec.decode_json(text) == e
    both = payload(2, JSON_LONE)
    assert codec.decode_json_list(b"[" + b",".join(map(codec.encode_json, both)) + b"]") == both


def test_bytes_of_ordinary_events_are_unchanged() -> None:
    """The extensions appear only where msgpack fails: every other event keeps the
    bytes (hence the chain links) it always had."""
    e = ev.ToolInputReady(message_id=MID, part_id="p", input={"n": 2**63, "s": "é"})
    assert codec.canonical(e) == codec.canonical_encoder.encode(e)
    assert codec.encode_msgpack(e) == codec._mp_enc.encode(e)


def test_typed_integers_and_ids_stay_bounded() -> None:
    for e in [ev.StepFinished(message_id=MID, part_id="p", reason="stop",
                              tokens=ev.Tokens(input=2**63)),
              ev.TextDelta(message_id=MID + "\ud800", part_id="p", delta="x"),
              ev.TextDelta(message_id=MID, part_id="p", delta="x", time=2**64)]:
        with pytest.raises(InvalidEvent):
            admit(e)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**62, max_value=2**70)
    | st.integers(max_value=-(2**62), min_value=-(2**70)) | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010)), inner,
        max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(st.text(), json_values, max_size=4),
       delta=st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010)))
def test_codec_round_trips_any_json(value: dict[str, Any], delta: str) -> None:
    e = ev.ToolInputReady(message_id=MID, part_id="p", input=value)
    d = ev.TextDelta(message_id=MID, part_id="p", delta=delta or "x")
    for one in (e, d):
        data = admit(one)
        assert codec.decode_msgpack(data) == one
        assert codec.decode_msgpack(codec.encode_msgpack(one)) == one
        assert codec.canonical(codec.decode_msgpack(data)) == data


@pytest.fixture
def memory_store() -> Iterator[Store]:
    s = open_store("memory://")
    yield s
    s.close()
