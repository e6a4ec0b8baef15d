"""Provider streams for the tests (as the APIs send them); the Anthropic ones are the
shared ones of :mod:`tests.support.fake_sse`."""

from __future__ import annotations

import re
from typing import Any

from tests.support import fake_sse

JSON = dict[str, Any]


def anthropic_text_and_tool() -> list[JSON]:
    """The support module's text-and-tool stream with a ``ping`` after the first block
    opens, as the API sends them (the proxy passes it on; the ingest skips it)."""
    events = fake_sse.anthropic_text_and_tool()
    return [*events[:2], {"type": "ping"}, *events[2:]]


def anthropic_text(text: str, msg_id: str = "msg_2") -> list[JSON]:
    """The support module's text stream, its text sent a word per delta (a stream long
    enough to be cut in the middle)."""
    start, block, _whole, *end = fake_sse.anthropic_text(text, msg_id)
    words = [{"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": word}}
             for word in re.findall(r"\S+\s*", text)]
    return [start, block, *words, *end]


def responses_text_and_call(resp_id: str = "resp_1") -> list[JSON]:
    ref = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "shell",
            "arguments": '{"cmd": "ls"}', "status": "completed"}
    base = {"id": resp_id, "object": "response", "created_at": 1, "model": "fake-model",
            "output": []}
    events: list[JSON] = [
        {"type": "response.created", "response": {**base, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress",
            "content": []}},
        {"type": "response.content_part.added", **ref,
         "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **ref, "delta": "Listing "},
        {"type": "response.output_text.delta", **ref, "delta": "files"},
        {"type": "response.output_text.done", **ref, "text": "Listing files"},
        {"type": "response.content_part.done", **ref,
         "part": {"type": "output_text", "text": "Listing files", "annotations": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": {
            "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Listing files",
                         "annotations": []}]}},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {**call, "arguments": "", "status": "in_progress"}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
         "output_index": 1, "delta": '{"cmd": '},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
         "output_index": 1, "delta": '"ls"}'},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1",
         "output_index": 1, "arguments": '{"cmd": "ls"}'},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": {
            **base, "status": "completed",
            "output": [{"id": "msg_1", "type": "message", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "Listing files",
                                     "annotations": []}]}, call],
            "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 25, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 65}}},
    ]
    for n, e in enumerate(events):
        e["sequence_number"] = n
    return events


def chat_text(text: str = "Hello there") -> list[JSON]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "fake-model", "system_fingerprint": None}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                              "finish_reason": None}]},
        *({**base, "choices": [{"index": 0, "delta": {"content": w},
                                "finish_reason": None}]} for w in (text[:3], text[3:])),
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                                          "total_tokens": 11}},
    ]


def gemini_text_and_call() -> list[JSON]:
    base = {"modelVersion": "gemini-x", "responseId": "r1"}
    return [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me "}]},
                         "index": 0}], **base},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "look."}]},
                         "index": 0}], **base},
        {"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}}}]},
            "finishReason": "STOP", "index": 0}], **base,
         "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                           "totalTokenCount": 15}},
    ]
