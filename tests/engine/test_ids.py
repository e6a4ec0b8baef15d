"""Identifiers: event UUIDv7s and the store's id alphabet."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from engine.errors import InvalidId
from engine.ids import EventIds, is_uuid, part_id, uuid7
from engine.store.base import _ID_OK, MAX_ID_LENGTH, check_id

MS = 1_700_000_000_000


@given(st.lists(st.integers(0, 3), min_size=1, max_size=9000))
def test_event_ids_are_valid_increasing_uuid7s(steps: list[int]) -> None:
    ids, now, times = EventIds(), MS, []
    out = []
    for step in steps:  # many ids in one millisecond borrow the next one
        now += step
        times.append(now)
        out.append(ids(now))
    assert out == sorted(out)
    assert len(set(out)) == len(out)
    for text, t in zip(out, times, strict=True):
        u = uuid.UUID(text)
        assert str(u) == text
        assert is_uuid(text)
        assert (u.version, u.variant) == (7, uuid.RFC_4122)
        assert (u.int >> 80) >= t  # never earlier than the clock said


def test_event_ids_carry_the_random_bits_across_a_wrap() -> None:
    ids = EventIds()
    ids._lo = (1 << 48) - 2  # about to wrap
    a, b, c = ids(MS), ids(MS), ids(MS)
    assert a < b < c
    assert [uuid.UUID(x).variant for x in (a, b, c)] == [uuid.RFC_4122] * 3


def test_uuid7_and_part_ids_sort_by_time() -> None:
    assert uuid7(MS) < uuid7(MS + 1)
    assert is_uuid(uuid7())
    assert part_id(MS) < part_id(MS + 1)
    assert part_id().startswith("prt_")


IDS = st.text(alphabet=st.sampled_from("aZ09._:@+=-/ é\\'\""), max_size=8) | st.text(
    alphabet="ab.", min_size=MAX_ID_LENGTH - 2, max_size=MAX_ID_LENGTH + 2)


@given(IDS)
def test_the_fast_id_match_agrees_with_check_id(value: str) -> None:
    try:
        check_id("event", value)
        accepted = True
    except InvalidId:
        accepted = False
    assert accepted == (_ID_OK(value) is not None)


def _base32_by_digits(value: int) -> str:
    """Crockford base32, 26 digits, one digit at a time (the plain definition)."""
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return "".join(alphabet[(value >> (5 * i)) & 31] for i in reversed(range(26)))


@given(st.integers(0, (1 << 140) - 1))
def test_part_id_digits_are_crockford_base32(value: int) -> None:
    from engine.ids import _base32_26  # noqa: PLC0415

    assert _base32_26(value) == _base32_by_digits(value)


def test_a_forked_child_draws_other_random_bits_than_its_parent() -> None:
    import os  # noqa: PLC0415

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first part id, then exit without pytest's teardown
        os.write(write, part_id(MS).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    mine = part_id(MS)
    assert child[-13:] != mine[-13:]  # the random low bits (13 digits = 65 bits)


@given(start=st.one_of(st.integers(0, (1 << 48) - 1),
                       st.integers(0, 1 << 36).map(lambda k: (k << 12) - 3 & ((1 << 48) - 1))),
       count=st.integers(1, 20))
def test_event_ids_spell_their_counting_bits(start: int, count: int) -> None:
    """The last 12 hex digits are the 48 counting bits, across every carry."""
    ids = EventIds()
    ids._lo = start
    ids._upper = f"{start >> 12:09x}"
    for i in range(1, count + 1):
        text = ids(MS)
        assert int(text[-12:], 16) == (start + i) & ((1 << 48) - 1)
        assert uuid.UUID(text).variant == uuid.RFC_4122


@given(st.integers(0, (1 << 48) - 1), st.integers(0, 0xFFF),
       st.lists(st.tuples(st.integers(0, 2), st.sampled_from([1, 7, 8, 64, 300, 5000])),
                min_size=1, max_size=5))
def test_many_ids_are_the_ids_one_call_each_gives(lo: int, seq: int,
                                                  batches: list[tuple[int, int]]) -> None:
    """``EventIds.many`` (runs formatted together) against ``n`` single calls, from any
    counter state: carries of the low 12 bits, of all 48, and past 4096 ids in one ms."""
    one = EventIds()
    one._lo, one._upper = lo, f"{lo >> 12:09x}"
    one(MS)
    one._seq = seq
    bulk = EventIds()
    for name in EventIds.__slots__:
        setattr(bulk, name, getattr(one, name))
    now = MS
    for step, n in batches:
        now += step
        assert bulk.many(now, n) == [one(now) for _ in range(n)]
