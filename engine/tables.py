"""Transition tables: the only place that says which state changes are legal.

Each table maps (current state, event type) to the next state. ``absent`` is the
state of an entity that does not exist yet. A row may narrow the failure kinds it
accepts (``kinds``). The tables are declared with their entity (its rules and its
evolve beside them) in :mod:`engine.messages` and :mod:`engine.conversation`;
this module gathers them, and every list below is derived from those
declarations. ``docs/transitions.md`` is generated from them.
"""

from __future__ import annotations

from typing import Final

from engine import conversation as _conversation
from engine import events as ev
from engine import mailbox as _mailbox
from engine import messages as _messages
from engine.decider import ABSENT, Row, Table
from engine.events import tag_of
from engine.messages import (
    ABORT_LIKE,
    NEEDS_OPEN_MESSAGE,
    NEVER_RAN,
    PART_KIND,
    PART_TABLE,
    UNSETTLED,
)

__all__ = [
    "ABORT_LIKE", "ABSENT", "CHECKPOINT", "CONTEXT_FILE", "CONVERSATION", "CONVERSATION_TABLE",
    "IMPORT", "MESSAGE", "NEEDS_OPEN_MESSAGE", "NEVER_RAN", "PART", "PART_KIND", "PART_TABLE",
    "STEP", "STREAM", "TABLES", "TANGENT", "TITLE", "TOOL", "UNSETTLED", "Row", "Table", "all_rows",
    "render_markdown",
]

MESSAGE: Final = _messages.MESSAGE.table
STREAM: Final = _messages.STREAM.table
TOOL: Final = _messages.TOOL.table
STEP: Final = _messages.STEP.table
PART: Final = _messages.PART.table
CONVERSATION: Final = _conversation.CONVERSATION.table
TANGENT: Final = _conversation.TANGENT.table
CONTEXT_FILE: Final = _conversation.CONTEXT_FILE.table
CHECKPOINT: Final = _conversation.CHECKPOINT.table
IMPORT: Final = _conversation.IMPORT.table
TITLE: Final = _conversation.TITLE.table

TABLES: Final[tuple[Table, ...]] = (
    *(entity.table for entity in _messages.ENTITIES),
    *(entity.table for entity in _conversation.ENTITIES),
    *(entity.table for entity in _mailbox.ENTITIES),
)

# Which table decides each conversation event.
CONVERSATION_TABLE: Final[dict[type[ev.Event], Table]] = {
    cls: entity.table for cls, entity in _conversation.ENTITY_OF.items()
}


def all_rows() -> list[tuple[Table, Row]]:
    return [(t, r) for t in TABLES for r in t.rows]


def render_markdown() -> str:
    """docs/transitions.md, generated from the tables above."""
    out = [
        "# Transition tables",
        "",
        "Generated from the entity declarations (`engine/messages.py`,",
        "`engine/conversation.py`) by `python -m engine.docgen`; a test fails when",
        "this file is stale. `absent` is the state of an entity that does not exist yet.",
        "An event with no row from the current state raises `IllegalTransition` and the",
        "log stays unchanged. Repeating the event that entered the current state, with an",
        "identical payload, is accepted as a no-op.",
        "",
    ]
    for table in TABLES:
        out += [f"## {table.entity}", "", table.summary, ""]
        out += ["| from | event | to | only kinds | note |", "|---|---|---|---|---|"]
        for row in table.rows:
            kinds = ", ".join(sorted(row.kinds)) if row.kinds else ""
            out.append(f"| {row.source} | `{row.tag}` | {row.target} | {kinds} | {row.note} |")
        out += ["", f"Terminal states: {', '.join(table.terminal) or 'none'}.", ""]
    tags = sorted(tag_of(e) for e in NEEDS_OPEN_MESSAGE)
    out += [
        "## Context rules",
        "",
        "These events need their message in state `open`: " + ", ".join(f"`{t}`" for t in tags)
        + ".",
        "",
    ]
    return "\n".join(out)

