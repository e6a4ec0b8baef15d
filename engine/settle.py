"""Commands that settle a message: ``abort`` and ``expire``.

They are the only commands that expand into several events. Each is a pure
function of the lifecycle state and returns the events to append (without
envelope); the session stamps and checks them like any other event, so the
entity declarations stay the only judge.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine import events as ev
from engine.lifecycle import Lifecycle

ABORTED_TOOL_ERROR = "Tool execution aborted"


def abort(lc: Lifecycle, message_id: str, reason: str) -> list[ev.Event]:
    """Settle every unfinished part of the message, then complete it as aborted.

    Tools keep their real start time and partial output (the projection merges
    the running metadata); ``metadata.interrupted`` marks them.
    """
    return abort_parts(message_id, ((pid, part.kind) for pid, part in lc.unsettled(message_id)),
                       reason)


def abort_parts(message_id: str, unsettled: Iterable[tuple[str, str]], reason: str
                ) -> list[ev.Event]:
    """``abort`` for a message whose unsettled parts (part id, kind) are given: a writer
    that plans a batch knows parts the lifecycle has not seen yet."""
    out: list[ev.Event] = []
    for part_id, kind in unsettled:
        if kind == "tool":
            out.append(ev.ToolFailed(
                message_id=message_id, part_id=part_id, error=ABORTED_TOOL_ERROR,
                kind="aborted", metadata={"interrupted": True},
            ))
        else:
            out.append(ev.PartEnded(message_id=message_id, part_id=part_id))
    out.append(ev.MessageCompleted(
        message_id=message_id, error=ev.MessageError(kind="aborted", message=reason),
        finish="aborted",
    ))
    return out


def expire(lc: Lifecycle, now_ms: int) -> list[ev.ToolFailed]:
    """A timeout failure for every running tool whose deadline has passed."""
    out = []
    for message_id, msg in lc.messages.items():
        for part_id in msg.unsettled:
            part = msg.parts[part_id]
            if part.state == "running" and part.deadline is not None and part.deadline <= now_ms:
                out.append(ev.ToolFailed(
                    message_id=message_id, part_id=part_id, kind="timeout",
                    error=f"Tool execution timed out (deadline {part.deadline} ms)",
                    metadata={"deadline": part.deadline},
                ))
    return out
