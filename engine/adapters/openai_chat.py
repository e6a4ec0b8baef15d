"""OpenAI Chat Completions stream chunks -> engine events.

Accepts chunk dicts (as over SSE) or the ``openai`` SDK's ``ChatCompletionChunk``
objects. Only ``choices[0]`` is read (``n > 1`` is refused). ``delta.content``
becomes one text part, ``delta.refusal`` a text part marked
``metadata.openai.refusal``; each ``delta.tool_calls[j]`` is merged by its
``index``: its first fragment (which carries ``id`` and ``function.name``) opens
a tool part, every ``function.arguments`` fragment is a ``tool.input_delta``.
``finish_reason`` ends the message's content; usage may come in a later chunk
(``stream_options.include_usage``), so the stop reason and usage are recorded
when the stream ends (:meth:`StreamIngest.finish`). A stream that ends without
a ``finish_reason`` is truncated.

The completion's own fields (the first chunk's ``id``, ``created``, ``model``,
``service_tier``; ``system_fingerprint`` and ``usage`` as the last chunk set
them, ``None`` when absent) are kept as the SDK ends with them in the message
metadata ``openai.completion``. A ``content`` of ``""`` alone is kept (a text
part with empty text: the SDK's ``""``, not ``None``). Arguments cut short by
``length`` or ``content_filter`` fail the call with kind ``truncated``.

Usage maps to tokens as ``input = prompt - cached``, ``output = completion -
reasoning``, ``reasoning``, ``cache.read = cached``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from engine import events as ev
from engine.adapters.ingest import (
    IngestResult,
    MalformedEvent,
    StreamIngest,
    StreamOrderError,
    StreamTruncated,
    UnexpectedDelta,
)
from engine.session import Session

__all__ = ["OpenAIChatIngest", "ingest_openai_chat", "tokens_from_usage"]

_NOT_ENVELOPE = frozenset({"choices", "obfuscation"})


def _checked_usage(usage: Any) -> dict[str, Any]:
    """The chunk's usage object, refused early (typed) when its shape is not the API's."""
    if not isinstance(usage, dict):
        raise MalformedEvent(f"usage must be an object, not {type(usage).__name__}")
    for key, inner in (("prompt_tokens", None), ("completion_tokens", None),
                       ("prompt_tokens_details", "cached_tokens"),
                       ("completion_tokens_details", "reasoning_tokens")):
        value, where = usage.get(key), key
        if inner is not None and value is not None:
            if not isinstance(value, dict):
                raise MalformedEvent(f"usage.{key} must be an object")
            value, where = value.get(inner), f"{key}.{inner}"
        if value is not None and type(value) is not int:
            raise MalformedEvent(f"usage.{where} must be an integer, not {type(value).__name__}")
    return usage


def tokens_from_usage(usage: dict[str, Any] | None) -> ev.Tokens:
    if not usage:
        return ev.Tokens()
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return ev.Tokens(input=(usage.get("prompt_tokens") or 0) - cached,
                     output=(usage.get("completion_tokens") or 0) - reasoning,
                     reasoning=reasoning, cache=ev.CacheTokens(read=cached))


class OpenAIChatIngest(StreamIngest):
    """One Chat Completions stream (choice 0) into one assistant message."""

    provider_id: ClassVar[str] = "openai"
    truncating: ClassVar[frozenset[str]] = frozenset({"length", "content_filter"})

    def __init__(self, session: Session, **options: Any) -> None:
        super().__init__(session, **options)
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        # The completion as the SDK ends with it, choices aside: the first chunk's
        # fields, then usage and system_fingerprint as each later chunk sets them.
        self.envelope: dict[str, Any] = {}
        self.envelope_content: str | None = None  # "" when the stream sent only ""

    def _feed(self, data: dict[str, Any]) -> None:
        if not self.started:
            env = self.envelope
            env["system_fingerprint"] = None
            env.update((k, v) for k, v in data.items() if k not in _NOT_ENVELOPE)
            env["object"] = "chat.completion"
            self._start_message(data.get("model"), {"openai": {"completion": dict(env)}})
        elif self.stopped:
            raise StreamOrderError("a chunk after the stream ended")
        else:
            env = self.envelope
            env["usage"] = data.get("usage")
            env["system_fingerprint"] = data.get("system_fingerprint")
            if data.get("moderation") is not None:
                env["moderation"] = data["moderation"]
        for choice in data.get("choices") or ():
            if choice.get("index", 0) != 0:
                raise StreamOrderError("only one choice (n=1) can be ingested")
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content")  # DeepSeek, OpenCode, aider
            if reasoning:
                self._after_finish()
                block = self.blocks.get("reasoning") or self._open_reasoning(
                    "reasoning", metadata={"openai": {"field": "reasoning_content"}})
                self._text(block, reasoning)
            content = delta.get("content")
            if content:
                self._after_finish()
                block = self.blocks.get("content") or self._open_text("content")
                self._text(block, content)
            elif content == "" and "content" not in self.blocks:
                # "" alone makes the content a string (the SDK's "", not None): kept in
                # the envelope, no empty text part (a stream of tool calls opens so).
                self.envelope_content = ""
            refusal = delta.get("refusal")
            if refusal or (refusal == "" and "refusal" not in self.blocks):
                self._after_finish()
                block = self.blocks.get("refusal") or self._open_text(
                    "refusal", metadata={"openai": {"refusal": True}})
                self._text(block, refusal)
            for call in delta.get("tool_calls") or ():
                self._after_finish()
                key = ("tool", call.get("index", 0))
                fn = call.get("function") or {}
                known = self.blocks.get(key)
                if known is None:
                    if not call.get("id") or not fn.get("name"):
                        raise UnexpectedDelta(
                            "the first fragment of a tool call must carry its id and name")
                    known = self._open_tool(key, call["id"], fn["name"])
                elif not known.open:
                    raise StreamOrderError(f"tool call {key[1]} already ended")
                self._fragment(known, fn.get("arguments") or "")
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if data.get("usage") is not None:
            self.usage = _checked_usage(data["usage"])

    def _after_finish(self) -> None:
        if self.finish_reason is not None:
            raise StreamOrderError("content after finish_reason")

    def _end_of_stream(self) -> None:
        if self.finish_reason is None:
            raise StreamTruncated("the stream ended without a finish_reason")
        openai: dict[str, Any] = {"completion": self.envelope}
        if self.envelope_content is not None and "content" not in self.blocks:
            openai["content"] = self.envelope_content
        self._stop(self.finish_reason, tokens_from_usage(self.usage), {"openai": openai})


def ingest_openai_chat(session: Session, chunks: Any, **options: Any) -> IngestResult:
    return OpenAIChatIngest(session, **options).ingest(chunks)
