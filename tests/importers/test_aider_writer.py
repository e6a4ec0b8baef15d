"""An aider history written by the rules of aider's own writer (aider/io.py
``append_chat_history``, ``user_input``, ``ai_output``, ``tool_output``; reasoning tags of
aider/reasoning_tags.py), on LF and on CRLF (Windows: aider writes in text mode)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.importers.aider import plan_aider
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

TAG = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"


class History:
    """Appends to a history file as aider's InputOutput does."""

    def __init__(self) -> None:
        self.text = ""

    def append(self, text: str, *, linebreak: bool = False, blockquote: bool = False) -> None:
        if blockquote:
            text = "> " + text.strip()
        if linebreak:
            text = text.rstrip() + "  \n"
        if not text.endswith("\n"):
            text += "\n"
        self.text += text

    def started(self, when: str) -> None:
        self.append(f"\n# aider chat started at {when}\n\n")

    def user_input(self, inp: str) -> None:
        lines = inp.splitlines() or ["<blank>"]
        self.append("\n#### " + "  \n#### ".join(lines), linebreak=True)

    def ai_output(self, content: str) -> None:
        self.append("\n" + content.strip() + "\n\n")

    def tool_output(self, message: str) -> None:
        self.append(message.strip(), linebreak=True, blockquote=True)


def history() -> str:
    h = History()
    h.started("2026-05-22 09:00:00")
    h.tool_output("Aider v0.86.1")
    h.user_input("explain the bug\nbriefly")
    h.ai_output(f"<{TAG}>\n\nThe loop is off by one.\n\n</{TAG}>\n\nThe loop starts at 1.")
    h.tool_output("Tokens: 2.0k sent, 40 received.\nCost: $0.01 message, $0.01 session.")
    h.user_input("")
    h.ai_output("<think>\nstill thinking when the user pressed")
    h.tool_output("^C KeyboardInterrupt")
    return h.text


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_history_as_aider_writes_it(tmp_path: Path, newline: str) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_bytes(history().replace("\n", newline).encode())
    plan = plan_aider(path)
    store = written(plan)
    assert plan.sessions[0].tool_version == "0.86.1"
    msgs = at(store, plan.sessions[0].id).messages()
    texts = [[(type(p).__name__, p.text) for p in m.parts
              if isinstance(p, v.TextPart | v.ReasoningPart)] for m in msgs]
    assert texts == [
        [("TextPart", "Aider v0.86.1")],
        [("TextPart", "explain the bug\nbriefly")],
        [("ReasoningPart", "The loop is off by one."), ("TextPart", "The loop starts at 1."),
         # Only the first line of a multi-line tool_output is quoted: the second is kept
         # with it, not taken for the reply.
         ("TextPart", "Tokens: 2.0k sent, 40 received.\nCost: $0.01 message, $0.01 session.")],
        [("TextPart", "<blank>")],
        [("ReasoningPart", "still thinking when the user pressed"),
         ("TextPart", "^C KeyboardInterrupt")],
    ]
    cut = msgs[-1].info
    assert isinstance(cut, v.AssistantInfo)
    assert cut.error is not None
    assert cut.error.kind == "aborted"
    quoted = [p for p in msgs[2].parts if isinstance(p, v.TextPart)][-1]
    assert quoted.synthetic
