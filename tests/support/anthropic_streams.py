"""Hypothesis strategies for Anthropic raw stream events (plain dicts, as over SSE).

Block shapes follow the ``anthropic`` SDK's types: text (with citations of every
kind, in the start block and as ``citations_delta``), thinking, redacted
thinking, client ``tool_use``, ``server_tool_use`` followed by its result block
(web search, web fetch, code execution, bash, tool search; results or error
objects), ``container_upload``, and with ``beta=True`` ``mcp_tool_use`` /
``mcp_tool_result``, which only the beta types know.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

JSON = dict[str, Any]

# Text that stresses splitting: multi-byte, astral, combining characters, newlines.
TEXT = st.text(alphabet=st.sampled_from(list("ab \n{}\"\\é日本語🙂\u0301\u200d")) | st.characters(
    exclude_categories=["Cs"]), max_size=40)
SHORT = st.text(alphabet=st.sampled_from(list("ab é日🙂")), max_size=8)
TOKEN = st.text("abcXYZ019_", min_size=1, max_size=10)
KEYS = st.text(alphabet=st.sampled_from(list("abcxyz_é🙂")), min_size=1, max_size=6)
SCALARS = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | TEXT
           | st.sampled_from([0.5, -1.25, 1e-7, 3.0e20]))
INPUTS = st.dictionaries(KEYS, st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8), max_size=4)
URLS = st.builds("https://{}.example/{}".format, TOKEN, SHORT)


def _optional(draw: st.DrawFn, block: JSON, key: str, value: st.SearchStrategy[Any]) -> None:
    """An optional field: absent, null, or a value (the API may send either of the first two)."""
    choice = draw(st.integers(0, 2))
    if choice:
        block[key] = draw(value) if choice == 2 else None


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
def citations(draw: st.DrawFn) -> JSON:
    """One citation of a kind the SDK knows (``TextCitation``)."""
    kind = draw(st.sampled_from(["char_location", "page_location", "content_block_location",
                                 "web_search_result_location", "search_result_location"]))
    c: JSON = {"type": kind, "cited_text": draw(TEXT)}
    first = draw(st.integers(0, 50))
    last = first + draw(st.integers(1, 5))
    if kind in ("char_location", "page_location", "content_block_location"):
        c["document_index"] = draw(st.integers(0, 3))
        c["document_title"] = draw(st.none() | SHORT)
        _optional(draw, c, "file_id", st.builds("file_{}".format, TOKEN))
        unit = {"char_location": "char", "page_location": "page",
                "content_block_location": "block"}[kind]
        suffix = "number" if unit == "page" else "index"
        c[f"start_{unit}_{suffix}"], c[f"end_{unit}_{suffix}"] = first, last
    elif kind == "web_search_result_location":
        c.update(url=draw(URLS), title=draw(st.none() | SHORT), encrypted_index=draw(TOKEN))
    else:
        c.update(source=draw(URLS), title=draw(st.none() | SHORT),
                 search_result_index=draw(st.integers(0, 3)), start_block_index=first,
                 end_block_index=last)
    return c


def _caller(draw: st.DrawFn, block: JSON) -> None:
    """Rarely, who called the tool (programmatic tool calling)."""
    if draw(st.integers(0, 3)) == 0:
        block["caller"] = draw(st.sampled_from([
            {"type": "direct"}, {"type": "code_execution_20250825", "tool_id": "srvtoolu_cx"},
            {"type": "code_execution_20260120", "tool_id": "srvtoolu_cy"}]))


@st.composite
def server_result(draw: st.DrawFn, name: str) -> tuple[str, Any]:
    """(result block type, content) of a server tool, or its error object."""
    kind = {"web_search": "web_search_tool_result", "web_fetch": "web_fetch_tool_result",
            "code_execution": "code_execution_tool_result",
            "bash_code_execution": "bash_code_execution_tool_result",
            "tool_search_tool_regex": "tool_search_tool_result"}[name]
    if draw(st.integers(0, 4)) == 0:
        codes = ["unavailable", "too_many_requests", "invalid_tool_input"]
        code = draw(st.sampled_from([*codes, "max_uses_exceeded"] if name.startswith("web_")
                                    else codes))
        return kind, {"type": f"{kind}_error", "error_code": code}
    if name == "web_search":
        results = []
        for _ in range(draw(st.integers(0, 3))):
            r: JSON = {"type": "web_search_result", "url": draw(URLS), "title": draw(SHORT),
                       "encrypted_content": draw(TOKEN)}
            _optional(draw, r, "page_age", st.sampled_from(["April 30, 2025", "2 days ago"]))
            results.append(r)
        return kind, results
    if name == "web_fetch":
        doc: JSON = {"type": "document", "source": {
            "type": "text", "media_type": "text/plain", "data": draw(TEXT)}}
        _optional(draw, doc, "title", SHORT)
        _optional(draw, doc, "citations", st.builds(dict, enabled=st.booleans()))
        fetched: JSON = {"type": "web_fetch_result", "url": draw(URLS), "content": doc}
        _optional(draw, fetched, "retrieved_at", st.just("2025-08-25T10:30:02Z"))
        return kind, fetched
    if name == "tool_search_tool_regex":
        refs = [{"type": "tool_reference", "tool_name": n}
                for n in draw(st.lists(TOKEN, max_size=3))]
        return kind, {"type": "tool_search_tool_search_result", "tool_references": refs}
    output = "bash_code_execution_output" if name.startswith("bash") else "code_execution_output"
    return kind, {"type": kind.replace("_tool_result", "_result"), "stdout": draw(TEXT),
                  "stderr": draw(SHORT), "return_code": draw(st.sampled_from([0, 1, 127])),
                  "content": [{"type": output, "file_id": f"file_{t}"}
                              for t in draw(st.lists(TOKEN, max_size=2))]}


SERVER_INPUTS = {"web_search": "query", "web_fetch": "url", "code_execution": "code",
                 "bash_code_execution": "command", "tool_search_tool_regex": "pattern"}


@st.composite
def block_events(draw: st.DrawFn, index: int, *, beta: bool = False) -> list[JSON]:
    """The events of one content block, or of a server tool call and its result (2 indexes)."""
    kinds = ["text", "text", "cited", "thinking", "redacted", "tool", "tool", "server", "upload"]
    kind = draw(st.sampled_from([*kinds, "mcp"] if beta else kinds))
    out: list[JSON] = []

    def start(block: JSON, at: int = index) -> None:
        out.append({"type": "content_block_start", "index": at, "content_block": block})

    def delta(d: JSON, at: int = index) -> None:
        out.append({"type": "content_block_delta", "index": at, "delta": d})

    def stop(at: int = index) -> None:
        out.append({"type": "content_block_stop", "index": at})

    def tool_input(tool_input: JSON) -> None:
        raw = json.dumps(tool_input, ensure_ascii=draw(st.booleans()))
        send_empty: bool = draw(st.booleans())  # an empty input may send no fragment
        if tool_input or send_empty:
            for piece in draw(splits(raw)):
                delta({"type": "input_json_delta", "partial_json": piece})

    if kind == "text":
        start({"type": "text", "text": ""})
        for piece in draw(splits(draw(TEXT))):
            delta({"type": "text_delta", "text": piece})
    elif kind == "cited":
        block: JSON = {"type": "text", "text": ""}
        _optional(draw, block, "citations", st.lists(citations(), max_size=2))
        start(block)
        deltas: list[JSON] = [{"type": "text_delta", "text": p}
                              for p in draw(splits(draw(TEXT)))]
        for c in draw(st.lists(citations(), max_size=3)):
            deltas.insert(draw(st.integers(0, len(deltas))), {"type": "citations_delta",
                                                              "citation": c})
        for d in deltas:
            delta(d)
    elif kind == "thinking":
        start({"type": "thinking", "thinking": "", "signature": ""})
        for piece in draw(splits(draw(TEXT))):
            delta({"type": "thinking_delta", "thinking": piece})
        for sig in draw(st.lists(st.text("abcXYZ0123=+/", min_size=1, max_size=12),
                                 max_size=2)):
            delta({"type": "signature_delta", "signature": sig})
    elif kind == "redacted":
        start({"type": "redacted_thinking", "data": draw(st.text("abcXYZ019", min_size=1))})
    elif kind == "tool":
        block = {"type": "tool_use", "name": draw(st.sampled_from(["read", "write", "bash",
                                                                   "grep_é"])),
                 "id": f"toolu_{index:02d}{draw(st.text('abc123', max_size=4))}", "input": {}}
        _caller(draw, block)
        start(block)
        tool_input(draw(INPUTS))
    elif kind == "upload":
        start({"type": "container_upload", "file_id": f"file_{draw(TOKEN)}"})
    elif kind == "server":
        name = draw(st.sampled_from(sorted(SERVER_INPUTS)))
        call_id = f"srvtoolu_{index:02d}{draw(st.text('abc123', max_size=4))}"
        block = {"type": "server_tool_use", "id": call_id, "name": name, "input": {}}
        _caller(draw, block)
        start(block)
        tool_input({SERVER_INPUTS[name]: draw(TEXT)})
        stop()
        # Mostly answered; a paused turn ends without the result, rarely it answers no call.
        answer = draw(st.sampled_from(["result"] * 6 + ["none", "orphan"]))
        if answer == "none":
            return out
        rtype, content = draw(server_result(name))
        result: JSON = {"type": rtype, "tool_use_id": call_id if answer == "result"
                        else "srvtoolu_unknown", "content": content}
        if rtype in ("web_search_tool_result", "web_fetch_tool_result"):
            _caller(draw, result)
        start(result, index + 1)
        stop(index + 1)
        return out
    else:  # mcp (beta)
        call_id = f"mcptoolu_{index:02d}"
        start({"type": "mcp_tool_use", "id": call_id, "name": draw(st.sampled_from(
            ["echo", "search"])), "server_name": draw(st.sampled_from(["deepwiki", "é"])),
            "input": {}})
        tool_input(draw(INPUTS))
        stop()
        texts = st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2)
        start({"type": "mcp_tool_result", "tool_use_id": call_id, "is_error": draw(
            st.booleans()), "content": draw(TEXT | texts)}, index + 1)
        stop(index + 1)
        return out
    stop()
    return out


def _counts(draw: st.DrawFn, usage: JSON, keys: tuple[str, ...], top: int) -> None:
    """Optional usage counts: absent, null or a number (0 included), as the API may send."""
    for key in keys:
        choice = draw(st.integers(0, 3))
        if choice:
            usage[key] = None if choice == 1 else draw(st.integers(0, top))


@st.composite
def cut_tool(draw: st.DrawFn, index: int) -> list[JSON]:
    """A tool call whose arguments a token limit cut short (the block still stops)."""
    raw = json.dumps(draw(INPUTS.filter(bool)), ensure_ascii=draw(st.booleans()))
    cut = raw[: draw(st.integers(1, len(raw) - 1))]
    out: list[JSON] = [{"type": "content_block_start", "index": index, "content_block": {
        "type": "tool_use", "id": f"toolu_{index:02d}cut", "name": "write", "input": {}}}]
    out += [{"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": piece}}
            for piece in draw(splits(cut))]
    out.append({"type": "content_block_stop", "index": index})
    return out


@st.composite
def anthropic_streams(draw: st.DrawFn, max_blocks: int = 6, *, beta: bool = False
                      ) -> list[JSON]:
    """A valid stream. Its envelope varies as the API's does: message ids, usage counts
    absent, null or 0, stop sequences and details; rarely a token limit cuts a tool call."""
    usage: JSON = {"input_tokens": draw(st.integers(0, 10**6)), "output_tokens": 1}
    _counts(draw, usage, ("cache_read_input_tokens", "cache_creation_input_tokens"), 1000)
    if draw(st.integers(0, 3)) == 0:
        usage["service_tier"] = draw(st.sampled_from(["standard", "priority", None]))
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": f"msg_01{draw(TOKEN)}", "type": "message", "role": "assistant",
        "model": "claude-test", "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage}}]
    index = 0
    for _ in range(draw(st.integers(0, max_blocks))):
        block = draw(block_events(index, beta=beta))
        events += block
        index = max(e["index"] for e in block) + 1
        if draw(st.integers(0, 5)) == 0:
            events.append({"type": "ping"})
    cut = draw(st.integers(0, 4)) == 0
    if cut:
        events += draw(cut_tool(index))
    final: JSON = {"output_tokens": draw(st.integers(0, 10**5))}
    _counts(draw, final, ("input_tokens",), 10**6)
    _counts(draw, final, ("cache_read_input_tokens", "cache_creation_input_tokens"), 1000)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    calls = {b["id"] for b in starts if b["type"] in ("server_tool_use", "mcp_tool_use")}
    if calls:
        final["server_tool_use"] = {"web_search_requests": draw(st.integers(0, 3)),
                                    "web_fetch_requests": draw(st.integers(0, 3))}
    unanswered = calls - {b.get("tool_use_id") for b in starts}
    if cut:
        reason = "max_tokens"
    elif any(b["type"] == "tool_use" for b in starts):
        reason = "tool_use"
    elif unanswered:  # the server paused the turn before the tool's result
        reason = draw(st.sampled_from(["pause_turn", "pause_turn", "max_tokens"]))
    elif calls:  # a server tool needs no client result: the turn usually just ends
        reason = draw(st.sampled_from(["end_turn", "end_turn", "pause_turn", "max_tokens"]))
    else:
        reason = draw(st.sampled_from(["end_turn", "max_tokens", "stop_sequence"]))
    delta: JSON = {"stop_reason": reason, "stop_sequence": draw(st.sampled_from(
        ["###", "\n\nHuman:", "終"])) if reason == "stop_sequence" else None}
    if draw(st.integers(0, 4)) == 0:
        delta["stop_details"] = None
    events.append({"type": "message_delta", "delta": delta, "usage": final})
    events.append({"type": "message_stop"})
    return events
