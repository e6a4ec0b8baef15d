"""A fake provider over ``httpx2.MockTransport``: the real SDK clients parse recorded-shape SSE.

:class:`FakeServer` answers each request with the next scripted reply: an error
status (the SDK retries it), or a stream of SSE events that may be cut after
some events by a transport error, as a dropped connection would be.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import httpx2
from anthropic import Anthropic, AsyncAnthropic
from openai import AsyncOpenAI, OpenAI

JSON = dict[str, Any]


class ConnectionCut(httpx2.ReadError):
    """Raised by the transport where the scripted stream is cut."""


@attrs.define
class Reply:
    events: list[JSON] = attrs.Factory(list)
    status: int = 200
    cut_after: int | None = None  # raise ConnectionCut after this many events
    named: bool = True  # Anthropic and Responses name each SSE event; Chat does not
    done_marker: bool = False  # Chat Completions ends with ``data: [DONE]``
    stall_after: int | None = None  # async only: wait forever after this many events
    body: JSON | None = None  # a whole JSON response (a call without stream=True)


def sse(reply: Reply) -> list[bytes]:
    frames = []
    for e in reply.events:
        head = f"event: {e['type']}\n" if reply.named else ""
        frames.append(f"{head}data: {json.dumps(e)}\n\n".encode())
    if reply.done_marker and reply.cut_after is None:
        frames.append(b"data: [DONE]\n\n")
    return frames


@attrs.define
class FakeServer:
    replies: list[Reply]
    requests: list[JSON] = attrs.Factory(list)

    def _next(self, request: httpx2.Request) -> tuple[Reply, JSON]:
        self.requests.append(json.loads(request.content or b"{}"))
        reply = self.replies.pop(0)
        headers = {"content-type": "text/event-stream", "retry-after-ms": "1"}
        if reply.status != 200 or reply.body is not None:
            headers["content-type"] = "application/json"
        return reply, headers

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        reply, headers = self._next(request)
        if reply.status != 200:
            return httpx2.Response(reply.status, headers=headers, json={
                "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        if reply.body is not None:
            return httpx2.Response(200, headers=headers, json=reply.body)
        frames = sse(reply)

        def body() -> Iterator[bytes]:
            for i, frame in enumerate(frames):
                if reply.cut_after is not None and i == reply.cut_after:
                    raise ConnectionCut("connection reset by peer")
                yield frame

        return httpx2.Response(200, headers=headers, content=body())

    async def ahandle(self, request: httpx2.Request) -> httpx2.Response:
        reply, headers = self._next(request)
        if reply.status != 200:
            return httpx2.Response(reply.status, headers=headers, json={
                "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        if reply.body is not None:
            return httpx2.Response(200, headers=headers, json=reply.body)
        frames = sse(reply)

        async def body() -> AsyncIterator[bytes]:
            for i, frame in enumerate(frames):
                if reply.stall_after is not None and i == reply.stall_after:
                    await asyncio.Event().wait()  # a model that stops sending
                if reply.cut_after is not None and i == reply.cut_after:
                    raise ConnectionCut("connection reset by peer")
                yield frame

        return httpx2.Response(200, headers=headers, content=body())

    def anthropic(self) -> Anthropic:
        return Anthropic(api_key="test", base_url="http://fake.test", max_retries=2,
                                   http_client=httpx2.Client(
                                       transport=httpx2.MockTransport(self.handle)))

    def async_anthropic(self) -> AsyncAnthropic:
        return AsyncAnthropic(
            api_key="test", base_url="http://fake.test", max_retries=2,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.ahandle)))

    def openai(self) -> OpenAI:
        return OpenAI(api_key="test", base_url="http://fake.test/v1", max_retries=2,
                             http_client=httpx2.Client(
                                 transport=httpx2.MockTransport(self.handle)))

    def async_openai(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            api_key="test", base_url="http://fake.test/v1", max_retries=2,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.ahandle)))


def anthropic_text_and_tool() -> list[JSON]:
    """A recorded-shape Messages stream: text, then a tool call split over two deltas."""
    return [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Reading "}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "the file"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"path": "he'}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": 'llo.py"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    ]


def anthropic_text(text: str, msg_id: str = "msg_2") -> list[JSON]:
    return [
        {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]


def chat_chunks(text: str, *, call: tuple[str, str, str] | None = None) -> list[JSON]:
    """A Chat Completions stream: text deltas, optionally one tool call, then usage."""
    base: JSON = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                  "model": "gpt-x"}
    chunks: list[JSON] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                              "finish_reason": None}]}]
    for piece in (text[: len(text) // 2], text[len(text) // 2:]):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece},
                                            "finish_reason": None}]})
    finish = "stop"
    if call is not None:
        call_id, name, args = call
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": args[:5]}}]}, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "function": {"arguments": args[5:]}}]}, "finish_reason": None}]})
        finish = "tool_calls"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": {
        "prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}})
    return chunks
