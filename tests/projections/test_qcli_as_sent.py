"""Q CLI message rendering, byte for byte: content_with_context, truncation, conversions."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.qcli import as_sent as r
from projections.qcli import messages as m

FRIDAY = "2018-01-26T12:30:09.453-07:00"  # Q CLI's own test timestamp
ENV = m.UserEnvContext(m.EnvState("linux", "/repo"))
CTX_START, CTX_END = r.CONTEXT_ENTRY_START_HEADER, r.CONTEXT_ENTRY_END_HEADER


def user(content: m.UserMessageContent, *, timestamp: str | None = None,
         extra: str = "") -> m.UserMessage:
    return m.UserMessage(extra, ENV, content, timestamp)


def results(*blocks: tuple[str, m.ToolUseResultBlock]) -> tuple[m.ToolUseResult, ...]:
    return tuple(m.ToolUseResult(i, (b,), "Success") for i, b in blocks)


# --------------------------------------------------------------------------- content_with_context


def test_a_bare_prompt_has_no_markers() -> None:
    assert r.content_with_context(user(m.Prompt("hello world"))) == "hello world"


def test_timestamp_context_and_markers_exactly() -> None:
    got = r.content_with_context(user(m.Prompt("hello world"), timestamp=FRIDAY))
    assert got == (
        "--- CONTEXT ENTRY BEGIN ---\n"
        "Current time: Friday, 2018-01-26T12:30:09.453-07:00\n"
        "--- CONTEXT ENTRY END ---\n\n"
        "--- USER MESSAGE BEGIN ---\n"
        "hello world--- USER MESSAGE END ---"  # Q CLI puts no newline before the end marker
    )


def test_additional_context_alone_wraps_the_prompt() -> None:
    got = r.content_with_context(user(m.Prompt("hi"), extra="hook output"))
    assert got == "hook output\n--- USER MESSAGE BEGIN ---\nhi--- USER MESSAGE END ---"


def test_timestamp_then_additional_context_then_prompt() -> None:
    got = r.content_with_context(user(m.Prompt("hi"), timestamp=FRIDAY, extra="ctx"))
    assert got == (f"{CTX_START}Current time: Friday, {FRIDAY}\n{CTX_END}ctx\n"
                   "--- USER MESSAGE BEGIN ---\nhi--- USER MESSAGE END ---")


def test_tool_results_render_only_their_context() -> None:
    msg = user(m.ToolUseResults(results(("t1", m.TextBlock("ok")))), timestamp=FRIDAY)
    assert r.content_with_context(msg) == (
        f"{CTX_START}Current time: Friday, {FRIDAY}\n--- CONTEXT ENTRY END ---")
    assert r.content_with_context(user(m.ToolUseResults(()))) == ""


def test_utc_and_sub_millisecond_timestamps_render_like_chrono() -> None:
    # 2026-03-04 is a Wednesday; microseconds are cut, Z becomes +00:00.
    got = r.content_with_context(user(m.Prompt("x"), timestamp="2026-03-04T20:04:36.117492Z"))
    assert "Current time: Wednesday, 2026-03-04T20:04:36.117+00:00\n" in got
    assert r.format_timestamp(1_700_000_000_123) == "2023-11-14T22:13:20.123+00:00"
    assert r.format_timestamp(1_700_000_000_123, -420) == "2023-11-14T15:13:20.123-07:00"
    assert r.timestamp_ms("2023-11-14T15:13:20.123-07:00") == 1_700_000_000_123


def test_trim_is_rusts_trim() -> None:
    assert r.content_with_context(user(m.Prompt("  \n hi \t\n"))) == "hi"
    # U+001C is whitespace to Python's strip() but not to Rust's trim().
    assert r.content_with_context(user(m.Prompt("\x1chi\x1c"))) == "\x1chi\x1c"
    assert r.content_with_context(user(m.Prompt("\u3000hi\u00a0"))) == "hi"


def test_cancelled_tool_uses_render_their_prompt() -> None:
    msg = user(m.CancelledToolUses("stop", (m.cancelled_result("t1"),)), extra="x")
    assert r.content_with_context(msg) == (
        "x\n--- USER MESSAGE BEGIN ---\nstop--- USER MESSAGE END ---")


# --------------------------------------------------------------------------- truncation


def test_truncate_safe_like_q_cli() -> None:
    assert r.truncate_safe("Hello World", 5) == "Hello"
    assert r.truncate_safe("Hello ", 5) == "Hello"
    assert r.truncate_safe("Hello World", 11) == "Hello World"
    assert r.truncate_safe("Hello World", 15) == "Hello World"
    assert r.truncate_safe("aé", 2) == "a"  # é is two bytes: never half a character
    assert r.truncate_safe("🙂🙂", 7) == "🙂"
    assert r.truncate_safe("abc", 0) == ""


def test_truncate_with_suffix() -> None:
    suffix = r.TRUNCATED_SUFFIX
    assert len(suffix.encode()) == 34
    cut = r.truncate_with_suffix("x" * 100, 40)
    assert cut == "xxxxxx" + suffix
    assert r.truncate_with_suffix("short", 40) == "short"
    # Even the suffix does not fit: the suffix itself is cut, never over the limit.
    assert r.truncate_with_suffix("x" * 100, 10) == suffix[:10]


def test_prompt_gets_the_whole_budget() -> None:
    got = r.truncate_content(m.Prompt("é" * 100), 100)
    assert isinstance(got, m.Prompt)
    assert got.prompt == "é" * 33 + r.TRUNCATED_SUFFIX  # 66 + 34 bytes
    assert len(got.prompt.encode()) == 100


def test_cancelled_tool_uses_with_a_prompt_split_50_50() -> None:
    content = m.CancelledToolUses("p" * 500, results(("t1", m.TextBlock("r" * 500))))
    got = r.truncate_content(content, 201)
    assert isinstance(got, m.CancelledToolUses)
    assert got.prompt is not None
    assert len(got.prompt) == 100
    block = got.tool_use_results[0].content[0]
    assert isinstance(block, m.TextBlock)
    assert len(block.text) == 101
    without_prompt = r.truncate_content(m.CancelledToolUses(None, content.tool_use_results), 201)
    assert r.content_size(without_prompt) == 201
    # A short prompt leaves its unused half to the results.
    short = r.truncate_content(m.CancelledToolUses("p", content.tool_use_results), 201)
    assert isinstance(short, m.CancelledToolUses)
    assert short.prompt == "p"
    assert r.content_size(short) == 201


def test_results_share_fairly_small_ones_stay_whole() -> None:
    small, big = m.TextBlock("s" * 10), m.TextBlock("b" * 1000)
    got = r.truncate_tool_use_results(results(("a", small), ("b", big)), 500)
    assert got[0].content == (small,)
    cut = got[1].content[0]
    assert isinstance(cut, m.TextBlock)
    assert len(cut.text) == 490
    assert cut.text.endswith(r.TRUNCATED_SUFFIX)


def test_zero_results_do_not_divide_by_zero() -> None:
    assert r.truncate_content(m.ToolUseResults(()), 100) == m.ToolUseResults(())
    empty = (m.ToolUseResult("t", (), "Success"),)
    assert r.truncate_tool_use_results(empty, 0) == empty


def test_a_cut_json_block_becomes_text_and_later_blocks_are_still_cut() -> None:
    # Q CLI returned early after the first cut JSON block, leaving later blocks too big.
    big_json = m.JsonBlock({"k": "v" * 300})
    big_text = m.TextBlock("t" * 300)
    small_json = m.JsonBlock({"a": 1})
    got = r.truncate_tool_use_results(
        (m.ToolUseResult("t1", (small_json, big_json), "Success"),
         m.ToolUseResult("t2", (big_text,), "Error")), 200)
    assert got[0].content[0] == small_json  # fits: stays JSON
    assert isinstance(got[0].content[1], m.TextBlock)
    assert got[0].content[1].text.startswith('{"k":"vvv')
    assert isinstance(got[1].content[0], m.TextBlock)
    assert len(got[1].content[0].text) <= 96
    assert got[1].status == "Error"
    assert sum(len(r.block_text(b).encode()) for x in got for b in x.content) <= 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12,
)
blocks = st.one_of(st.text(max_size=300).map(m.TextBlock), json_values.map(m.JsonBlock))
result_lists = st.lists(
    st.builds(m.ToolUseResult, st.text(min_size=1, max_size=5),
              st.lists(blocks, max_size=4).map(tuple), st.sampled_from(["Success", "Error"])),
    max_size=5,
).map(tuple)
contents = st.one_of(
    st.text(max_size=600).map(m.Prompt),
    st.builds(m.CancelledToolUses, st.none() | st.text(max_size=600), result_lists),
    result_lists.map(m.ToolUseResults),
)


def _size(x: Any) -> int:
    return len(x.encode("utf-8"))  # raises on invalid text (lone surrogates)


@settings(max_examples=300, deadline=None)
@given(contents, st.integers(min_value=0, max_value=700))
def test_truncation_is_valid_utf8_and_never_over_the_limit(content: m.UserMessageContent,
                                                           limit: int) -> None:
    got = r.truncate_content(content, limit)
    assert type(got) is type(content)
    assert r.content_size(got) <= max(r.content_size(content), 0)
    assert r.content_size(got) <= limit
    if isinstance(got, m.CancelledToolUses) and got.prompt is not None:
        others = r.content_size(m.ToolUseResults(got.tool_use_results))
        assert _size(got.prompt) <= max(limit // 2, limit - others)
    for res in got.tool_use_results if not isinstance(got, m.Prompt) else ():
        for b in res.content:
            if isinstance(b, m.TextBlock):
                _size(b.text)
    if r.content_size(content) <= limit:
        assert got == content  # nothing to cut: nothing changes


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=250))
def test_truncate_with_suffix_property(text: str, limit: int) -> None:
    got = r.truncate_with_suffix(text, limit)
    assert _size(got) <= limit
    if _size(text) <= limit:
        assert got == text
    elif limit >= _size(r.TRUNCATED_SUFFIX):
        assert got.endswith(r.TRUNCATED_SUFFIX)
        assert text.startswith(got.removesuffix(r.TRUNCATED_SUFFIX))


# --------------------------------------------------------------------------- conversions


def test_replace_content_with_tool_use_results() -> None:
    msg = user(m.ToolUseResults((
        m.ToolUseResult("t1", (m.TextBlock("a"), m.JsonBlock({"k": [1, "é"]})), "Success"),
        m.ToolUseResult("t2", (m.TextBlock("b"),), "Error"),
    )))
    got = r.replace_content_with_tool_use_results(msg)
    assert got.content == m.Prompt('a {"k":[1,"é"]} b')
    empty = user(m.ToolUseResults((m.ToolUseResult("t1", (), "Success"),)))
    assert r.replace_content_with_tool_use_results(empty).content == m.Prompt(
        "<tool result redacted>")
    # Two empty texts join to one space, which is not empty (as in Q CLI).
    two = user(m.ToolUseResults((m.ToolUseResult("t", (m.TextBlock(""), m.TextBlock("")),
                                                 "Success"),)))
    assert r.replace_content_with_tool_use_results(two).content == m.Prompt(" ")
    cancelled = user(m.CancelledToolUses("why", (m.cancelled_result("t1"),)))
    assert r.replace_content_with_tool_use_results(cancelled).content == m.Prompt(
        "why Tool use was cancelled by the user")
    prompt = user(m.Prompt("p"))
    assert r.replace_content_with_tool_use_results(prompt) is prompt


def test_replaced_results_are_cut_to_the_message_limit() -> None:
    huge = user(m.ToolUseResults(results(("t", m.TextBlock("é" * 300_000)))))
    got = r.replace_content_with_tool_use_results(huge).prompt()
    assert got is not None
    assert len(got.encode()) == r.MAX_USER_MESSAGE_SIZE


def test_cwd_is_cut_to_256_bytes_at_a_character_boundary() -> None:
    env = r.env_context("linux", "/" + "é" * 200)
    assert env.env_state is not None
    cwd = env.env_state.current_working_directory
    assert cwd is not None
    assert len(cwd.encode()) == 255
    assert cwd == "/" + "é" * 127
    assert r.env_context("", "") == m.UserEnvContext(None)


def test_history_entry_has_no_tool_specs_but_the_sent_message_does() -> None:
    tools = {"builtin": (m.ToolSpec("fs_write"), m.ToolSpec("code"), m.ToolSpec("fs_read"))}
    msg = user(m.ToolUseResults(results(("t1", m.TextBlock("ok")))))
    stored = r.into_history_entry(msg, "claude")
    sent = r.into_user_input_message(msg, "claude", tools)
    assert stored.user_input_message_context.tools is None
    assert sent.user_input_message_context.tools is not None
    assert [t.name for t in sent.user_input_message_context.tools] == ["code", "fs_read",
                                                                       "fs_write"]
    assert stored.content == sent.content == ""
    assert stored.user_input_message_context.tool_results == msg.tool_use_results()
    assert stored.model_id == "claude"
    assert stored.user_input_message_context.env_state == ENV.env_state
    assert r.into_user_input_message(msg, None, {}).user_input_message_context.tools is None


def test_summary_context_and_roll_forward_text() -> None:
    text, ack = r.summary_context("We fixed the parser.")
    assert text == (
        "--- CONTEXT ENTRY BEGIN ---\n"
        "This summary contains ALL relevant information from our previous conversation "
        "including tool uses, results, code analysis, and file operations. YOU MUST reference "
        "this information when answering questions and explicitly acknowledge specific details "
        "from the summary when they're relevant to the current question.\n\n"
        "SUMMARY CONTENT:\nWe fixed the parser.\n"
        "--- CONTEXT ENTRY END ---\n\n")
    assert ack.startswith("I will fully incorporate this information")
    first = r.compaction_request_text(None, "keep file names")
    assert first.startswith("IMPORTANT CUSTOM INSTRUCTION: keep file names\n\n[SYSTEM NOTE")
    assert "SUMMARY CONTENT" not in first
    second = r.compaction_request_text("We fixed the parser.")
    assert second.endswith("SUMMARY CONTENT:\nWe fixed the parser.\n--- CONTEXT ENTRY END ---\n\n")
    assert "YOU MUST be sure to include this information" in second
    files = r.context_files_block({"AGENTS.md": "be brief"})
    assert files == f"{CTX_START}[AGENTS.md]\nbe brief\n{CTX_END}"


def test_result_blocks_json_form() -> None:
    data: list[Any] = [{"Text": "a"}, {"Json": {"k": 1}}]
    assert r.as_json_blocks(r.blocks_from_json(data)) == data
    assert json.loads(json.dumps(data)) == data
