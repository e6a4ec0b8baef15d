"""The door (issue 9): every event built in code passes the same validation as one
decoded from bytes, on every store, before anything is written.

Built from the catalog's declarations (tests/support/catalog.py), so a new event
type or field is covered without touching this file: every Literal field gets an
out-of-vocabulary value, every typed field a value of the wrong type, and the
free-form JSON fields random values no store can hold. Each refusal must be
:class:`InvalidEvent` naming the field, with the log unchanged and verifiable.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from engine import events as ev
from engine.codec import canonical, canonical_encoder
from engine.errors import DuplicateEventId, EventIdConflict, InvalidEvent, PartialDuplicate
from engine.events import EVENT_TYPES, Event
from engine.session import Session
from engine.store import Store, door, open_store
from engine.store.door import MAX_DEPTH, admit
from engine.store.verify import verify
from tests.support.catalog import (
    field_paths,
    full,
    literal_fields,
    minimal,
    typed_fields,
    with_value,
)

SID = "0190a000-0000-7000-8000-0000000d0001"
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def store(any_url: str) -> Iterator[Store]:
    s = open_store(any_url)
    s.create_session(SID, created=1)
    try:
        yield s
    finally:
        s.close()


def refused(store: Store, event: Event) -> InvalidEvent:
    """Append ``event``: it must be refused at the door with nothing written."""
    before = store.version(SID)
    with pytest.raises(InvalidEvent) as info:
        store.append(SID, [event])
    assert store.version(SID) == before
    assert [e.seq for e in store.read(SID)] == list(range(1, before + 1))
    return info.value


def assert_sound(store: Store) -> None:
    """The whole store verifies (chain, decoding, transitions): use where only legal
    sequences were accepted."""
    report = verify(store)
    assert report.ok, report.problems


# --------------------------------------------------------------------------- the catalog


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=ev.tag_of)
def test_every_event_type_round_trips_through_the_door(store: Store, cls: type[Event]) -> None:
    """The builder's events are valid (else the refusals below prove nothing)."""
    for event in (minimal(cls), full(cls)):
        (seq,) = store.append(SID, [event]).seqs
        back = next(iter(store.read(SID, seq, seq)))
        assert msgspec.structs.replace(back, seq=0, session_id="") == event


LITERALS = literal_fields()


def test_the_catalog_has_literal_fields() -> None:
    names = {(c.__name__, p) for c, p, _ in LITERALS}
    assert ("ToolFailed", ("kind",)) in names
    assert ("MessageStarted", ("role",)) in names
    assert ("TangentExited", ("tail",)) in names


@pytest.mark.parametrize(("cls", "path", "allowed"), LITERALS,
                         ids=[f"{ev.tag_of(c)}:{'.'.join(p)}" for c, p, _ in LITERALS])
@FUZZ
@given(bad=st.text(min_size=0, max_size=12))
def test_out_of_vocabulary_literals_are_refused(store: Store, cls: type[Event],
                                                path: tuple[str, ...], allowed: tuple[Any, ...],
                                                bad: str) -> None:
    if bad in allowed:
        return
    err = refused(store, with_value(full(cls), path, bad))
    assert err.event_type == ev.tag_of(cls)
    assert err.path == "$." + ".".join(path)
    assert_sound(store)


def _wrong_value(info: mi.Type) -> list[Any]:
    """Values that are not of the declared type (whatever it is)."""
    kinds = {mi.StrType: [7, b"bytes", ["list"]], mi.IntType: ["7", 1.5, True],
             mi.BoolType: [1, "true"], mi.FloatType: ["1.5", None],
             mi.ListType: ["list", 3], mi.DictType: ["dict", [1]],
             mi.LiteralType: [object()], mi.StructType: ["struct", 3]}
    if isinstance(info, mi.UnionType):
        options = [t for t in info.types if not isinstance(t, mi.NoneType)]
        return [v for v in _wrong_value(options[0]) if v is not None and not (
            isinstance(v, str) and any(isinstance(t, mi.StrType) for t in options))]
    for kind, values in kinds.items():
        if isinstance(info, kind):
            return values
    return []


TYPED = [(c, p, i) for c, p, i in typed_fields() if _wrong_value(i)]


@pytest.mark.parametrize("backend_slice", range(4))
def test_every_typed_field_refuses_a_wrong_type(any_url: str, backend_slice: int) -> None:
    """Every field of every event type, each wrong value: refused, nothing written.
    (The cases are split in four slices, so a failure names a smaller set.)"""
    store = open_store(any_url)
    store.create_session(SID, created=1)
    try:
        cases = 0
        for cls, path, info in TYPED[backend_slice::4]:
            for bad in _wrong_value(info):
                if isinstance(info, mi.FloatType) and isinstance(bad, int):
                    continue
                event = with_value(full(cls), path, bad)
                err = refused(store, event)
                assert err.path.startswith("$." + ".".join(path)), (cls, path, bad, err)
                cases += 1
        assert cases > 20
        assert_sound(store)
    finally:
        store.close()


# --------------------------------------------------------------------------- values no store holds

BIG_INTS = st.one_of(st.integers(min_value=1 << 63, max_value=1 << 200),
                     st.integers(max_value=-(1 << 63) - 1, min_value=-(1 << 200)))
SURROGATES = st.builds(lambda a, s, b: a + s + b, st.text(max_size=5),
                       st.sampled_from(["\ud800", "\udfff", "\udc80"]), st.text(max_size=5))
NON_FINITE = st.sampled_from([float("inf"), float("-inf"), float("nan")])
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=12)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


@st.composite
def poisoned(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A JSON object with one value no store can hold, and the path to it."""
    base = draw(st.dictionaries(st.text(min_size=1, max_size=5).filter(str.isalnum), JSON,
                                max_size=3))
    bad = draw(st.one_of(NON_FINITE, st.just(_deep(MAX_DEPTH + 5))))
    keys = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4))
    node: dict[str, Any] = base
    for k in keys[:-1]:
        child = node.get(k)
        if not isinstance(child, dict):
            child = node[k] = {}
        node = child
    node[keys[-1]] = bad
    return base, ".".join(keys)


FREE_FORM = [(ev.ToolInputReady, "input"), (ev.TextAdded, "metadata"),
             (ev.ToolCompleted, "metadata"), (ev.PartEnded, "metadata")]


@FUZZ
@given(case=st.sampled_from(FREE_FORM), value=poisoned())
def test_free_form_json_that_no_store_holds_is_refused(store: Store,
                                                       case: tuple[type[Event], str],
                                                       value: tuple[dict[str, Any], str]) -> None:
    cls, name = case
    obj, path = value
    err = refused(store, with_value(full(cls), (name,), obj))
    assert err.path.startswith(f"$.{name}.{path}"), (err.path, path)
    assert_sound(store)


@FUZZ
@given(case=st.sampled_from(FREE_FORM), obj=st.dictionaries(
    st.one_of(st.text(max_size=5), SURROGATES), st.one_of(JSON, BIG_INTS, SURROGATES),
    max_size=4))
def test_free_form_json_within_range_is_kept_exactly(store: Store,
                                                     case: tuple[type[Event], str],
                                                     obj: dict[str, Any]) -> None:
    cls, name = case
    event = with_value(full(cls), (name,), obj)
    (seq,) = store.append(SID, [event]).seqs
    back = next(iter(store.read(SID, seq, seq)))
    assert getattr(back, name) == obj


@pytest.mark.parametrize("time", [1 << 63, -1, 1 << 70])
def test_times_no_store_holds(store: Store, time: int) -> None:
    err = refused(store, msgspec.structs.replace(minimal(ev.TextDelta), time=time))
    assert err.path == "$.time"


def test_the_examples_of_issue_9(store: Store) -> None:
    cases = [
        (with_value(full(ev.MessageCompleted), ("tokens", "input"), 2 ** 70), "$.tokens.input"),
        (with_value(full(ev.ToolInputReady), ("input",), {"n": float("inf")}), "$.input.n"),
        (with_value(full(ev.TextDelta), ("message_id",), "half \ud83d"), "$.message_id"),
        (with_value(full(ev.ToolInputReady), ("input",), {"x": _deep(100_000)}), "$.input.x"),
        (with_value(full(ev.ToolFailed), ("kind",), "crashed"), "$.kind"),
        (with_value(full(ev.MessageStarted), ("role",), "robot"), "$.role"),
        (with_value(full(ev.TangentExited), ("tail",), "bogus"), "$.tail"),
    ]
    for event, path in cases:
        assert refused(store, event).path.startswith(path)
    assert_sound(store)
    # Issue 24: what a model can produce is held (issue 9 refused these two).
    for event in (with_value(full(ev.ToolInputReady), ("input",), {"n": 10 ** 30}),
                  with_value(full(ev.TextDelta), ("delta",), "half \ud83d")):
        (seq,) = store.append(SID, [event]).seqs
        back = next(iter(store.read(SID, seq, seq)))
        assert msgspec.structs.replace(back, seq=0, session_id="") == event


def test_deep_nesting_is_refused_without_recursion(store: Store) -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk must not recurse: a shallow stack still works
    try:
        err = refused(store, with_value(full(ev.ToolInputReady), ("input",),
                                        {"x": _deep(50_000)}))
    finally:
        sys.setrecursionlimit(limit)
    assert "nested deeper" in err.reason


def test_a_tuple_for_a_list_is_the_same_array() -> None:
    event = with_value(full(ev.HistoryCompacted), ("summary",), "s")
    assert admit(event) == admit(event)


# --------------------------------------------------------------------------- through the Session


def test_session_commands_with_bad_values_change_nothing(any_url: str) -> None:
    store = open_store(any_url)
    try:
        s = Session.create(store)
        m = s.start_message("assistant")
        ref = s.add_tool(m, "c1", "bash")
        s.tool_input_ready(ref, {"a": 1})
        s.start_tool(ref)
        version = s.version
        with pytest.raises(InvalidEvent, match=r"\$\.kind"):
            s.fail_tool(ref, "boom", kind="crashed")  # type: ignore[arg-type]
        with pytest.raises(InvalidEvent, match=r"\$\.role"):
            s.start_message("robot")  # type: ignore[arg-type]
        with pytest.raises(InvalidEvent, match=r"\$\.metadata\.n"):
            s.tool_progress(ref, metadata={"n": float("nan")})
        assert s.version == store.version(s.id) == version
        s.fail_tool(ref, "boom", kind="error")  # the session is still usable
        assert s.version == version + 1
        assert_sound(store)
    finally:
        store.close()


# --------------------------------------------------------------------------- retry or conflict


@FUZZ
@given(cls=st.sampled_from(EVENT_TYPES), data=st.data())
def test_same_id_is_a_retry_or_a_conflict(store: Store, cls: type[Event],
                                          data: st.DataObject) -> None:
    event = msgspec.structs.replace(full(cls), time=5, actor="user")  # a fresh id each time
    first = store.append(SID, [event])
    version = store.version(SID)
    # A retry: the same event, or with the envelope fields the log fills left empty.
    again = msgspec.structs.replace(event, time=data.draw(st.sampled_from([0, 5])),
                                    actor=data.draw(st.sampled_from(["", "user"])))
    retried = store.append(SID, [again])
    assert (retried.seqs, retried.positions, retried.retried) == (
        first.seqs, first.positions, True)
    assert retried.present == 1
    # A change of any field the writer sets: a conflict naming where the id is stored.
    field = data.draw(st.sampled_from(["time", "actor", *[
        p[0] for c, p, _ in typed_fields() if c is cls and len(p) == 1
        and p[0] not in ("time", "actor")]]))
    current = getattr(event, field)
    changed = {"time": 6, "actor": "assistant"}.get(field)
    if changed is None:
        options = [v for v in (full(cls), minimal(cls)) if getattr(v, field) != current]
        if not options:
            return
        changed = getattr(options[0], field)
    with pytest.raises(EventIdConflict) as info:
        store.append(SID, [msgspec.structs.replace(event, **{field: changed})])
    assert isinstance(info.value, DuplicateEventId)
    assert (info.value.event_id, info.value.session_id, info.value.seq) == (
        event.id, SID, first.seqs[0])
    assert f"session {SID} seq {first.seqs[0]}" in str(info.value)
    assert store.version(SID) == version


def test_conflict_inside_a_partial_batch_is_named(store: Store) -> None:
    a = msgspec.structs.replace(minimal(ev.TextDelta), id="0190a000-0000-7000-8000-0000000d00aa")
    b = msgspec.structs.replace(a, id="0190a000-0000-7000-8000-0000000d00bb")
    store.append(SID, [a])
    with pytest.raises(EventIdConflict):
        store.append(SID, [msgspec.structs.replace(a, delta="other"), b])
    with pytest.raises(PartialDuplicate):
        store.append(SID, [a, b])
    assert store.version(SID) == 1


def test_session_append_reports_retries_and_refuses_conflicts(any_url: str) -> None:
    store = open_store(any_url)
    try:
        s = Session.create(store)
        mid = "0190a000-0000-7000-8000-0000000d00cc"
        started = ev.MessageStarted(id="0190a000-0000-7000-8000-0000000d00cd", message_id=mid,
                                    role="user")
        text = ev.TextAdded(id="0190a000-0000-7000-8000-0000000d00ce", message_id=mid,
                            part_id="prt_a", text="hi")
        assert s.append([started]) == [1]
        assert s.append([started, text]) == [1, 2]  # the stored one is a no-op
        with pytest.raises(EventIdConflict) as info:
            s.append([msgspec.structs.replace(text, text="bye")])
        assert info.value.batch_index == 1
        # An importer re-reading a grown source keeps what it stored under the id.
        assert s.append([msgspec.structs.replace(text, text="bye")], keep_stored=True) == [2]
        assert list(store.read(s.id, 2, 2)) == [msgspec.structs.replace(
            text, seq=2, session_id=s.id, time=next(iter(store.read(s.id, 2, 2))).time,
            actor=next(iter(store.read(s.id, 2, 2))).actor)]
        closing = ev.PartEnded(message_id=mid, part_id="prt_a")
        bad = ev.PartEnded(message_id=mid, part_id="prt_a", metadata={"n": float("inf")})
        delta = ev.TextDelta(message_id=mid, part_id="prt_a", delta="x")
        with pytest.raises(InvalidEvent) as refusal:  # raw events pass the same door
            s.append([delta, bad])
        assert (refusal.value.batch_index, refusal.value.path) == (2, "$.metadata.n")
        assert s.version == store.version(s.id) == 2
        assert s.append([closing]) == [3]  # still usable
        assert_sound(store)
    finally:
        store.close()


# ----------------------------------------------------------------------- the deltas' short proof

class _Str(str):
    pass


class _Int(int):
    pass


# Anything a writer could put in a str or int field: right and wrong types, edges of the
# 64-bit range, lone surrogates, subclasses.
ANY_VALUE = st.one_of(
    st.text(max_size=6), SURROGATES, st.builds(_Str, st.text(max_size=3)),
    st.integers(-(1 << 64), 1 << 64), BIG_INTS, st.sampled_from([0, -1, (1 << 63) - 1, 1 << 63]),
    st.builds(_Int, st.integers(-5, 5)), st.booleans(), st.none(),
    st.floats(allow_nan=True), st.binary(max_size=3), st.lists(st.integers(), max_size=2))
# What a writer could put in a JSON object field: strings only (the short proof's case),
# and the same with a key or value of another type, a subclass, a surrogate, nesting.
_KEYS = st.one_of(st.text(max_size=3), st.builds(_Str, st.text(max_size=2)), SURROGATES,
                  st.integers(-2, 2))
ANY_OBJECT = st.one_of(
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=3),
    st.dictionaries(_KEYS, ANY_VALUE, max_size=3),
    st.dictionaries(st.text(max_size=2), st.dictionaries(st.text(max_size=2), ANY_VALUE,
                                                         max_size=2), max_size=2),
    st.builds(dict), st.none())


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


# Free-form JSON around the depth bound, and the number shapes it may hold.
DEEP_JSON = st.builds(lambda d, top: {"a": _nested(d)} if top else _nested(d),
                      st.integers(MAX_DEPTH - 4, MAX_DEPTH + 2), st.booleans())
JSON_NUMBERS = st.dictionaries(st.text(max_size=2), st.one_of(
    st.floats(), st.integers(-(1 << 64), 1 << 64), st.tuples(st.integers(-3, 3)),
    st.lists(st.floats(allow_nan=False), max_size=2)), max_size=3)


@settings(max_examples=1000, deadline=None)
@given(cls=st.sampled_from(sorted(door._FAST, key=lambda c: c.__name__)), data=st.data())
def test_the_short_proof_accepts_only_what_the_full_proof_accepts(
        cls: type[Event], data: st.DataObject) -> None:
    """The short proof (every field exactly its declared type, in range, nested structs
    of exactly their class, free-form objects of exact JSON values within the depth
    bound) skips the decode: whenever it says yes, the full proof says yes, with
    the same bytes; and an event the short proof turns down still gets the full
    verdict (the door never refuses on the short proof alone). Values are put at
    any field path, nested structs' fields included."""
    event = data.draw(st.sampled_from([minimal, full]))(cls)
    paths = [path for path, _ in field_paths(cls)] + [(name,) for name in ("seq", "v", "id")]
    for path in data.draw(st.lists(st.sampled_from(paths), max_size=3)):
        value = data.draw(st.one_of(ANY_VALUE, ANY_OBJECT, DEEP_JSON, JSON_NUMBERS))
        try:
            event = with_value(event, path, value)
        except (AttributeError, TypeError):
            continue  # a field of a struct an earlier draw replaced
    _same_verdict(cls, event)


def _same_verdict(cls: type[Event], event: Event) -> None:
    """Whenever the short proof says yes, the full proof admits the same bytes; the
    door's verdict is the full proof's."""
    try:
        data_bytes = canonical(event)
    except (OverflowError, UnicodeEncodeError, TypeError, ValueError):
        with pytest.raises(InvalidEvent):
            admit(event)
        return
    try:  # the short proof is taken only for events msgpack writes without extensions
        canonical_encoder.encode(event)
        plain = True
    except (OverflowError, UnicodeEncodeError):
        plain = False
    try:
        full_verdict: bytes | str = door._admit_decoded(event, data_bytes)
    except InvalidEvent as exc:
        full_verdict = exc.path
    if plain and door._FAST[cls](event):
        assert full_verdict == data_bytes
    verdict: bytes | str
    try:
        verdict = admit(event)
    except InvalidEvent as exc:
        verdict = exc.path
    assert verdict == full_verdict


# Values at the edge of each proof: non-finite and big numbers, a negative time, a
# subclass, a tuple, a Literal's near miss, free-form JSON at the depth bound and past it.
EDGE_VALUES: list[Any] = [
    float("nan"), float("inf"), 1.5, 0, -1, (1 << 63) - 1, 1 << 63, -(1 << 63) - 1, True,
    _Str("s"), _Int(1), "s", "aborted", None, (1, 2), [1.5], {"k": float("inf")},
    {"k": (1, [2.5, None])}, {"k": 1 << 64}, _nested(MAX_DEPTH - 2), _nested(MAX_DEPTH - 1),
    _nested(MAX_DEPTH), {"k": _nested(MAX_DEPTH - 3)}, {"k": _nested(MAX_DEPTH - 2)}, [{}],
    {1: "x"}, {"k": True}]


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=ev.tag_of)
def test_the_short_proof_and_the_full_proof_agree_at_every_field_on_edge_values(
        cls: type[Event]) -> None:
    """Each edge value at each field path of each event type (nested structs' fields
    included, the envelope's too): the two proofs give the same verdict."""
    paths = [path for path, _ in field_paths(cls)] + [(name,) for name in ("seq", "v", "id")]
    for path in paths:
        for value in EDGE_VALUES:
            _same_verdict(cls, with_value(full(cls), path, value))


def test_the_short_proof_covers_every_event_type() -> None:
    """Every catalog type takes the short proof when its values are exactly their
    declared types (the deltas most of all; an import's tool results, messages with a
    model and tokens, files): its vocabulary is unconstrained str, int, finite
    float, bool, string Literals, JSON objects, dicts and lists of those, nested
    structs and unions of those with None. A type outside it would take the full
    proof for every event."""
    assert set(door._FAST) == set(EVENT_TYPES)
    scalars = (mi.StrType, mi.IntType, mi.BoolType, mi.FloatType)

    def covered(t: mi.Type) -> bool:
        if isinstance(t, mi.UnionType):
            return all(isinstance(u, mi.NoneType) or covered(u) for u in t.types)
        if isinstance(t, mi.DictType):
            return isinstance(t.key_type, mi.StrType) and (
                isinstance(t.value_type, mi.AnyType) or covered(t.value_type))
        if isinstance(t, mi.ListType):
            return covered(t.item_type)
        if isinstance(t, mi.StructType):
            return all(covered(f.type) for f in t.fields)
        if isinstance(t, mi.LiteralType):
            return all(isinstance(v, str) for v in t.values)
        return type(t) in scalars

    for cls in door._FAST:
        for field in mi.type_info(cls).fields:  # type: ignore[attr-defined]
            assert covered(field.type), (cls, field.name)


@FUZZ
@given(keys=st.lists(st.text(max_size=300), min_size=1, max_size=400),
       bad=st.sampled_from([float("-inf"), float("nan")]))
def test_a_refusal_is_one_short_line_whatever_the_path(store: Store, keys: list[str],
                                                       bad: object) -> None:
    # Keys are the caller's data: newlines, control characters, 300-character names,
    # 400 levels. The message is one line a terminal can show; the path stays whole.
    value: object = bad
    for key in reversed(keys):
        value = {key: value}
    err = refused(store, with_value(full(ev.ToolInputReady), ("input",), value))
    line = str(err)
    assert line.isprintable(), line
    assert len(line) <= 400, line
    assert err.path.count(".") >= len(keys)  # $.input and one step per key at least
    assert_sound(store)
