"""The wire format: every event type round-trips through JSON and msgpack; bad input
is an :class:`EventDecodeError` that says where it is wrong."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from engine import codec
from engine import events as ev
from engine.errors import EventDecodeError
from engine.events import EVENT_BY_TAG, EVENT_TYPES, Event, tag_of

MID = "0190a000-0000-7000-8000-000000000001"
SID = "0190a000-0000-7000-8000-000000000002"


def example_value(t: msgspec.inspect.Type, depth: int = 0) -> Any:
    """A non-default value of every field, so a round trip exercises all of them."""
    if isinstance(t, msgspec.inspect.StrType):
        return f"s{depth}"
    if isinstance(t, msgspec.inspect.BoolType):
        return True
    if isinstance(t, msgspec.inspect.IntType):
        return 7 + depth
    if isinstance(t, msgspec.inspect.FloatType):
        return 0.25
    if isinstance(t, msgspec.inspect.LiteralType):
        return t.values[-1]
    if isinstance(t, msgspec.inspect.AnyType):
        return {"nested": [1, "two", None]}
    if isinstance(t, msgspec.inspect.DictType):
        return {example_value(t.key_type, depth + 1): example_value(t.value_type, depth + 1)}
    if isinstance(t, msgspec.inspect.ListType):
        return [example_value(t.item_type, depth + 1)]
    if isinstance(t, msgspec.inspect.UnionType):
        options = [x for x in t.types if not isinstance(x, msgspec.inspect.NoneType)]
        return example_value(options[-1], depth)  # the last of a tagged union, for variety
    if isinstance(t, msgspec.inspect.StructType):
        return t.cls(**{f.name: example_value(f.type, depth + 1) for f in t.fields})
    raise TypeError(f"no example for {t!r}")


def example(cls: type[Event]) -> Event:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    fields = {f.name: example_value(f.type) for f in info.fields}
    fields.update(id="0190a000-0000-7000-8000-0000000000e1", session_id=SID, seq=42,
                  time=1_700_000_000_123, actor="agent:reviewer", v=1)
    if "message_id" in fields:
        fields["message_id"] = MID
    return cls(**fields)


EXAMPLES = [example(cls) for cls in EVENT_TYPES]
IDS = [tag_of(cls) for cls in EVENT_TYPES]


def test_catalog_is_complete_and_tags_unique() -> None:
    assert len(EVENT_TYPES) == len(EVENT_BY_TAG)  # tags are unique
    assert set(EVENT_BY_TAG.values()) == set(EVENT_TYPES)
    for tag in ("message.started", "message.completed", "tool.approval_denied",
                "tool.output_compacted", "step.finished", "compaction.added"):
        assert tag in EVENT_BY_TAG


@pytest.mark.parametrize("event", EXAMPLES, ids=IDS)
def test_json_round_trip(event: Event) -> None:
    data = codec.encode_json(event)
    obj = json.loads(data)
    assert obj["type"] == tag_of(type(event))
    assert obj["seq"] == 42
    assert obj["actor"] == "agent:reviewer"
    back = codec.decode_json(data)
    assert type(back) is type(event)
    assert back == event
    assert codec.decode_json(data.decode()) == event  # str input too


@pytest.mark.parametrize("event", EXAMPLES, ids=IDS)
def test_msgpack_round_trip(event: Event) -> None:
    data = codec.encode_msgpack(event)
    assert codec.decode_msgpack(data) == event
    buf = bytearray(b"prefix")
    codec.encode_msgpack_into(event, buf)
    assert bytes(buf[len(b"prefix"):]) == data


@pytest.mark.parametrize("event", EXAMPLES, ids=IDS)
def test_builtins_round_trip(event: Event) -> None:
    obj = codec.to_builtins(event)
    assert obj["type"] == tag_of(type(event))
    assert codec.from_builtins(obj) == event


def test_examples_fill_every_field() -> None:
    """The generator really set the optional fields (else the round trip proves little)."""
    started = example(ev.MessageStarted)
    assert isinstance(started, ev.MessageStarted)
    assert started.model is not None
    assert started.path is not None
    assert started.summary is not None
    assert started.summary.diffs
    completed = example(ev.ToolCompleted)
    assert isinstance(completed, ev.ToolCompleted)
    assert completed.attachments
    assert completed.attachments[0].source is not None


def test_lists_round_trip() -> None:
    assert codec.decode_msgpack_list(msgspec.msgpack.encode(EXAMPLES)) == EXAMPLES
    assert codec.decode_json_list(msgspec.json.encode(EXAMPLES)) == EXAMPLES


def test_defaults_are_omitted_and_restored() -> None:
    e = ev.TextDelta(message_id=MID, part_id="p", delta="hi")
    assert json.loads(codec.encode_json(e)) == {
        "type": "text.delta", "message_id": MID, "part_id": "p", "delta": "hi"}
    assert codec.decode_json(b'{"type":"text.delta","message_id":"m","part_id":"p",'
                             b'"delta":"x"}').v == 1


# --------------------------------------------------------------------------- errors


def fails(data: bytes | str) -> EventDecodeError:
    with pytest.raises(EventDecodeError) as info:
        codec.decode_json(data)
    return info.value


def test_unknown_type() -> None:
    err = fails(b'{"type": "tool.exploded", "message_id": "m"}')
    assert err.path == "$.type"
    assert "tool.exploded" in str(err)


def test_missing_type() -> None:
    err = fails(b'{"message_id": "m"}')
    assert err.path == "$.type"


def test_missing_field() -> None:
    err = fails(b'{"type": "text.delta", "message_id": "m", "part_id": "p"}')
    assert err.path == "$.delta"
    assert "delta" in str(err)


def test_missing_nested_field() -> None:
    err = fails(json.dumps({
        "type": "tool.completed", "message_id": "m", "part_id": "p", "output": "x",
        "attachments": [{"part_id": "a", "mime": "image/png"}],
    }))
    assert err.path == "$.attachments[0].url"


def test_wrong_type() -> None:
    err = fails(b'{"type": "text.delta", "message_id": "m", "part_id": "p", "delta": 5}')
    assert err.path == "$.delta"
    assert "str" in str(err)
    err = fails(json.dumps({"type": "step.finished", "message_id": "m", "part_id": "p",
                            "reason": "stop", "tokens": {"cache": {"read": "many"}}}))
    assert err.path == "$.tokens.cache.read"


def test_wrong_enum_value() -> None:
    err = fails(json.dumps({"type": "tool.failed", "message_id": "m", "part_id": "p",
                            "error": "x", "kind": "exploded"}))
    assert err.path == "$.kind"


def test_unknown_field() -> None:
    err = fails(b'{"type": "text.delta", "message_id": "m", "part_id": "p", "delta": "x",'
                b' "colour": "red"}')
    assert err.path == "$.colour"
    assert "colour" in str(err)


def test_invalid_utf8() -> None:
    err = fails(b'{"type": "text.delta", "message_id": "m", "part_id": "p", "delta": "\xff"}')
    assert "UTF-8" in str(err)
    with pytest.raises(EventDecodeError):
        codec.decode_json_list(b'[{"type": "text.delta", "message_id": "m", "part_id": "p",'
                               b' "delta": "\xff"}]')


def test_malformed_json_and_line_number() -> None:
    err = fails(b'{"type": ')
    assert err.path is None
    with pytest.raises(EventDecodeError) as info:
        codec.decode_json(b"not json", line=12)
    assert info.value.line == 12
    assert "line 12" in str(info.value)


def test_oversized_input() -> None:
    big = b'{"type": "text.delta", "message_id": "m", "part_id": "p", "delta": "' + (
        b"x" * codec.MAX_EVENT_BYTES) + b'"}'
    err = fails(big)
    assert "bytes" in str(err)


def test_msgpack_errors() -> None:
    bad = msgspec.msgpack.encode({"type": "text.delta", "message_id": "m", "part_id": "p",
                                  "delta": 5})
    with pytest.raises(EventDecodeError) as info:
        codec.decode_msgpack(bad)
    assert info.value.path == "$.delta"
    with pytest.raises(EventDecodeError):
        codec.decode_msgpack(b"\xc1")
    with pytest.raises(EventDecodeError):
        codec.decode_msgpack_list(b"\xc1")


def test_from_builtins_errors() -> None:
    with pytest.raises(EventDecodeError) as info:
        codec.from_builtins({"type": "text.delta", "message_id": "m", "part_id": "p"})
    assert info.value.path == "$.delta"
