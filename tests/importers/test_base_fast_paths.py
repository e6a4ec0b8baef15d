"""The importers' hot paths (issue 30 target 5) give exactly what the general code gave:
an event's time and every id derived from it must not move between releases, or a
re-import would write a second copy of a session."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.base import loads, mend, ms_of, stable_uuid, stable_uuid_joined


def _general_ms(stamp: str) -> int:
    """The general path: what ms_of computed for every timestamp before the fast one."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _general_uuid(time_ms: int, *key: str) -> str:
    digest = hashlib.blake2b("\x1f".join(key).encode(), digest_size=10).digest()
    rand = int.from_bytes(digest, "big")
    value = (max(time_ms, 0) & ((1 << 48) - 1)) << 80 | 0x7 << 76
    value |= (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@settings(max_examples=400, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
def test_a_javascript_timestamp_reads_as_the_general_path_reads_it(when: datetime) -> None:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    assert ms_of(stamp) == _general_ms(stamp)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=24, max_size=24) | st.from_regex(
    r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\Z"))
def test_any_24_characters_read_as_the_general_path_reads_them(stamp: str) -> None:
    assert ms_of(stamp) == _general_ms(stamp)


def test_the_edges_of_the_fast_path() -> None:
    for stamp in ("2025-13-01T10:00:00.000Z", "2025-02-30T10:00:00.000Z",
                  "2025-01-01T24:00:00.000Z", "2025-01-01T10:60:00.000Z",
                  "2025-01-01T10:00:60.000Z", "0001-01-01T00:00:00.000Z",
                  "1969-12-31T23:59:59.999Z"):
        assert ms_of(stamp) == _general_ms(stamp), stamp
    assert ms_of((datetime(2026, 1, 1, tzinfo=UTC) - timedelta(milliseconds=1)).strftime(
        "%Y-%m-%dT%H:%M:%S.999Z")) == 1767225599999


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 50), 1 << 50), st.lists(st.text(), min_size=1, max_size=4))
def test_stable_uuid_is_the_id_it_always_was(time_ms: int, key: list[str]) -> None:
    assert stable_uuid(time_ms, *key) == _general_uuid(time_ms, *key)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 50), 1 << 50), st.lists(st.text(), min_size=1, max_size=4))
def test_an_id_of_a_joined_key_is_the_id_of_its_parts(time_ms: int, key: list[str]) -> None:
    # The Codex importer joins a line's key prefix once and adds each event's count.
    assert stable_uuid_joined(time_ms, "\x1f".join(key)) == _general_uuid(time_ms, *key)


def _general_loads(data: str) -> object:
    value = json.loads(data)
    if re.search(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", data.encode("utf-8", "surrogatepass")):
        return mend(value)
    return value


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8),
       st.booleans())
def test_loads_mends_what_it_always_mended(value: object, ascii_only: bool) -> None:
    # A string with no escape skips the surrogate scan: the value must not change.
    data = json.dumps(value, ensure_ascii=ascii_only)
    assert loads(data) == _general_loads(data)
    assert loads(data.encode("utf-8", "surrogatepass")) == _general_loads(data)
