"""Hypothesis strategies for Anthropic raw stream events (plain dicts, as over SSE)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

JSON = dict[str, Any]

# Text that stresses splitting: multi-byte, astral, combining characters, newlines.
TEXT = st.text(alphabet=st.sampled_from(list("ab \n{}\"\\é日本語🙂\u0301\u200d")) | st.characters(
    exclude_categories=["Cs"]), max_size=40)
KEYS = st.text(alphabet=st.sampled_from(list("abcxyz_é🙂")), min_size=1, max_size=6)
SCALARS = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | TEXT
           | st.sampled_from([0.5, -1.25, 1e-7, 3.0e20]))
INPUTS = st.dictionaries(KEYS, st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8), max_size=4)


@st.composite
def splits(draw: st.DrawFn, text: str, *, allow_empty: bool = True) -> list[str]:
    """``text`` cut into fragments (maybe at every character), with empty fragments."""
    if text and draw(st.integers(0, 4)) == 0:
        pieces = list(text)  # split at every position
    else:
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
        pieces, last = [], 0
        for cut in cuts:
            pieces.append(text[last:cut])
            last = cut
        pieces.append(text[last:])
    if not allow_empty:
        pieces = [p for p in pieces if p]
    return pieces


@st.composite
def block_events(draw: st.DrawFn, index: int) -> list[JSON]:
    kind = draw(st.sampled_from(["text", "text", "thinking", "redacted", "tool", "tool"]))
    out: list[JSON] = []

    def delta(d: JSON) -> None:
        out.append({"type": "content_block_delta", "index": index, "delta": d})

    if kind == "text":
        out.append({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}})
        for piece in draw(splits(draw(TEXT))):
            delta({"type": "text_delta", "text": piece})
    elif kind == "thinking":
        out.append({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        for piece in draw(splits(draw(TEXT))):
            delta({"type": "thinking_delta", "thinking": piece})
        for sig in draw(st.lists(st.text("abcXYZ0123=+/", min_size=1, max_size=12),
                                 max_size=2)):
            delta({"type": "signature_delta", "signature": sig})
    elif kind == "redacted":
        out.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "redacted_thinking", "data": draw(st.text("abcXYZ019", min_size=1))}})
    else:
        tool_input: JSON = draw(INPUTS)
        raw = json.dumps(tool_input, ensure_ascii=draw(st.booleans()))
        out.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": f"toolu_{index:02d}{draw(st.text('abc123', max_size=4))}",
            "name": draw(st.sampled_from(["read", "write", "bash", "grep_é"])), "input": {}}})
        send_empty: bool = draw(st.booleans())  # an empty input may send no fragment
        if tool_input or send_empty:
            for piece in draw(splits(raw)):
                delta({"type": "input_json_delta", "partial_json": piece})
    out.append({"type": "content_block_stop", "index": index})
    return out


@st.composite
def anthropic_streams(draw: st.DrawFn, max_blocks: int = 6) -> list[JSON]:
    usage: JSON = {"input_tokens": draw(st.integers(0, 10**6)), "output_tokens": 1}
    if draw(st.booleans()):
        usage["cache_read_input_tokens"] = draw(st.integers(0, 1000))
        usage["cache_creation_input_tokens"] = draw(st.integers(0, 1000))
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}]
    n = draw(st.integers(0, max_blocks))
    for index in range(n):
        events += draw(block_events(index))
        if draw(st.integers(0, 5)) == 0:
            events.append({"type": "ping"})
    final: JSON = {"output_tokens": draw(st.integers(0, 10**5))}
    if draw(st.booleans()):
        final["input_tokens"] = draw(st.integers(0, 10**6))
    if draw(st.booleans()):
        final["cache_read_input_tokens"] = draw(st.integers(0, 1000))
    has_tools = any(e.get("content_block", {}).get("type") == "tool_use" for e in events)
    reason = "tool_use" if has_tools else draw(st.sampled_from(["end_turn", "max_tokens",
                                                                "stop_sequence"]))
    events.append({"type": "message_delta", "delta": {"stop_reason": reason,
                                                      "stop_sequence": None}, "usage": final})
    events.append({"type": "message_stop"})
    return events
