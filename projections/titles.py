"""A session's title as lists show it: the name its tool recorded, else its first prompt.

The name is the latest ``session.titled`` event (a ``/rename`` after a generated
title wins); a session without one (a live convlog session, a tool that records no
name) is shown by its first prompt, on one line. A pure fold: events in, text out.
"""

from __future__ import annotations

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
            self.title, self.source = e.title, e.source
        elif self.first_prompt:
            return
        elif isinstance(e, ev.MessageStarted) and e.role == "user":
            self._users.add(e.message_id)
        elif (isinstance(e, ev.TextAdded) and e.message_id in self._users
              and not e.synthetic and e.text.strip()):
            self.first_prompt = one_line(e.text)

    def apply_all(self, events: Iterable[Event]) -> TitleFold:
        for e in events:
            self.apply(e)
        return self

    def shown(self) -> tuple[str, str]:
        """(title, source): the recorded name, else the first prompt, else ("", "")."""
        if self.title:
            return self.title, self.source
        return (self.first_prompt, FIRST_PROMPT) if self.first_prompt else ("", "")


def one_line(text: str) -> str:
    """``text`` as one line of at most ``_WIDTH`` characters (whitespace runs collapsed)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _WIDTH else flat[:_WIDTH - 1] + "…"
