"""Anthropic Messages raw stream events -> engine events.

Accepts the events as plain dicts (as they arrive over SSE, ``json.loads`` of
each ``data:`` line) or the ``anthropic`` SDK's event objects (read as the
fields the API sent: ``to_dict()``, not defaults). The block at each ``index``
becomes one part:

========================  ==========================================================
content block             part
========================  ==========================================================
``text``                  text part; its ``citations`` (as the start sent them, then
                          each ``citations_delta``) in ``metadata.anthropic.citations``
                          at the block's end
``thinking``              reasoning part; the signature in
                          ``metadata.anthropic.signature``
``redacted_thinking``     an ended reasoning part with empty text and
                          ``metadata.anthropic.redacted`` = the opaque ``data``
``tool_use``              tool part (pending), JSON fragments as ``tool.input_delta``,
                          the parsed input at ``content_block_stop``
``server_tool_use``,      the same, marked ``metadata.anthropic.server`` and ``.type``;
``mcp_tool_use``          its result block settles it
any other block           an ignored synthetic text part keeping the block whole in
                          ``metadata.anthropic.block`` (server tool results, ...)
========================  ==========================================================

A tool block's other fields (``caller``, ``server_name``, ``toolset_name``) are
kept in ``metadata.anthropic.fields``.

**Server tools** run at the provider; the client never sends their result. A
result block (a block with ``tool_use_id``: ``web_search_tool_result``,
``mcp_tool_result``, ...) completes the call it answers with the result's
``content`` as output (JSON unless a string), or fails it (kind ``error``) when
the content is an error object (``type`` ending in ``_error``) or
``is_error`` is set. A result that answers no open server call of the message
(an unknown id, a client tool's id, a second result) is kept as its opaque part
and settles nothing; the request renderer does not send it back. A server call
still without a result at ``message_stop`` (a ``pause_turn``) fails with kind
``cancelled``, so the message completes: nobody else could answer it.

``message_delta`` carries cumulative usage: counts overwrite, and a count that is
absent keeps its ``message_start`` value. At ``message_stop`` the stop reason and
usage become a ``step.finished`` part and, when no tool call waits for its
result, the message's completion.

The message's own fields (``id``, ``model``, ``stop_reason``, ``stop_sequence``,
``stop_details``, ``container``, ``usage`` as sent) are kept as the SDK ends with
them in the message metadata ``anthropic.message``: the ``message_start`` ones
with the message's start, the final ones with its completion. A ``tool_use``
block whose JSON is cut short (a prefix of JSON) fails ``truncated`` when the
stop reason is ``max_tokens``; with another stop reason it is malformed.

Deltas must fit their block: a ``citations_delta`` or ``text_delta`` for anything
but a text block (a tool call, a server result) is an ``UnexpectedDelta``, where
the SDK silently drops it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import msgspec

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
from engine.ids import part_id
from engine.session import Session

__all__ = ["AnthropicIngest", "ingest_anthropic"]

_TextDelta = ev.TextDelta
_ToolInputDelta = ev.ToolInputDelta
_TextAdded = ev.TextAdded
_ToolAdded = ev.ToolAdded
_PartEnded = ev.PartEnded
_json_decode = msgspec.json.decode  # what ingest.loads tries first
_PLAIN_TEXT_KEYS = frozenset({"type", "text"})  # a text block without citations
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_TOOL_KEYS = frozenset({"type", "id", "name", "input"})
# Usage fields a message_delta sets only when present (the SDK keeps the start's otherwise).
_DELTA_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                "server_tool_use", "output_tokens_details")


def _result_output(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _result_error(result: dict[str, Any]) -> str | None:
    """The error a server tool's result block reports, or None for a result."""
    content = result.get("content")
    if isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
        return f"{content['type']}: {content.get('error_code') or 'unknown'}"
    if result.get("is_error"):  # mcp_tool_result
        text = _result_output(result)
        return text if text.strip() else "error"  # a failure needs a description (BR-10)
    return None


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

    truncating: ClassVar[frozenset[str]] = frozenset({"max_tokens",
                                                      "model_context_window_exceeded"})

    def __init__(self, session: Session, **options: Any) -> None:
        super().__init__(session, **options)
        self.usage: dict[str, Any] = {}
        self.provider_message_id = ""
        # The message as the SDK ends with it, content aside: fields as sent, then what
        # each message_delta assigns (usage counts it omits keep their start value).
        self.envelope: dict[str, Any] = {}

    def _feed(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "content_block_delta":  # the hot path first: checks inlined
            if not self.started or self.stopped:
                self._require_open()  # raises
            block = self.blocks.get(data.get("index"))
            if block is None or not block.open:
                block = self._block(data.get("index"))  # raises, naming the index
            delta = data["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                if block.kind != TEXT:
                    self._expect(block, TEXT, dtype)
                text = delta["text"]
                if self.direct_deltas and text and text.__class__ is str:
                    # _text's common case, inlined: one event, recorded as it came.
                    self._queue.append(_TextDelta(message_id=self.message_id,
                                                  part_id=block.part_id, delta=text))
                else:
                    self._text(block, text)
            elif dtype == "input_json_delta":
                if block.kind != TOOL:
                    self._expect(block, TOOL, dtype)
                fragment = delta["partial_json"]
                if self.direct_deltas and fragment and fragment.__class__ is str \
                        and block.raw is not None:
                    # _fragment, inlined.
                    block.raw.append(fragment)
                    self._queue.append(_ToolInputDelta(message_id=self.message_id,
                                                       part_id=block.part_id,
                                                       fragment=fragment))
                else:
                    self._fragment(block, fragment)
            elif dtype == "thinking_delta":
                self._expect(block, REASONING, dtype)
                self._text(block, delta["thinking"])
            elif dtype == "signature_delta":
                self._expect(block, REASONING, dtype)
                block.data["signature"] = delta["signature"]
            elif dtype == "citations_delta":
                self._expect(block, TEXT, dtype)
                if block.data.get("citations"):
                    block.data["citations"].append(delta["citation"])
                else:  # replaces a null or empty start value, as the SDK does
                    block.data["citations"] = [delta["citation"]]
            else:
                raise UnexpectedDelta(f"unknown delta type {dtype!r}")
        elif kind == "content_block_start":
            if not self.started or self.stopped:
                self._require_open()  # raises
            index = data["index"]
            start = data["content_block"]
            btype = start.get("type")
            # The common blocks, opened inline: a text block without citations, a client
            # tool call without input or extra fields. What _block_start does for them,
            # but no pre-check (_emit): every field is a str known to encode (the message
            # id was checked with the message's start, the part id is made here, the
            # provider's strings are ASCII) and the rest are defaults, so the check
            # could only pass. Anything else (a repeated index, an odd value, coalescing)
            # takes _block_start, which decides and raises.
            if btype == "text" and self.direct_deltas and start.keys() <= _PLAIN_TEXT_KEYS:
                text = start.get("text") or ""
                if text.__class__ is str and text.isascii() and index not in self.blocks:
                    mid = self.message_id
                    pid = part_id()
                    self.blocks[index] = Block(TEXT, mid, pid)
                    self._queue.append(_TextAdded(message_id=mid, part_id=pid, text=text))
                    return
            elif (btype == "tool_use" and self.direct_deltas and start.keys() <= _TOOL_KEYS
                  and not start.get("input")):
                call_id, name = start["id"], start["name"]
                if (call_id.__class__ is str and name.__class__ is str and call_id.isascii()
                        and name.isascii() and index not in self.blocks):
                    mid = self.message_id
                    pid = part_id()
                    tool = Block(TOOL, mid, pid, raw=[],
                                 data={"call_id": call_id, "name": name, "server": False})
                    self.blocks[index] = tool
                    self._tools.append(tool)
                    self._calls[pid] = tool
                    self._queue.append(_ToolAdded(message_id=mid, part_id=pid,
                                                  call_id=call_id, tool=name,
                                                  input=tool.start_input))
                    return
            self._block_start(index, start)
        elif kind == "content_block_stop":
            if not self.started or self.stopped:
                self._require_open()  # raises
            index = data.get("index")
            block = self.blocks.get(index)
            if block is None or not block.open:
                block = self._block(index)  # raises, naming the index
            if block.kind == TEXT and not block.data and self.direct_deltas:
                # _close of a text block without citations, inlined: an end without
                # metadata (every field a str known to encode: no pre-check).
                block.open = False
                self._queue.append(_PartEnded(message_id=self.message_id,
                                              part_id=block.part_id))
                return
            if block.kind == TOOL and block.raw and self.direct_deltas \
                    and not block.data.get("freeform"):
                # _close of a tool call whose arguments parse as a JSON object, inlined
                # (what parse_tool_input finds for them); anything else (no fragment,
                # text msgspec refuses, not an object) takes _close, which decides.
                raw = "".join(block.raw)
                try:
                    value = _json_decode(raw)
                except (msgspec.MsgspecError, ValueError, RecursionError):
                    value = None
                if value.__class__ is dict:
                    block.open = False
                    block.raw = None
                    block.joined = raw
                    self._ready(block, value)
                    return
            self._close(block, self._end_metadata(block), data)
        elif kind == "message_delta":
            self._require_open()
            delta = data.get("delta") or {}
            env = self.envelope
            self.stop_reason = env["stop_reason"] = delta.get("stop_reason")
            env["stop_sequence"] = delta.get("stop_sequence")
            env["stop_details"] = delta.get("stop_details")
            if delta.get("container") is not None:
                env["container"] = delta["container"]
            usage = data.get("usage") or {}
            self.usage["output_tokens"] = usage.get("output_tokens")
            for key in _DELTA_USAGE:
                if usage.get(key) is not None:
                    self.usage[key] = usage[key]
        elif kind == "message_stop":
            self._require_open()
            self._cancel_unanswered()
            self._stop(self.stop_reason, _tokens(self.usage),
                       {"anthropic": {"message": self.envelope}})
        elif kind == "message_start":
            message = data["message"]
            self.provider_message_id = message.get("id") or ""
            self.envelope = {k: v for k, v in message.items() if k != "content"}
            self.usage = self.envelope["usage"] = dict(message.get("usage") or {})
            self._start_message(message.get("model"), {"anthropic": {"message": {
                **self.envelope, "usage": dict(self.usage)}}})
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
            b = self._open_text(index, block.get("text") or "")
            if "citations" in block:  # even null or [], which the SDK keeps as sent
                citations = block["citations"]
                b.data["citations"] = list(citations) if citations is not None else None
        elif btype == "thinking":
            b = self._open_reasoning(index, block.get("thinking") or "")
            b.data["signature"] = block.get("signature") or ""
        elif btype == "redacted_thinking":
            b = self._open_reasoning(index, "", {"anthropic": {"redacted": block.get("data")}})
            b.data["redacted"] = True
        elif btype in _TOOL_BLOCKS:
            server = btype != "tool_use"
            meta: dict[str, Any] = {"server": True, "type": btype} if server else {}
            fields = {k: v for k, v in block.items() if k not in _TOOL_KEYS}
            if fields:
                meta["fields"] = fields
            self._open_tool(index, block["id"], block["name"], block.get("input") or {},
                            {"anthropic": meta} if meta else None, server=server)
        else:
            b = self._open_opaque(index, {"anthropic": {"block": dict(block)}})
            call_id = block.get("tool_use_id")
            if isinstance(call_id, str):
                self._server_result(call_id, block, b)

    def _server_result(self, call_id: str, result: dict[str, Any], part: Block) -> None:
        """Settle the open server call ``result`` answers; an orphan result settles nothing."""
        call = next((b for b in self._tools if b.data.get("server")
                     and not b.data.get("done") and b.data["call_id"] == call_id), None)
        if call is None:
            return
        if call.open:
            self._close(call)
        mid, pid = self.message_id, call.part_id
        meta = {"anthropic": {"result_part": part.part_id}}
        self._emit(ev.ToolStarted(message_id=mid, part_id=pid))
        error = _result_error(result)
        if error is None:
            self._emit(ev.ToolCompleted(message_id=mid, part_id=pid,
                                        output=_result_output(result) or "(empty)",
                                        metadata=meta))
        else:
            self._emit(ev.ToolFailed(message_id=mid, part_id=pid, error=error, kind="error",
                                     metadata=meta))
        call.data["done"] = True

    def _cancel_unanswered(self) -> None:
        """Fail the server calls the message ends without a result for (``pause_turn``)."""
        self._flush_buffered()
        for call in self._tools:
            if call.data.get("server") and not call.data.get("done"):
                if call.open:
                    self._close(call)
                self._emit(ev.ToolFailed(
                    message_id=self.message_id, part_id=call.part_id, kind="cancelled",
                    error=f"no result from the provider (stop reason {self.stop_reason})",
                    metadata={"anthropic": {"unanswered": True}}))
                call.data["done"] = True

    @staticmethod
    def _end_metadata(block: Block) -> dict[str, Any] | None:
        if block.kind == REASONING and not block.data.get("redacted"):
            return {"anthropic": {"signature": block.data.get("signature", "")}}
        if block.kind == TEXT and "citations" in block.data:
            return {"anthropic": {"citations": block.data["citations"]}}
        return None


def ingest_anthropic(session: Session, events: Any, **options: Any) -> IngestResult:
    """Ingest a whole stream (an iterable of events) and return the result."""
    return AnthropicIngest(session, **options).ingest(events)
