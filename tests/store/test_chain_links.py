"""The chain's batch form is the chain's rule, event after event (keyed or not).

``Chain.links`` starts each digest from a copy of a blank (or keyed) state and
hashes ``prev`` and the event's bytes as two updates: it must give exactly the
hashes ``H(prev || canon)`` truncated, which ``Chain.link`` computes from scratch
and every stored hash was made by.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store.chain import GENESIS, HASH_BYTES, Chain

_canons = st.lists(st.binary(max_size=300), max_size=12)
_keys = st.one_of(st.none(), st.binary(min_size=16, max_size=80))


@settings(max_examples=60, deadline=None)
@given(key=_keys, prev=st.binary(min_size=HASH_BYTES, max_size=HASH_BYTES), canons=_canons)
def test_links_are_the_rule_applied_event_after_event(
        key: bytes | None, prev: bytes, canons: list[bytes]) -> None:
    chain = Chain(key)
    expected = []
    h = prev
    for c in canons:
        full = (hashlib.sha256(h + c).digest() if key is None
                else hmac.new(key, h + c, "sha256").digest())
        h = full[:HASH_BYTES]
        expected.append(h)
        assert chain.link(expected[-2] if len(expected) > 1 else prev, c) == h
    assert chain.links(prev, canons) == expected
    # Buffers (a block's canonical slices are memoryviews) hash as their bytes.
    views = cast("list[bytes]", [memoryview(c) for c in canons])
    assert chain.links(prev, views) == expected


def test_keys_give_different_chains() -> None:
    canons = [b"a", b"bc"]
    assert Chain(b"k" * 16).links(GENESIS, canons) != Chain(b"j" * 16).links(GENESIS, canons)
    assert Chain(b"k" * 16).links(GENESIS, canons) != Chain(None).links(GENESIS, canons)
