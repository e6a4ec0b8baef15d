"""Anthropic Messages raw stream events -> engine events.

Accepts the events as plain dicts (as they arrive over SSE, ``json.loads`` of
each ``data:`` line) or the ``anthropic`` SDK's event objects. The block at each
``index`` becomes one part:

========================  ==========================================================
content block             part
========================  ==========================================================
``text``                  text part; ``citations_delta`` land in
                          ``metadata.anthropic.citations`` at the block's end
``thinking``              reasoning part; the signature in
                          ``metadata.anthropic.signature``
``redacted_thinking``     an ended reasoning part with empty text and
                          ``metadata.anthropic.redacted`` = the opaque ``data``
``tool_use``              tool part (pending), JSON fragments as ``tool.input_delta``,
                          the parsed input at ``content_block_stop``
``server_tool_use``       the same, marked ``metadata.anthropic.server``; its result
                          block completes it
any other block           an ignored synthetic text part keeping the block whole in
                          ``metadata.anthropic.block`` (server tool results, ...)
========================  ==========================================================

``message_delta`` carries cumulative usage: counts overwrite, and a count that is
absent keeps its ``message_start`` value. At ``message_stop`` the stop reason and
usage become a ``step.finished`` part and, when no tool call waits for its
result, the message's completion.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from engine import events as ev
from engine.adapters.ingest import (
    REASONING,
    TEXT,
    TOOL,
    Block,
    IngestResult,
    ProviderStreamError,
    StreamIngest,
    StreamOrderError,
    UnexpectedDelta,
)
from engine.session import Session

__all__ = ["AnthropicIngest", "ingest_anthropic"]

_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _tokens(usage: dict[str, Any]) -> ev.Tokens:
    return ev.Tokens(
        input=usage.get("input_tokens") or 0,
        output=usage.get("output_tokens") or 0,
        cache=ev.CacheTokens(read=usage.get("cache_read_input_tokens") or 0,
                             write=usage.get("cache_creation_input_tokens") or 0),
    )


class AnthropicIngest(StreamIngest):
    """One Anthropic Messages stream into one assistant message."""

    provider_id: ClassVar[str] = "anthropic"

    def __init__(self, session: Session, **options: Any) -> None:
        super().__init__(session, **options)
        self.usage: dict[str, Any] = {}
        self.provider_message_id = ""

    def _feed(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "content_block_delta":  # the hot path first
            self._require_open()
            block = self._block(data.get("index"))
            delta = data["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                self._expect(block, TEXT, dtype)
                self._text(block, delta["text"])
            elif dtype == "input_json_delta":
                self._expect(block, TOOL, dtype)
                self._fragment(block, delta["partial_json"])
            elif dtype == "thinking_delta":
                self._expect(block, REASONING, dtype)
                self._text(block, delta["thinking"])
            elif dtype == "signature_delta":
                self._expect(block, REASONING, dtype)
                block.data["signature"] = delta["signature"]
            elif dtype == "citations_delta":
                self._expect(block, TEXT, dtype)
                block.data.setdefault("citations", []).append(delta["citation"])
            else:
                raise UnexpectedDelta(f"unknown delta type {dtype!r}")
        elif kind == "content_block_start":
            self._require_open()
            self._block_start(data["index"], data["content_block"])
        elif kind == "content_block_stop":
            self._require_open()
            block = self._block(data.get("index"))
            self._close(block, self._end_metadata(block), data)
        elif kind == "message_delta":
            self._require_open()
            delta = data.get("delta") or {}
            self.stop_reason = delta.get("stop_reason")
            self.usage["stop_sequence"] = delta.get("stop_sequence")
            usage = data.get("usage") or {}
            self.usage["output_tokens"] = usage.get("output_tokens") or 0
            for key in ("input_tokens", "cache_creation_input_tokens",
                        "cache_read_input_tokens"):
                if usage.get(key) is not None:
                    self.usage[key] = usage[key]
        elif kind == "message_stop":
            self._require_open()
            self._stop(self.stop_reason, _tokens(self.usage))
        elif kind == "message_start":
            message = data["message"]
            self.provider_message_id = message.get("id") or ""
            self.usage = {k: v for k, v in (message.get("usage") or {}).items()
                          if v is not None}
            self._start_message(message.get("model"))
            self.stop_reason = message.get("stop_reason")
            for index, block in enumerate(message.get("content") or []):
                self._block_start(index, block)
        elif kind == "ping":
            return
        elif kind == "error":
            error = data.get("error") or {}
            raise ProviderStreamError(error.get("message") or "provider error",
                                      error_type=error.get("type") or "")
        else:
            raise StreamOrderError(f"unknown event type {kind!r}")

    @staticmethod
    def _expect(block: Block, kind: str, delta_type: str) -> None:
        if block.kind != kind:
            raise UnexpectedDelta(f"a {delta_type} for a {block.kind} block")

    def _block_start(self, index: Any, block: dict[str, Any]) -> None:
        btype = block.get("type")
        if btype == "text":
            self._open_text(index, block.get("text") or "")
            citations = block.get("citations")
            if citations:
                self.blocks[index].data["citations"] = list(citations)
        elif btype == "thinking":
            b = self._open_reasoning(index, block.get("thinking") or "")
            b.data["signature"] = block.get("signature") or ""
        elif btype == "redacted_thinking":
            b = self._open_reasoning(index, "", {"anthropic": {"redacted": block.get("data")}})
            b.data["redacted"] = True
        elif btype in _TOOL_BLOCKS:
            server = btype != "tool_use"
            meta = {"anthropic": {"server": True, "type": btype}} if server else None
            self._open_tool(index, block["id"], block["name"], block.get("input") or {},
                            meta, server=server)
        else:
            b = self._open_opaque(index, {"anthropic": {"block": dict(block)}})
            call_id = block.get("tool_use_id")
            if isinstance(call_id, str):  # a server tool's result: complete its call
                content = block.get("content")
                output = content if isinstance(content, str) else json.dumps(
                    content, ensure_ascii=False)
                b.data["result_of"] = call_id
                self._complete_server_tool(call_id, output,
                                           {"anthropic": {"result_part": b.ref.part_id}})

    @staticmethod
    def _end_metadata(block: Block) -> dict[str, Any] | None:
        if block.kind == REASONING and not block.data.get("redacted"):
            return {"anthropic": {"signature": block.data.get("signature", "")}}
        if block.kind == TEXT and block.data.get("citations"):
            return {"anthropic": {"citations": block.data["citations"]}}
        return None


def ingest_anthropic(session: Session, events: Any, **options: Any) -> IngestResult:
    """Ingest a whole stream (an iterable of events) and return the result."""
    return AnthropicIngest(session, **options).ingest(events)
