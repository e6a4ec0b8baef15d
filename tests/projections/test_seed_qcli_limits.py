"""The Q CLI seeds' limits at their real values: exactly at the limit, one below, one above.

qcli-message-structure.ja.md 7.2 / 9: ``MAX_USER_MESSAGE_SIZE`` 400,000 bytes, cut at a
UTF-8 boundary with the suffix ``...content truncated due to length``.
qcli-conversation-state.ja.md 3.1 / 5.1 / 5.3 / 14.1: history and transcript hold at most
10,000 entries; beyond, the oldest go first (FIFO).
The other tests of these rules use small caps; these use the defaults.
"""

from __future__ import annotations

import pytest

from projections.qcli import as_sent
from projections.qcli import messages as m
from projections.qcli.limits import MAX_CONVERSATION_STATE_HISTORY_LEN, MAX_TRANSCRIPT_LEN
from tests.support.qcli_helpers import Convo

SUFFIX = "...content truncated due to length"


def prompt_message(text: str) -> m.UserMessage:
    return m.UserMessage("", m.UserEnvContext(), m.Prompt(text))


def test_the_constants_are_the_seeds() -> None:
    assert as_sent.MAX_USER_MESSAGE_SIZE == 400_000
    assert as_sent.MAX_CURRENT_WORKING_DIRECTORY_LEN == 256
    assert as_sent.TRUNCATED_SUFFIX == SUFFIX
    assert MAX_CONVERSATION_STATE_HISTORY_LEN == MAX_TRANSCRIPT_LEN == 10_000
    assert m.REDACTED_TOOL_RESULT == "<tool result redacted>"
    assert (as_sent.USER_ENTRY_START_HEADER, as_sent.USER_ENTRY_END_HEADER) == (
        "--- USER MESSAGE BEGIN ---\n", "--- USER MESSAGE END ---\n\n")
    assert (as_sent.CONTEXT_ENTRY_START_HEADER, as_sent.CONTEXT_ENTRY_END_HEADER) == (
        "--- CONTEXT ENTRY BEGIN ---\n", "--- CONTEXT ENTRY END ---\n\n")


@pytest.mark.parametrize("size", [399_999, 400_000])
def test_a_prompt_at_or_under_400000_bytes_is_untouched(size: int) -> None:
    text = "a" * size
    assert as_sent.truncate_user_message(prompt_message(text)).content == m.Prompt(text)


def test_a_prompt_one_byte_over_is_cut_to_400000_with_the_suffix() -> None:
    cut = as_sent.truncate_user_message(prompt_message("a" * 400_001)).content
    assert isinstance(cut, m.Prompt)
    assert len(cut.prompt.encode()) == 400_000
    assert cut.prompt == "a" * (400_000 - len(SUFFIX)) + SUFFIX


def test_a_multibyte_prompt_is_cut_at_a_character_boundary() -> None:
    # 400,001 bytes: "é" (2 bytes) would straddle the cut, so it goes whole.
    cut = as_sent.truncate_user_message(prompt_message("a" + "é" * 200_000)).content
    assert isinstance(cut, m.Prompt)
    size = len(cut.prompt.encode())
    assert 400_000 - 1 <= size <= 400_000
    assert cut.prompt.endswith(SUFFIX)
    assert cut.prompt.removesuffix(SUFFIX).endswith("é")


def test_history_and_transcript_keep_exactly_10000_entries_fifo() -> None:
    c = Convo()  # the default caps
    for i in range(5_000):  # a turn is one history entry and two transcript lines
        c.turn(f"q{i}", f"a{i}")
    assert len(c.state.history) == 5_000
    assert len(c.state.transcript) == 10_000  # exactly at the limit: nothing dropped
    assert c.state.transcript[0] == "> q0"
    c.turn("q5000", "a5000")
    assert c.state.transcript[0] == "> q1"  # one turn over: the oldest two lines went
    assert len(c.state.transcript) == 10_000
    for i in range(5_001, 10_000):
        c.turn(f"q{i}", f"a{i}")
    history = c.state.history
    assert len(history) == 10_000  # exactly at the limit: nothing dropped
    assert history[0].user.prompt() == "q0"
    c.turn("q10000", "a10000")
    history = c.state.history
    assert len(history) == 10_000  # one over: the oldest went
    assert [history[0].user.prompt(), history[-1].user.prompt()] == ["q1", "q10000"]
