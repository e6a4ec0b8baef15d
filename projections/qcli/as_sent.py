"""User messages as Q CLI sends them: context markers, truncation, conversions.

Everything here is a pure function of its arguments and byte-exact with Q CLI's
``message.rs`` / ``util.rs`` where Q CLI is right. Where it is not, convlog does
better and says so (see ``docs/conversation.md``):

- results share a truncation budget max-min fairly (small results stay whole,
  the rest split what is left) instead of Q CLI's ``max / len(results)`` per
  block, which divides by zero with no results and stops after the first
  truncated JSON block;
- a cancelled tool use's typed prompt survives ``replace_content_with_tool_use_results``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

import attrs

from projections.qcli.messages import (
    REDACTED_TOOL_RESULT,
    CancelledToolUses,
    EnvState,
    JsonBlock,
    Prompt,
    TextBlock,
    ToolSpec,
    ToolUseResult,
    ToolUseResultBlock,
    ToolUseResults,
    UserEnvContext,
    UserMessage,
    UserMessageContent,
)

MAX_USER_MESSAGE_SIZE: Final = 400_000  # bytes
MAX_CURRENT_WORKING_DIRECTORY_LEN: Final = 256  # bytes
TRUNCATED_SUFFIX: Final = "...content truncated due to length"

USER_ENTRY_START_HEADER: Final = "--- USER MESSAGE BEGIN ---\n"
USER_ENTRY_END_HEADER: Final = "--- USER MESSAGE END ---\n\n"
CONTEXT_ENTRY_START_HEADER: Final = "--- CONTEXT ENTRY BEGIN ---\n"
CONTEXT_ENTRY_END_HEADER: Final = "--- CONTEXT ENTRY END ---\n\n"

# Rust's str::trim removes Unicode White_Space; Python's str.strip() would also
# remove U+001C..U+001F, so the set is spelled out.
_RUST_WHITESPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                    "Sunday")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

# --------------------------------------------------------------------------- bytes


def utf8_len(s: str) -> int:
    return len(s.encode())


def truncate_safe(s: str, max_bytes: int) -> str:
    """The longest prefix of ``s`` of at most ``max_bytes`` UTF-8 bytes (whole characters)."""
    data = s.encode()
    if len(data) <= max_bytes:
        return s
    cut = max(max_bytes, 0)
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # inside a multi-byte character
        cut -= 1
    return data[:cut].decode()


def truncate_with_suffix(s: str, max_bytes: int, suffix: str = TRUNCATED_SUFFIX) -> str:
    """``s`` if it fits, else cut to ``max_bytes - len(suffix)`` plus ``suffix``.

    The result is never over ``max_bytes``: when even the suffix does not fit,
    it is the suffix cut to ``max_bytes``.
    """
    if utf8_len(s) <= max_bytes:
        return s
    room = max_bytes - utf8_len(suffix)
    if room < 0:
        return truncate_safe(suffix, max_bytes)
    return truncate_safe(s, room) + suffix


# --------------------------------------------------------------------------- time


@functools.cache
def _zone(utc_offset_minutes: int) -> timezone:
    return timezone(timedelta(minutes=utc_offset_minutes))


def format_timestamp(ms: int, utc_offset_minutes: int = 0) -> str:
    """RFC 3339 with milliseconds and a numeric offset (chrono's ``Millis, use_z=false``)."""
    when = (_EPOCH + timedelta(milliseconds=ms)).astimezone(_zone(utc_offset_minutes))
    return when.isoformat(timespec="milliseconds")


def parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text)


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch (sub-millisecond digits are dropped)."""
    delta = parse_timestamp(text) - _EPOCH
    return delta // timedelta(milliseconds=1)


# --------------------------------------------------------------------------- context


def env_context(os: str, cwd: str) -> UserEnvContext:
    """The environment context of a user message; the cwd is cut to 256 bytes."""
    if not os and not cwd:
        return UserEnvContext(None)
    return UserEnvContext(EnvState(
        os or None, truncate_safe(cwd, MAX_CURRENT_WORKING_DIRECTORY_LEN) if cwd else None,
    ))


def content_with_context(message: UserMessage) -> str:
    """The text Q CLI sends for a user message: time context, extra context, the prompt.

    The prompt is wrapped in user-message markers only when something precedes
    it; the whole string is trimmed.
    """
    content = ""
    if message.timestamp is not None:
        ts = parse_timestamp(message.timestamp)
        weekday = _WEEKDAYS[ts.weekday()]
        stamp = ts.isoformat(timespec="milliseconds")  # "+00:00", never "Z", like chrono
        content += (f"{CONTEXT_ENTRY_START_HEADER}Current time: {weekday}, {stamp}\n"
                    f"{CONTEXT_ENTRY_END_HEADER}")
    if message.additional_context:
        content += message.additional_context + "\n"
    prompt = message.prompt()
    if prompt is not None:
        if content:
            content += f"{USER_ENTRY_START_HEADER}{prompt}{USER_ENTRY_END_HEADER}"
        else:
            content += prompt
    return content.strip(_RUST_WHITESPACE)


# --------------------------------------------------------------------------- tool results


def json_text(value: Any) -> str:
    """``serde_json::to_string``: compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def block_text(block: ToolUseResultBlock) -> str:
    return block.text if isinstance(block, TextBlock) else json_text(block.value)


def _fair_cap(sizes: Sequence[int], budget: int) -> int | None:
    """The largest per-block cap c with sum(min(size, c)) <= budget; None if all fit."""
    if sum(sizes) <= budget:
        return None
    remaining, left = max(budget, 0), len(sizes)
    for size in sorted(sizes):
        share = remaining // left
        if size > share:
            return share
        remaining -= size
        left -= 1
    return None  # unreachable: the sizes did not all fit


def truncate_tool_use_results(results: Sequence[ToolUseResult], max_bytes: int,
                              suffix: str = TRUNCATED_SUFFIX) -> tuple[ToolUseResult, ...]:
    """Cut result blocks so their texts total at most ``max_bytes``, max-min fairly.

    Blocks that fit under the fair cap stay as they are; larger ones are cut to
    the cap (a cut JSON block becomes text, as in Q CLI). No results, no blocks
    or a zero budget are fine.
    """
    texts = [[block_text(b) for b in r.content] for r in results]
    cap = _fair_cap([utf8_len(t) for ts in texts for t in ts], max_bytes)
    if cap is None:
        return tuple(results)
    out = []
    for result, ts in zip(results, texts, strict=True):
        blocks: list[ToolUseResultBlock] = []
        for block, text in zip(result.content, ts, strict=True):
            if utf8_len(text) <= cap:
                blocks.append(block)
            else:
                blocks.append(TextBlock(truncate_with_suffix(text, cap, suffix)))
        out.append(attrs.evolve(result, content=tuple(blocks)))
    return tuple(out)


def truncate_content(content: UserMessageContent, max_bytes: int,
                     suffix: str = TRUNCATED_SUFFIX) -> UserMessageContent:
    """Q CLI's ``truncate_safe`` of a message content: a prompt gets the whole budget,
    a cancelled tool use with a prompt splits it 50/50 with its results (a side
    that needs less leaves the rest to the other)."""
    if isinstance(content, Prompt):
        return Prompt(truncate_with_suffix(content.prompt, max_bytes, suffix))
    if isinstance(content, CancelledToolUses):
        if content.prompt is None:
            return attrs.evolve(content, tool_use_results=truncate_tool_use_results(
                content.tool_use_results, max_bytes, suffix))
        if content_size(content) <= max_bytes:
            return content
        # 50/50, but what one side does not need, the other gets.
        rest = content_size(ToolUseResults(content.tool_use_results))
        prompt = truncate_with_suffix(content.prompt, max(max_bytes // 2, max_bytes - rest),
                                      suffix)
        return CancelledToolUses(prompt, truncate_tool_use_results(
            content.tool_use_results, max_bytes - utf8_len(prompt), suffix))
    return ToolUseResults(truncate_tool_use_results(content.tool_use_results, max_bytes, suffix))


def content_size(content: UserMessageContent) -> int:
    """Bytes the truncation budget counts: the prompt and every result block's text."""
    size = 0
    if not isinstance(content, ToolUseResults) and content.prompt is not None:
        size += utf8_len(content.prompt)
    if not isinstance(content, Prompt):
        size += sum(utf8_len(block_text(b)) for r in content.tool_use_results
                    for b in r.content)
    return size


def truncate_user_message(message: UserMessage,
                          max_bytes: int = MAX_USER_MESSAGE_SIZE) -> UserMessage:
    return attrs.evolve(message, content=truncate_content(message.content, max_bytes))


def replace_content_with_tool_use_results(message: UserMessage) -> UserMessage:
    """Tool results become a plain prompt: block texts joined with spaces, cut to
    400,000 bytes, ``<tool result redacted>`` when empty. A prompt is unchanged.

    Unlike Q CLI, a cancelled tool use's typed prompt is kept (before the results).
    """
    content = message.content
    if isinstance(content, Prompt):
        return message
    text = " ".join(block_text(b) for r in content.tool_use_results for b in r.content)
    if not text:
        text = REDACTED_TOOL_RESULT
    if isinstance(content, CancelledToolUses) and content.prompt:
        text = f"{content.prompt} {text}"
    return attrs.evolve(message, content=Prompt(truncate_safe(text, MAX_USER_MESSAGE_SIZE)))


# --------------------------------------------------------------------------- conversions


@attrs.frozen
class UserInputMessageContext:
    env_state: EnvState | None = None
    tool_results: tuple[ToolUseResult, ...] | None = None
    tools: tuple[ToolSpec, ...] | None = None


@attrs.frozen
class UserInputMessage:
    """What the backend receives for one user turn."""

    content: str
    user_input_message_context: UserInputMessageContext
    images: tuple[dict[str, Any], ...] | None = None
    model_id: str | None = None


def _sorted_tools(tools: Mapping[str, Sequence[ToolSpec]]) -> tuple[ToolSpec, ...] | None:
    if not tools:
        return None
    every = [t for group in tools.values() for t in group]
    # Q CLI sends the 'code' tool first, then the rest by name.
    return tuple(sorted(every, key=lambda t: (t.name != "code", t.name)))


def into_history_entry(message: UserMessage, model_id: str | None = None) -> UserInputMessage:
    """The message as stored in the backend's history: no tool specifications."""
    return UserInputMessage(
        content_with_context(message),
        UserInputMessageContext(message.env_context.env_state, message.tool_use_results(), None),
        message.images, model_id,
    )


def into_user_input_message(message: UserMessage, model_id: str | None = None,
                            tools: Mapping[str, Sequence[ToolSpec]] | None = None,
                            ) -> UserInputMessage:
    """The message as sent for this turn: with the tool specifications."""
    return UserInputMessage(
        content_with_context(message),
        UserInputMessageContext(message.env_context.env_state, message.tool_use_results(),
                                _sorted_tools(tools or {})),
        message.images, model_id,
    )


# --------------------------------------------------------------------------- summaries

SUMMARY_CONTEXT_INTRO: Final = (
    "This summary contains ALL relevant information from our previous conversation "
    "including tool uses, results, code analysis, and file operations. YOU MUST reference "
    "this information when answering questions and explicitly acknowledge specific details "
    "from the summary when they're relevant to the current question.\n\n"
)
SUMMARY_ACKNOWLEDGEMENT: Final = (
    "I will fully incorporate this information when generating my responses, and explicitly "
    "acknowledge relevant parts of the summary when answering questions."
)
ROLLED_SUMMARY_INTRO: Final = (
    "This summary contains ALL relevant information from our previous conversation "
    "including tool uses, results, code analysis, and file operations. YOU MUST be sure to "
    "include this information when creating your summarization document.\n\n"
)
# convlog's own wording; Q CLI reads its prompt from a file that is not reproduced here.
COMPACTION_PROMPT: Final = (
    "{{CUSTOM_INSTRUCTION}}\n"
    "[SYSTEM NOTE: This is an automated summarization request, not from the user]\n\n"
    "Summarize the conversation so far as a document that lets the conversation continue "
    "without it: the user's goals, decisions made, files and tools used with their results, "
    "open questions and the request currently being worked on."
)


def summary_context(summary: str, context_files: Mapping[str, str] | None = None,
                    ) -> tuple[str, str]:
    """The synthetic (user, assistant) pair that carries the summary (and context files)."""
    text = (f"{CONTEXT_ENTRY_START_HEADER}{SUMMARY_CONTEXT_INTRO}SUMMARY CONTENT:\n{summary}\n"
            f"{CONTEXT_ENTRY_END_HEADER}")
    return text + context_files_block(context_files), SUMMARY_ACKNOWLEDGEMENT


def context_files_block(context_files: Mapping[str, str] | None) -> str:
    if not context_files:
        return ""
    body = "".join(f"[{path}]\n{content}\n" for path, content in context_files.items())
    return f"{CONTEXT_ENTRY_START_HEADER}{body}{CONTEXT_ENTRY_END_HEADER}"


def compaction_request_text(previous_summary: str | None,
                            custom_instruction: str | None = None) -> str:
    """The prompt that asks for a summary; a previous summary is rolled forward into it."""
    custom = f"IMPORTANT CUSTOM INSTRUCTION: {custom_instruction}\n\n" if custom_instruction else ""
    text = COMPACTION_PROMPT.replace("{{CUSTOM_INSTRUCTION}}\n", custom)
    if previous_summary is not None:
        text += (f"\n\n{CONTEXT_ENTRY_START_HEADER}{ROLLED_SUMMARY_INTRO}SUMMARY CONTENT:\n"
                 f"{previous_summary}\n{CONTEXT_ENTRY_END_HEADER}")
    return text


def as_json_blocks(blocks: Sequence[ToolUseResultBlock]) -> list[Any]:
    """Blocks in Q CLI's JSON form (``{"Text": ...}`` / ``{"Json": ...}``)."""
    return [{"Text": b.text} if isinstance(b, TextBlock) else {"Json": b.value} for b in blocks]


def blocks_from_json(data: Sequence[Any]) -> tuple[ToolUseResultBlock, ...]:
    out: list[ToolUseResultBlock] = []
    for item in data:
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"a tool result block is {{'Text': ...}} or {{'Json': ...}}, "
                             f"not {item!r}")
        (kind, value), = item.items()
        if kind == "Text" and isinstance(value, str):
            out.append(TextBlock(value))
        elif kind == "Json":
            out.append(JsonBlock(value))
        else:
            raise ValueError(f"unknown tool result block {kind!r}")
    return tuple(out)
