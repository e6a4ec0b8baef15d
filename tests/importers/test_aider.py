"""aider: runs as sessions, input, replies and quoted output; secrets redacted; ^C aborts."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.codec import encode_json
from engine.importers.aider import NOT_UTF8, REDACTED, plan_aider, redact
from engine.importers.base import ImportInputError
from engine.importers.detect import detect
from engine.importers.write import write_plan
from projections import views as v
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

HISTORY = FIXTURES / "aider" / ".aider.chat.history.md"
SECRETS = ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "sk-proj-ZZZZZZZZZZZZZZZZZZZZZZZZ",
           "sk-abcdefghijklmnopqrstuvwx")


def texts(messages: list[v.WithParts]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, v.TextPart)]


def test_runs_inputs_replies_and_output() -> None:
    assert detect(HISTORY) == "aider"
    plan = plan_aider(HISTORY)
    store = written(plan)
    assert len(plan.sessions) == 2
    first = at(store, plan.sessions[0].id).messages()
    assert "add a --verbose flag to cli.py\nand document it" in texts(first)
    reply = next(m for m in first if m.info.role == "assistant")
    assert ">>>>>>> REPLACE" in reply.parts[0].text  # type: ignore[union-attr]
    assert isinstance(reply.parts[1], v.TextPart)
    assert reply.parts[1].synthetic
    cut = first[-1].info
    assert isinstance(cut, v.AssistantInfo)
    assert cut.error is not None
    assert cut.error.kind == "aborted"


def test_the_launch_command_line_is_redacted_everywhere() -> None:
    plan = plan_aider(HISTORY)
    store = written(plan)
    assert plan.report.redactions == 3
    stored = b"".join(encode_json(e) for s in plan.sessions for e in store.read(s.id))
    for secret in SECRETS:
        assert secret.encode() not in stored
    assert REDACTED.encode() in stored
    assert "redacted 3 secret(s)" in plan.report.render()


@given(st.sampled_from(["--api-key", "--openai-api-key", "--anthropic-api-key=",
                        "OPENAI_API_KEY=", "token:", "Authorization: Bearer"]),
       st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
               min_size=20, max_size=60))
def test_key_shaped_values_never_survive(flag: str, value: str) -> None:
    sep = "" if flag.endswith(("=", ":")) else " "
    text, n = redact(f"aider {flag}{sep}{value} --model x")
    assert value not in text
    assert n >= 1


@given(st.sampled_from(["Invalid --api-key format: {}", "Invalid --api-key format: nvidia={}",
                        "Invalid --set-env format: NVIDIA_NIM={}", "aider --api-key {}",
                        "aider --api-key openrouter={} --model x", "GROQ_API_KEY={}"]),
       st.text(st.characters(blacklist_categories=("Z", "C")), min_size=12, max_size=60))
def test_a_key_aider_echoes_in_its_own_messages_never_survives(template: str,
                                                               key: str) -> None:
    """aider prints a malformed --api-key or --set-env whole ("Invalid --api-key format:
    <value>", aider/main.py): a key of any shape, not only a known prefix, is hidden."""
    text, n = redact(template.format(key))
    assert key not in text
    assert n >= 1


@pytest.mark.parametrize("line", [
    "aider --model gemini/gemini-2.5-pro --thinking-tokens 32k",
    "aider --map-tokens 1024 --max-chat-history-tokens 2000",
    "- DEEPSEEK_API_KEY: Not set",
    "Tokens: 2.3k sent, 512 received.",
])
def test_counts_of_tokens_and_unset_keys_are_kept(line: str) -> None:
    """Over-redaction loses what the user typed: a token count is no token."""
    assert redact(line) == (line, 0)


@given(st.sampled_from(["nvapi-", "gsk_"]),
       st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
               min_size=20, max_size=60))
def test_more_provider_key_shapes_never_survive(prefix: str, rest: str) -> None:
    text, _ = redact(f"> Model: x with key {prefix}{rest} in the env")
    assert prefix + rest not in text


def test_reimport_is_idempotent() -> None:
    store = written(plan_aider(HISTORY))
    again = plan_aider(HISTORY)
    write_plan(store, again)
    assert again.report.written == 0


def test_not_an_aider_history(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("just notes\n")
    with pytest.raises(ImportInputError, match="aider chat started"):
        plan_aider(path)


def test_the_banner_names_the_tool_version() -> None:
    plan = plan_aider(FIXTURES / "aider" / ".aider.chat.history.md")
    store = written(plan)
    head = next(iter(store.read(plan.sessions[0].id)))
    assert isinstance(head, ev.SessionImported)
    assert head.tool_version == "0.82.2"
    assert head.source == ".aider.chat.history.md"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data(), st.text(st.characters(min_codepoint=0xA0, max_codepoint=0xBF), min_size=1,
                          max_size=12))
def test_a_line_in_another_encoding_reads_with_replacement_characters(
        tmp_path: Path, data: st.DataObject, word: str) -> None:
    """aider writes the history in its --encoding (io.py: ``open("a", encoding=...,
    errors="ignore")``): a Latin-1 line among UTF-8 ones is read with U+FFFD for its
    undecodable bytes and reported; the rest of the history imports as before."""
    lines = HISTORY.read_bytes().splitlines(keepends=True)
    n = data.draw(st.sampled_from([i for i, x in enumerate(lines) if x.startswith(b"#### ")]))
    lines[n] = b"#### " + f"order a {word} please".encode("latin-1") + b"\n"
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / HISTORY.name
    path.write_bytes(b"".join(lines))
    plan = plan_aider(path)
    store = written(plan)
    assert plan.report.unmapped[NOT_UTF8].lines == [n + 1]
    stored = [t for s in plan.sessions for t in texts(at(store, s.id).messages())]
    # Latin-1 0xA0-0xBF are lone UTF-8 continuation bytes: one U+FFFD each.
    assert any(f"order a {chr(0xFFFD) * len(word)} please" in t for t in stored)
    for i, raw in enumerate(lines):  # every other input line is there, unchanged
        if i != n and raw.startswith(b"#### ") and raw.strip() != b"####":
            assert any(raw[5:].decode().strip() in t for t in stored)


def test_a_run_that_restores_the_history_continues_the_session(tmp_path: Path) -> None:
    """``--restore-chat-history`` ('Restored previous conversation history.' in the run's
    header) goes on with the conversation: one session, the second prompt after the
    first answer; a run without it is a session of its own."""
    def run(at: str, prompt: str, answer: str, restored: bool) -> str:
        note = "> Restored previous conversation history.  \n" if restored else ""
        return (f"\n# aider chat started at {at}\n\n> Aider v0.86.2  \n{note}\n"
                f"#### {prompt}  \n\n{answer}\n\n> Tokens: 1.0k sent, 22 received.  \n")
    history = tmp_path / ".aider.chat.history.md"
    history.write_text(run("2026-11-28 11:58:50", "one", "Answer one.", False)
                       + run("2026-11-28 11:59:13", "two", "Answer two.", True)
                       + run("2026-11-28 11:59:40", "three", "Answer three.", False))
    plan = plan_aider(history)
    assert len(plan.sessions) == 2
    store = written(plan)
    said = [t for t in texts(at(store, plan.sessions[0].id).messages())
            if not t.startswith("Aider") and "Tokens" not in t and "Restored" not in t]
    assert said == ["one", "Answer one.", "two", "Answer two."]
    assert "three" in texts(at(store, plan.sessions[1].id).messages())
    assert "continues the session before it" in plan.report.render()
