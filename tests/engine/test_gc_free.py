"""The write side's per-event and per-part objects stay out of the garbage collector's
reach (``gc=False``), and no reference cycle can pass through them (an untracked
object in a cycle would leak the cycle)."""

from __future__ import annotations

import gc
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from engine import events as ev
from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.ingest import Block
from engine.errors import InvalidEvent
from engine.events import EVENT_TYPES, tag_of
from engine.messages import PartLife
from engine.session import Session, StepClock
from engine.store import MemoryStore
from engine.store.door import admit
from tests.support.catalog import full, minimal

# The field types a value of JSON data can have: nothing here can hold an event, a
# PartLife or a Block, so a decoded event is a tree.
_JSON_TYPES = (mi.StrType, mi.IntType, mi.FloatType, mi.BoolType, mi.NoneType, mi.AnyType,
               mi.LiteralType, mi.ListType, mi.DictType, mi.UnionType, mi.StructType)


def _json_shaped(t: mi.Type, seen: set[type]) -> bool:
    if not isinstance(t, _JSON_TYPES):
        return False
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return True
        seen.add(t.cls)
        return all(_json_shaped(f.type, seen) for f in t.fields)
    inner = [getattr(t, n) for n in ("item_type", "key_type", "value_type") if hasattr(t, n)]
    inner += list(getattr(t, "types", ()))
    return all(_json_shaped(i, seen) for i in inner)


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=tag_of)
def test_events_are_untracked_and_hold_json_data_only(cls: type[ev.Event]) -> None:
    assert _json_shaped(mi.type_info(cls), set()), cls
    for event in (minimal(cls), full(cls)):
        assert not gc.is_tracked(event)


def test_an_event_that_loops_back_on_itself_is_refused_at_the_door() -> None:
    """The one way to put a cycle through an untracked event is a dict inside it that
    refers back; the door refuses it, so no stored event holds one."""
    inner: dict[str, Any] = {}
    event = ev.ToolAdded(message_id="m", part_id="p", call_id="c", tool="t", input=inner)
    inner["self"] = event
    with pytest.raises(InvalidEvent):
        admit(event)
    looped: dict[str, Any] = {}
    looped["again"] = looped
    with pytest.raises(InvalidEvent):
        admit(msgspec.structs.replace(event, input=looped))
    inner.clear()  # break the cycle this test built (it would leak otherwise)


def test_partlife_and_block_fields_cannot_refer_back() -> None:
    """PartLife holds strs, an int and an accepted event; Block holds strs, flags, lists
    of str and provider JSON: no field can hold a PartLife or a Block."""
    assert PartLife.__struct_config__.gc is False
    assert Block.__struct_config__.gc is False
    life = mi.type_info(PartLife)
    assert _json_shaped(life, set())  # strs, an int, and an event (JSON data)
    entered = {f.name: f.type for f in life.fields}["entered"]  # type: ignore[attr-defined]
    assert isinstance(entered, mi.StructType)
    assert entered.cls is ev.Event
    block = mi.type_info(Block)
    assert _json_shaped(block, set())  # strs, bools, ints, lists of str, JSON objects


@settings(max_examples=30, deadline=None)
@given(blocks=st.lists(st.sampled_from(["text", "tool"]), min_size=1, max_size=6))
def test_a_streamed_message_leaves_no_cycle_behind(blocks: list[str]) -> None:
    """After a whole ingest, dropping the session frees everything: nothing untracked
    keeps a cycle alive (a collection finds no garbage the run left)."""
    gc.collect()
    store = MemoryStore()
    session = Session.create(store, clock=StepClock())
    stream: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg", "model": "m", "usage": {"input_tokens": 1}}}]
    for i, kind in enumerate(blocks):
        start: dict[str, Any] = ({"type": "text", "text": ""} if kind == "text" else
                                 {"type": "tool_use", "id": f"t{i}", "name": "x", "input": {}})
        delta: dict[str, Any] = ({"type": "text_delta", "text": "hi"} if kind == "text" else
                                 {"type": "input_json_delta", "partial_json": '{"a": "b"}'})
        stream += [{"type": "content_block_start", "index": i, "content_block": start},
                   {"type": "content_block_delta", "index": i, "delta": delta},
                   {"type": "content_block_stop", "index": i}]
    stream += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
               {"type": "message_stop"}]
    AnthropicIngest(session, batch=4).ingest(stream)
    assert session.version > 0
    del session, store
    assert gc.collect() == 0


def test_the_memory_store_keeps_its_per_event_index_and_hashes_out_of_the_collector() -> None:
    """The id index (event id -> position) and the chain hashes hold one entry per
    stored event: neither is a container the collector tracks, so a full collection
    never walks them (a str-subclass key once made the index a tracked dict, and a
    list of bytes per hash was another tracked container of one entry per event)."""
    store = MemoryStore()
    session = Session.create(store, clock=StepClock())
    mid = session.start_message("assistant")
    ref = session.add_text(mid)
    for k in range(50):
        session.text_delta(ref, f"d{k}")
    gc.collect()
    recorder = store.recorder
    assert not gc.is_tracked(recorder._ids)
    own = recorder._own[session.id]
    assert not gc.is_tracked(own.hashes)
    assert len(own.hashes) == 16 * len(own.events)
    # ... and what they hold still answers: each event is found, its hash read back.
    stored = list(store.reader.stored(session.id))
    assert [s.seq for s in stored] == [e.seq for e in own.events]
    assert store.find_event(own.events[-1].id) is not None
    assert store.find_event("\0") is None


def test_a_client_tool_blocks_provider_data_is_not_tracked_once_parsed() -> None:
    """A tool block's ``data`` (call id, name, flags) holds no dict: its parsed input
    lives in ``Block.input``, so the collector stops tracking ``data`` (one dict per
    tool call of a stream, walked by every full collection while it was tracked)."""
    session = Session.create(MemoryStore(), clock=StepClock())
    ing = AnthropicIngest(session, batch=8)
    stream: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg", "model": "m", "usage": {"input_tokens": 1}}}]
    for i in range(3):
        stream += [{"type": "content_block_start", "index": i, "content_block": {
                       "type": "tool_use", "id": f"t{i}", "name": "read", "input": {}}},
                   {"type": "content_block_delta", "index": i, "delta": {
                       "type": "input_json_delta", "partial_json": '{"path": "a.py"}'}},
                   {"type": "content_block_stop", "index": i}]
    stream += [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
               {"type": "message_stop"}]
    result = ing.ingest(stream)
    gc.collect()
    assert [c.input for c in result.tool_calls] == [{"path": "a.py"}] * 3
    assert all(not gc.is_tracked(b.data) for b in ing._tools)


def _tool_stream(calls: int) -> list[dict[str, Any]]:
    stream: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg", "model": "m", "usage": {"input_tokens": 1}}}]
    for i in range(calls):
        stream += [{"type": "content_block_start", "index": i, "content_block": {
                       "type": "tool_use", "id": f"t{i}", "name": "read", "input": {}}},
                   {"type": "content_block_delta", "index": i, "delta": {
                       "type": "input_json_delta", "partial_json": '{"path": '}},
                   {"type": "content_block_delta", "index": i, "delta": {
                       "type": "input_json_delta", "partial_json": '"a.py"}'}},
                   {"type": "content_block_stop", "index": i}]
    return [*stream, {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
            {"type": "message_stop"}]


def _lists_after_ingest(calls: int) -> int:
    """Lists the collector tracks, grown by an ingest of ``calls`` tool calls whose
    adapter (and session) is still alive: what every full collection then walks."""
    stream = _tool_stream(calls)
    gc.collect()
    before = sum(o.__class__ is list for o in gc.get_objects())
    ing = AnthropicIngest(Session.create(MemoryStore(), clock=StepClock()), batch=16)
    ing.ingest(stream)
    gc.collect()
    grown = sum(o.__class__ is list for o in gc.get_objects()) - before
    del ing
    return grown


def test_a_closed_tool_call_keeps_no_list_of_fragments() -> None:
    """While the message waits for its tools the adapter stays alive: it kept a list of
    argument fragments per call (one tracked container per call of a tool-heavy
    stream, walked by every full collection). A closed call keeps its text joined in
    a str: the tracked lists no longer grow with the number of calls."""
    few, many = _lists_after_ingest(4), _lists_after_ingest(64)
    assert many - few < 16, (few, many)
    session = Session.create(MemoryStore(), clock=StepClock())
    result = AnthropicIngest(session, batch=16).ingest(_tool_stream(5))
    assert [(c.call_id, c.input) for c in result.tool_calls] == [
        (f"t{i}", {"path": "a.py"}) for i in range(5)]
