"""The ingest hot path records exactly what the general path records.

Fast: ``AnthropicIngest.ingest`` (its loop inlines ``feed``), deltas queued directly,
``Lifecycle.apply_batch`` deciding deltas inline, ``Session.record`` stamping
inline, the door's short proof (in the adapter's pre-check and at the store).
General: ``feed`` per event then ``finish``, ``_text``/``_fragment``, ``apply`` per
event, ``_stamp`` per event, the full proof for every event. On random valid and
damaged streams, cut or cancelled at any point, at any batch size: the same events
in the same order (ids renamed by first appearance) and the same error type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from unittest import mock

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.ingest import ToolCall
from engine.events import Event
from engine.lifecycle import Lifecycle
from engine.session import Session, StepClock
from engine.store import MemoryStore, door
from tests.adapters.test_ingest_fuzz import broken, valid_with_odd_values
from tests.support.anthropic_streams import anthropic_streams

JSON = dict[str, Any]


class _GeneralLifecycle(Lifecycle):
    def apply(self, e: Event) -> bool:  # an override: apply_batch calls it for every event
        return super().apply(e)


class _GeneralSession(Session):
    def record(self, events: Sequence[Event]) -> list[Event]:
        """Session.record as it stamped before the inline loop: _stamp per event."""
        now = self._clock()
        version = self._lc.version
        return self._commit([self._stamp(e, seq=version + i, now=now)
                             for i, e in enumerate(events, start=1)])


def _run(events: list[JSON], batch: int, cancel_at: int | None, *, fast: bool
         ) -> tuple[list[Any], str | None]:
    store = MemoryStore()
    clock = StepClock()
    if fast:
        session = Session.create(store, "018f0000-0000-7000-8000-000000000001", clock=clock)
    else:
        info = store.create_session("018f0000-0000-7000-8000-000000000001",
                                    created=clock())
        session = _GeneralSession(store, info, _GeneralLifecycle(info.id), clock)
    ing = AnthropicIngest(session, batch=batch)
    error: str | None = None
    try:
        if cancel_at is not None:  # a cancel from outside after some events
            for e in events[:cancel_at]:
                ing.feed(e)
            ing.fail("cancelled by the client")
        elif fast:
            ing.ingest(events)
        else:
            ing.direct_deltas = False
            for e in events:
                ing.feed(e)
            ing.finish()
    except Exception as exc:
        error = type(exc).__name__
    # The tool calls of the result (built as each input is parsed) are those of the
    # client tool blocks not cut short, in start order, as the blocks hold them now.
    assert ing.result().tool_calls == tuple(
        ToolCall(b.ref, b.data["call_id"], b.data["name"], b.input if b.input is not None
                 else {})
        for b in ing._tools if not b.data.get("server") and "cut" not in b.data)
    return _normalized(list(store.read(session.id))), error


def _normalized(log: list[Event]) -> list[Any]:
    """The log as builtins without the event ids, message and part ids renamed in order
    of first appearance (they are random)."""
    names: dict[str, str] = {}
    out = []
    for e in log:
        for key in ("message_id", "part_id"):
            value = getattr(e, key, None)
            if isinstance(value, str) and value not in names:
                names[value] = f"{key}-{len(names)}"
        out.append(_rename({k: v for k, v in msgspec.to_builtins(e).items() if k != "id"},
                           names))
    return out


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):  # (an event id may be named in an error message)
        return _UUID.sub("<id>", names.get(value, value))
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_fast_path_records_what_the_general_path_records(data: st.DataObject) -> None:
    stream = data.draw(anthropic_streams(max_blocks=5))
    how = data.draw(st.sampled_from(["valid", "odd values", "damaged", "cancelled"]))
    if how == "odd values":
        stream = data.draw(valid_with_odd_values(stream))
    elif how == "damaged":
        stream = data.draw(broken(stream))
    cancel_at = (data.draw(st.integers(0, len(stream))) if how == "cancelled" else None)
    batch = data.draw(st.sampled_from([1, 2, 3, 64]))
    fast = _run(stream, batch, cancel_at, fast=True)
    with mock.patch.dict(door._FAST, clear=True):  # the full proof for every event
        general = _run(stream, batch, cancel_at, fast=False)
    assert fast == general
    if how in ("valid", "odd values"):
        assert fast[0], "a whole stream records at least its start"


# Block starts as the inline paths see them: plain ones (taken inline) and their near
# misses (non-ASCII or lone-surrogate strings, a wrong type, an input, an extra field,
# citations), which _block_start decides.
_TEXT_STARTS = st.sampled_from(["", "ab", "é", "\ud800", None, 5])
_IDS = st.sampled_from(["toolu_{}", "toolu_{}", "", "tóolu_{}", "\ud800{}", 7])
_NAMES = st.sampled_from(["read", "read", "", "é", None, ["x"]])
_INPUTS: st.SearchStrategy[Any] = st.sampled_from([{}, {}, None, [], {"a": "b"}, {"n": 10**30}])


@st.composite
def _short_block(draw: st.DrawFn, index: int) -> list[JSON]:
    """One short block's events at ``index``: text, tool call or thinking (signed)."""
    kind = draw(st.sampled_from(["text", "text", "tool", "tool", "thinking"]))
    out: list[JSON] = []

    def delta(d: JSON) -> None:
        out.append({"type": "content_block_delta", "index": index, "delta": d})

    if kind == "text":
        block: JSON = {"type": "text", "text": draw(_TEXT_STARTS)}
        if draw(st.integers(0, 5)) == 0:
            block["citations"] = None
        out.append({"type": "content_block_start", "index": index, "content_block": block})
        for piece in draw(st.lists(st.sampled_from(["ab", "日本", "", "\ud800"]),
                                   max_size=3)):
            delta({"type": "text_delta", "text": piece})
    elif kind == "tool":
        call = draw(_IDS)
        block = {"type": "tool_use", "id": call.format(index) if isinstance(call, str)
                 else call, "name": draw(_NAMES), "input": draw(_INPUTS)}
        if draw(st.integers(0, 5)) == 0:
            block["caller"] = {"type": "direct"}
        if draw(st.integers(0, 5)) == 0:
            del block["input"]
        out.append({"type": "content_block_start", "index": index, "content_block": block})
        raw = draw(st.sampled_from(['{"path": "a.py"}', "", '{"a": [1, 2]}', '{"cut": "',
                                    "[1]"]))
        for piece in ([raw[i:i + 4] for i in range(0, len(raw), 4)] if raw else []):
            delta({"type": "input_json_delta", "partial_json": piece})
    else:
        out.append({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        delta({"type": "thinking_delta", "thinking": draw(st.sampled_from(["hm", "é", ""]))})
        for sig in draw(st.lists(st.sampled_from(["c2ln", "Zz=="]), max_size=2)):
            delta({"type": "signature_delta", "signature": sig})
    out.append({"type": "content_block_stop", "index": index})
    return out


@st.composite
def _interleaved_short_blocks(draw: st.DrawFn) -> list[JSON]:
    """A stream of short blocks whose events interleave (each block's own order kept),
    sometimes with a provider error in the middle, sometimes cut by a token limit."""
    blocks = [draw(_short_block(i)) for i in range(draw(st.integers(1, 6)))]
    merged: list[JSON] = []
    while any(blocks):
        merged.append(draw(st.sampled_from([b for b in blocks if b])).pop(0))
    if draw(st.integers(0, 3)) == 0:
        merged.insert(draw(st.integers(0, len(merged))), {
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    reason = draw(st.sampled_from(["tool_use", "end_turn", "max_tokens"]))
    return [{"type": "message_start", "message": {
        "id": "msg_short", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1}}},
        *merged,
        {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"}]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_short_blocks_inline_record_what_the_general_path_records(data: st.DataObject
                                                                  ) -> None:
    """The inline block starts and ends (text without citations, plain tool calls)
    against _block_start/_close, the lifecycle's inline part steps against the full
    check, on interleaved short blocks with near-miss values, provider errors, token
    limits, damage and cancels at any point, at any batch size."""
    stream = data.draw(_interleaved_short_blocks())
    how = data.draw(st.sampled_from(["as drawn", "damaged", "cancelled"]))
    if how == "damaged":
        stream = data.draw(broken(stream))
    cancel_at = (data.draw(st.integers(0, len(stream))) if how == "cancelled" else None)
    batch = data.draw(st.sampled_from([1, 2, 3, 64]))
    fast = _run(stream, batch, cancel_at, fast=True)
    with mock.patch.dict(door._FAST, clear=True):
        general = _run(stream, batch, cancel_at, fast=False)
    assert fast == general
