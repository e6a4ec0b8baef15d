"""Gemini ``streamGenerateContent`` chunks -> engine events.

Each chunk is a ``GenerateContentResponse`` (``alt=sse``: one per ``data:``
line); a ``generateContent`` answer is one chunk. Only ``candidates[0]`` is
read. Its ``content.parts`` arrive in order:

- ``text`` parts extend the open text part (a new one opens after any other
  part), ``thought: true`` ones the open reasoning part; an empty text opens
  nothing (it often carries only a ``thoughtSignature``);
- a ``functionCall`` arrives whole: a tool part, its ``args`` as one
  ``tool.input_delta`` and the parsed input at once; a call without ``id``
  (the API omits it) gets one, unique in the session;
- a part's ``thoughtSignature`` is kept in the part's ``metadata.gemini``.

``finishReason`` ends the content; ``usageMetadata`` (cumulative, the last one
wins) becomes the tokens: ``input = promptTokenCount - cachedContentTokenCount``,
``output = candidatesTokenCount``, ``reasoning = thoughtsTokenCount``,
``cache.read = cachedContentTokenCount``. The stream's end stops the message;
one that ends without a ``finishReason`` is truncated. The response's own fields
(``responseId``, ``modelVersion``, ``usageMetadata``, ...) are kept in the
message metadata ``gemini.response``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from engine import events as ev
from engine.adapters.ingest import (
    REASONING,
    TEXT,
    Block,
    IngestResult,
    MalformedEvent,
    StreamIngest,
    StreamOrderError,
    StreamTruncated,
)
from engine.ids import part_id
from engine.session import Session

__all__ = ["GeminiIngest", "ingest_gemini", "tokens_from_usage"]

_NOT_ENVELOPE = frozenset({"candidates"})
_TOKEN_COUNTS = ("promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
                 "thoughtsTokenCount")


def tokens_from_usage(usage: dict[str, Any] | None) -> ev.Tokens:
    if not usage:
        return ev.Tokens()
    cached = usage.get("cachedContentTokenCount") or 0
    return ev.Tokens(input=(usage.get("promptTokenCount") or 0) - cached,
                     output=usage.get("candidatesTokenCount") or 0,
                     reasoning=usage.get("thoughtsTokenCount") or 0,
                     cache=ev.CacheTokens(read=cached))


class GeminiIngest(StreamIngest):
    """One Gemini stream (candidate 0) into one assistant message."""

    provider_id: ClassVar[str] = "google"
    truncating: ClassVar[frozenset[str]] = frozenset({"MAX_TOKENS"})

    def __init__(self, session: Session, **options: Any) -> None:
        super().__init__(session, **options)
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.envelope: dict[str, Any] = {}
        self._open: Block | None = None
        self._count = 0

    def _feed(self, data: dict[str, Any]) -> None:
        if self.stopped:
            raise StreamOrderError("a chunk after the stream ended")
        envelope = {k: v for k, v in data.items() if k not in _NOT_ENVELOPE}
        if not self.started:
            self.envelope.update(envelope)
            model = data.get("modelVersion")
            if model is not None and not isinstance(model, str):
                raise MalformedEvent("modelVersion must be a string")
            self._start_message(model, {"gemini": {"response": dict(self.envelope)}})
        else:
            self.envelope.update(envelope)
        candidates = data.get("candidates") or []
        if not isinstance(candidates, list):
            raise MalformedEvent("candidates must be a list")
        for candidate in candidates:
            if candidate.get("index", 0) != 0:
                raise StreamOrderError("only one candidate can be ingested")
            content = candidate.get("content") or {}
            for part in content.get("parts") or ():
                self._part(part)
            if candidate.get("finishReason"):
                self.finish_reason = str(candidate["finishReason"])
        if data.get("usageMetadata") is not None:
            if not isinstance(data["usageMetadata"], dict):
                raise MalformedEvent("usageMetadata must be an object")
            for name in _TOKEN_COUNTS:
                count = data["usageMetadata"].get(name)
                if count is not None and (type(count) is not int or count < 0):
                    raise MalformedEvent(f"usageMetadata.{name} must be a count, "
                                         f"not {type(count).__name__}")
            self.usage = data["usageMetadata"]

    def _part(self, part: dict[str, Any]) -> None:
        if self.finish_reason is not None:
            raise StreamOrderError("content after finishReason")
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._end_open()
            self._count += 1
            name = call.get("name")
            if not isinstance(name, str) or not name:
                raise MalformedEvent("a functionCall needs a name")
            call_id = call.get("id") or f"gemini_{part_id()}"
            meta = {"gemini": {"thoughtSignature": signature}} if signature else None
            block = self._open_tool(("call", self._count), str(call_id), name, metadata=meta)
            block.data["gemini_id"] = call.get("id")
            self._fragment(block, json.dumps(call.get("args") or {}, ensure_ascii=False))
            self._close(block)
            return
        text = part.get("text")
        if not isinstance(text, str):
            if text is not None:
                raise MalformedEvent("a part's text must be a string")
            if signature and self._open is not None:
                self._open.data["signature"] = signature
            return
        if not text:  # nothing to show (often a lone thoughtSignature): no new part
            if signature and self._open is not None:
                self._open.data["signature"] = signature
            return
        kind = REASONING if part.get("thought") else TEXT
        current = self._open
        if current is None or current.kind != kind:
            self._end_open()
            self._count += 1
            key = ("part", self._count)
            opened = self._open_text(key) if kind == TEXT else self._open_reasoning(key)
            self._open = current = opened
        if signature:
            current.data["signature"] = signature
        self._text(current, text)

    def _end_open(self) -> None:
        block, self._open = self._open, None
        if block is not None and block.open:
            signature = block.data.get("signature")
            self._close(block, {"gemini": {"thoughtSignature": signature}} if signature else None)

    def _end_of_stream(self) -> None:
        if self.finish_reason is None:
            raise StreamTruncated("the stream ended without a finishReason")
        self._end_open()
        self._stop(self.finish_reason, tokens_from_usage(self.usage),
                   {"gemini": {"response": dict(self.envelope)}})


def ingest_gemini(session: Session, chunks: Any, **options: Any) -> IngestResult:
    return GeminiIngest(session, **options).ingest(chunks)
