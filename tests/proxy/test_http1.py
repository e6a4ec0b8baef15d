"""The forwarder's framing: wherever the bytes are cut, a body's payload and its end
are found exactly, and nothing after the end is taken as the body's."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy import http1

pieces = st.lists(st.binary(min_size=1, max_size=40), max_size=8)
cuts = st.lists(st.integers(min_value=0, max_value=400), max_size=10)


def _chunked(parts: list[bytes], ext: bool, trailer: bool) -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";name=v" if ext else b"", p) for p in parts)
    return out + b"0\r\n" + (b"x-trailer: 1\r\n" if trailer else b"") + b"\r\n"


def _feed(framing: http1.Framing, data: bytes, at: list[int]) -> tuple[bytes, int]:
    payload, used = b"", 0
    bounds = sorted({min(c, len(data)) for c in at} | {0, len(data)})
    for start, end in itertools.pairwise(bounds):
        piece = data[start:end]
        got, n = framing.feed(piece)
        payload += b"".join(got)
        used += n
        if framing.done:
            break
    return payload, used


@given(pieces, st.booleans(), st.booleans(), cuts, st.binary(max_size=20))
@settings(max_examples=150, deadline=None)
def test_a_chunked_body_is_found_however_it_is_cut(
        parts: list[bytes], ext: bool, trailer: bool, at: list[int], after: bytes) -> None:
    body = _chunked(parts, ext, trailer)
    framing = http1.Chunked()
    payload, used = _feed(framing, body + after, at)
    assert framing.done
    assert payload == b"".join(parts)
    assert used == len(body)  # what follows the end is not the body's


@given(st.binary(max_size=200), cuts, st.binary(max_size=20))
@settings(max_examples=100, deadline=None)
def test_a_length_body_is_found_however_it_is_cut(
        body: bytes, at: list[int], after: bytes) -> None:
    framing = http1.Length(len(body))
    payload, used = _feed(framing, body + after, at)
    assert framing.done
    assert (payload, used) == (body, len(body))


def test_heads_and_their_framing() -> None:
    raw = (b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
           b"Connection: keep-alive, X-Drop\r\n\r\n")
    assert http1.head_end(raw + b"hello") == len(raw)
    head = http1.parse_head(raw)
    assert http1.request_line(head) == ("POST", "/v1/messages?beta=true", b"HTTP/1.1")
    assert head.tokens(b"connection") == {b"keep-alive", b"x-drop"}
    assert head.lines[0] == b"Host: x"  # kept raw: forwarded as the client wrote it
    assert isinstance(http1.body_framing(head, request=True), http1.Length)
    response = http1.parse_head(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    assert http1.status_line(response) == (b"HTTP/1.1", 200)
    assert isinstance(http1.body_framing(response, request=False), http1.UntilClose)
    assert http1.body_framing(response, request=False, method="HEAD").done
    no_content = http1.parse_head(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert http1.body_framing(no_content, request=False, status=204).done


@pytest.mark.parametrize("raw", [
    b"GET\r\n\r\n", b"POST / HTTP/2\r\n\r\n", b"POST / HTTP/1.1\r\nno colon\r\n\r\n",
    b"POST / HTTP/1.1\r\n name: folded\r\n\r\n",
])
def test_a_malformed_request_head_is_refused(raw: bytes) -> None:
    with pytest.raises(http1.BadMessage):
        http1.request_line(http1.parse_head(raw))


@pytest.mark.parametrize("data", [b"zz\r\n", b"-5\r\n", b"5" * 9000])
def test_a_malformed_chunk_size_is_refused(data: bytes) -> None:
    with pytest.raises(http1.BadMessage):
        http1.Chunked().feed(data)


def test_conflicting_lengths_are_refused() -> None:
    head = http1.parse_head(b"POST / HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n")
    with pytest.raises(http1.BadMessage):
        http1.body_framing(head, request=True)
