"""Per-turn usage and tool usage of an Agents SDK session, folded from its log.

``AdvancedSQLiteSession`` keeps a ``turn_usage`` row per user turn (written by
``store_run_usage``) and counts tool calls per turn. Here a run's usage is a
``run.usage_recorded`` event naming the event that recorded its turn's user
message; the usage of a turn is the last such event for it, and it lasts as
long as the memory holds that turn (a pop that removes the turn, or a clear,
drops it, as the SDK deletes the row). As in the SDK, a branch's usage is what
was recorded on that branch: a fork shares its parent's events before the fork
point, but not the usage recorded there. Tool usage is read from the items the
memory holds, so a branch counts the calls of the turns it shares.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from engine import events as ev
from engine.integrations.openai_agents import ITEM_KEY
from projections.integrations.openai_agents import ItemsFold

# The item types the SDK counts as tool calls (named by their ``name``, else by type).
TOOL_CALLS: Final = frozenset({
    "function_call", "computer_call", "file_search_call", "web_search_call",
    "code_interpreter_call", "tool_search_call", "custom_tool_call", "mcp_call",
    "mcp_approval_request", "shell_call", "apply_patch_call"})
NAMED_BY_TYPE: Final = frozenset({
    "computer_call", "file_search_call", "web_search_call", "code_interpreter_call",
    "shell_call", "apply_patch_call"})


class UsageFold:
    """The last ``run.usage_recorded`` of each turn, recorded after ``own_from`` (pure)."""

    def __init__(self, own_from: int = 0) -> None:
        self.own_from = own_from  # a fork's first own seq: usage before it is the parent's
        self.by_turn: dict[str, ev.RunUsageRecorded] = {}

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.RunUsageRecorded) and e.memory == ITEM_KEY and e.seq >= self.own_from:
            self.by_turn.pop(e.turn, None)  # the latest report, in turn order below
            self.by_turn[e.turn] = e


def user_turns(items: ItemsFold) -> Iterator[tuple[int, str]]:
    """(turn number, the event that recorded its user message), in order."""
    n = 0
    for item, by in zip(items.items, items.recorded_by, strict=True):
        if isinstance(item, dict) and item.get("role") == "user":
            n += 1
            yield n, by


def turn_rows(items: ItemsFold, usage: UsageFold) -> list[dict[str, Any]]:
    """``get_turn_usage()``'s rows: the held turns with usage, by turn number."""
    rows: list[dict[str, Any]] = []
    for n, by in user_turns(items):
        e = usage.by_turn.get(by)
        if e is not None:
            details = e.details or {}
            rows.append({"user_turn_number": n, "requests": e.requests,
                         "input_tokens": e.tokens.input, "output_tokens": e.tokens.output,
                         "total_tokens": e.total,
                         "input_tokens_details": details.get("input_tokens_details"),
                         "output_tokens_details": details.get("output_tokens_details")})
    return rows


def tool_name(item: Any) -> str | None:
    kind = item.get("type")
    if kind in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label, name = item.get("server_label"), item.get("name")
        return f"{label}.{name}" if label and name else str(label or name or "") or None
    if kind in NAMED_BY_TYPE:
        return str(kind)
    if kind == "tool_search_call":
        return "tool_search"
    name, space = item.get("name"), item.get("namespace")
    if name is None:
        return None
    # A namespace qualifies the name, except the SDK's synthetic one (the name again).
    return f"{space}.{name}" if isinstance(space, str) and space and space != name else str(name)


def tool_rows(items: ItemsFold) -> list[tuple[str | None, int, int]]:
    """``get_tool_usage()``: (tool name, calls, turn number), by turn."""
    counts: dict[tuple[str | None, int], int] = {}
    searched: dict[int, int] = {}  # tool search outputs per turn
    turn = 0
    for item in items.items:
        if not isinstance(item, dict):
            continue
        if item.get("role") == "user":
            turn += 1
        elif item.get("type") in TOOL_CALLS:
            key = (tool_name(item), turn)
            counts[key] = counts.get(key, 0) + 1
        elif item.get("type") == "tool_search_output":
            searched[turn] = searched.get(turn, 0) + 1
    for t, n in searched.items():  # outputs count as searches in a turn with no search call
        if ("tool_search", t) not in counts:
            counts[("tool_search", t)] = n
    return sorted(((name, n, t) for (name, t), n in counts.items()), key=lambda r: r[2])


def total(rows: list[dict[str, Any]]) -> dict[str, int] | None:
    """``get_session_usage()``'s sums over turn rows; None without any."""
    if not rows:
        return None
    return {"requests": sum(r["requests"] for r in rows),
            "input_tokens": sum(r["input_tokens"] for r in rows),
            "output_tokens": sum(r["output_tokens"] for r in rows),
            "total_tokens": sum(r["total_tokens"] for r in rows),
            "total_turns": len(rows)}
