"""Provider streams for the tests (as the APIs send them)."""

from __future__ import annotations

import re
from typing import Any

JSON = dict[str, Any]


def anthropic_text_and_tool(text: str = "Reading the file", call_id: str = "toolu_1",
                            msg_id: str = "msg_1") -> list[JSON]:
    return [
        {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text[:5]}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text[5:]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": call_id, "name": "read", "input": {}}},
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
        *({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": word}}
          for word in re.findall(r"\S+\s*", text)),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]


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
