"""The proxy's pieces on their own: SSE parsing over any chunking, body decoding,
secret stripping, conversation matching, the Gemini stream ingest."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.adapters.gemini import GeminiIngest
from engine.adapters.ingest import StreamTruncated
from engine.proxy.conversation import Entry, entries, match
from engine.proxy.decode import UndecodableBody, decoder
from engine.proxy.secrets import SECRET_HEADERS, safe_headers, safe_query
from engine.proxy.sse import SSEParser
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection
from tests.proxy import scripts

_EVENTS = st.lists(st.tuples(st.sampled_from(["", "message_start", "delta"]),
                             st.text(st.characters(blacklist_categories=("Cs", "Cc")),
                                     max_size=20)), min_size=1, max_size=8)


def _encode(events: list[tuple[str, str]], newline: str) -> bytes:
    out = ""
    for name, data in events:
        if name:
            out += f"event: {name}{newline}"
        out += f": a comment{newline}data: {data}{newline}{newline}"
    return out.encode()


@settings(max_examples=60, deadline=None)
@given(_EVENTS, st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(1, 9), max_size=40))
def test_sse_events_are_the_same_however_the_bytes_are_cut(
        events: list[tuple[str, str]], newline: str, cuts: list[int]) -> None:
    raw = _encode(events, newline)
    parser = SSEParser()
    got: list[tuple[str, str]] = []
    at = 0
    for size in cuts:
        got += parser.feed(raw[at:at + size])
        at += size
    got += parser.feed(raw[at:])
    got += parser.close()
    assert got == events


def test_sse_multiline_data_and_an_unterminated_last_event() -> None:
    parser = SSEParser()
    got = list(parser.feed(b"data: a\ndata: b\n\ndata: [DONE]"))
    assert got == [("", "a\nb")]
    assert list(parser.close()) == [("", "[DONE]")]


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)  # deflate without the zlib wrapper (some servers)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("encode", [gzip.compress, zlib.compress, _raw_deflate])
def test_bodies_decode_in_any_chunks(encode: object) -> None:
    plain = b"".join(b"data: %d\n\n" % i for i in range(500))
    packed = encode(plain)  # type: ignore[operator]
    name = "gzip" if packed[:2] == b"\x1f\x8b" else "deflate"
    decode = decoder(name)
    assert b"".join(decode(packed[i:i + 3]) for i in range(0, len(packed), 3)) == plain


def test_an_unknown_encoding_is_a_typed_refusal() -> None:
    with pytest.raises(UndecodableBody):
        decoder("compress")


@given(st.lists(st.tuples(st.sampled_from(sorted(SECRET_HEADERS | {"x-other", "accept"})),
                          st.text(min_size=1, max_size=10)), max_size=10))
def test_no_secret_header_survives(headers: list[tuple[str, str]]) -> None:
    raw = [(name.title().encode(), value.encode("utf-8")) for name, value in headers]
    kept = safe_headers(raw)
    assert not set(kept) & SECRET_HEADERS
    assert set(kept) == {n for n, _ in headers} - SECRET_HEADERS


def test_query_credentials_are_dropped() -> None:
    assert safe_query("alt=sse&key=AIzaX&Key=y") == "alt=sse"


def test_matching_names_where_a_request_diverges() -> None:
    recorded = [Entry("user", (("text", "fix the bug"),)),
                Entry("assistant", (("call", "c1", "bash"),)),
                Entry("user", (("result", "c1"),))]
    # A client adds its own reminders to user turns: still a match.
    request = [Entry("user", (("text", "<reminder>"), ("text", "fix the bug"))),
               Entry("assistant", (("call", "c1", "bash"),)),
               Entry("user", (("result", "c1"),))]
    assert match(recorded, request).complete
    # One more assistant turn than recorded: not this call.
    assert not match(recorded, [*request, Entry("assistant", (("text", "done"),))]).complete
    other = match(recorded, [request[0], Entry("assistant", (("call", "c2", "bash"),))])
    assert (other.matched, other.request_at) == (1, 1)


def test_entries_of_each_api() -> None:
    responses = entries("openai-responses", [
        {"type": "message", "role": "developer", "content": [{"type": "input_text",
                                                              "text": "rules"}]},
        {"type": "reasoning", "encrypted_content": "x"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"}])
    assert [e.role for e in responses] == ["developer", "assistant", "tool"]
    chat = entries("openai-chat", [{"role": "system", "content": "s"},
                                   {"role": "assistant", "content": None, "tool_calls": [
                                       {"id": "t", "function": {"name": "f"}}]}])
    assert chat == [Entry("assistant", (("call", "t", "f"),))]
    gemini = entries("gemini", [{"role": "model", "parts": [
        {"text": "x", "thought": True}, {"functionCall": {"name": "f", "args": {}}}]}])
    assert gemini == [Entry("model", (("call", "f", "f"),))]


def test_gemini_stream_ingest() -> None:
    session = Session.create(MemoryStore())
    view = WithPartsProjection(session.id)
    session.subscribe(view)
    ingest = GeminiIngest(session)
    result = ingest.ingest([
        {"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Thinking", "thought": True}]}}], "modelVersion": "gemini-x"},
        *scripts.gemini_text_and_call()])
    [call] = result.tool_calls
    assert (call.name, call.input) == ("read_file", {"path": "a.txt"})
    assert not result.completed
    session.start_tool(call.ref)
    session.complete_tool(call.ref, "contents")
    ingest.complete()
    message = view.message(result.message_id)
    kinds = [(p.TAG, getattr(p, "text", None)) for p in message.parts
             if isinstance(p, v.TextPart | v.ReasoningPart)]
    assert kinds == [("reasoning", "Thinking"), ("text", "Let me look.")]
    info = message.info
    assert isinstance(info, v.AssistantInfo)
    assert (info.finish, info.tokens.input, info.tokens.output) == ("STOP", 10, 5)
    assert info.metadata is not None
    assert info.metadata["gemini"]["response"]["responseId"] == "r1"


def test_a_gemini_stream_without_finish_reason_is_truncated() -> None:
    session = Session.create(MemoryStore())
    ingest = GeminiIngest(session)
    with pytest.raises(StreamTruncated):
        ingest.ingest(scripts.gemini_text_and_call()[:2])
    # Settled: the text that streamed is kept, the message ended aborted.
    assert session.lifecycle.messages[ingest.message_id].state != "open"
