"""A session's title as lists show it: the name its tool recorded, else its first prompt.

The name is the latest ``session.titled`` event (a ``/rename`` after a generated
title wins); a session without one (a live convlog session, a tool that records no
name) is shown by its first prompt, on one line. A pure fold: events in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import attrs

from engine import events as ev
from engine.events import Event

FIRST_PROMPT: Final = "first prompt"  # the source shown for a title made from the prompt
_WIDTH: Final = 80  # characters of a prompt shown as a title


@attrs.define
class TitleFold:
    """Folds a session's events (its whole lineage, for a fork) into its title."""

    title: str = ""  # the latest session.titled's title
    source: str = ""  # ... and where it came from
    first_prompt: str = ""
    _users: set[str] = attrs.field(factory=set)

    def apply(self, e: Event) -> None:
        if isinstance(e, ev.SessionTitled):
            if e.title.strip():  # a blank name hides neither the one before nor the prompt
                self.title, self.source = e.title, e.source
        elif self.first_prompt:
            return
        elif isinstance(e, ev.MessageStarted) and e.role == "user":
            self._users.add(e.message_id)
        elif (isinstance(e, ev.TextAdded) and e.message_id in self._users
              and not e.synthetic and not e.ignored):
            self.first_prompt = prompt_text(e.text)

    def apply_all(self, events: Iterable[Event]) -> TitleFold:
        for e in events:
            self.apply(e)
        return self

    def shown(self, width: int = _WIDTH) -> tuple[str, str]:
        """(title, source): the recorded name, else the first prompt, else ("", ""); as
        one line of at most ``width`` characters."""
        if self.title:
            return one_line(self.title, width), self.source
        if self.first_prompt:
            return one_line(self.first_prompt, width), FIRST_PROMPT
        return "", ""


def one_line(text: str, width: int = _WIDTH) -> str:
    """``text`` as one line (whitespace runs, line breaks too, collapsed), cut at
    ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


# A tool's own wrapping around a prompt: Claude Code's <command-name>/init</command-name>,
# Codex's <environment_context> block sent as the first user message.
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_CONTEXT = re.compile(r"\s*<(environment_context|user_instructions|system-reminder)>")


def prompt_text(text: str) -> str:
    """What a person typed: a context block the tool sent is no prompt ("") and a
    tool's tags go."""
    if _CONTEXT.match(text):
        return ""
    return " ".join(_TAG.sub(" ", text).split(" ")).strip()
