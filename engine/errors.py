"""Typed errors. Every rejection leaves the log exactly as it was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final


class ConvlogError(Exception):
    """Base class of every error convlog raises on purpose."""

    # Position (from 1) of the offending event in a raw batch, when known.
    batch_index: int | None = None


class EventDecodeError(ConvlogError):
    """Bytes or a dict that are not a valid event (unknown type, missing or mistyped field)."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"invalid event{where}: {message}")


# The business rules of the part / ToolState seed (docs: "Part abstraction and
# ToolState", section 5), quoted in English next to their codes. An error names
# the code (``PartValidationError.rule``) and quotes the rule, so it reads on its own.
BUSINESS_RULES: Final[dict[str, str]] = {
    "BR-01": "every part must have an id, a sessionID and a messageID",
    "BR-02": "a part's id must be unique within its message",
    "BR-03": "a part's type field discriminates its kind and must be a string literal",
    "BR-04": "sessionID and messageID must be valid UUIDs",
    "BR-05": "a tool's state moves in order: pending -> running -> (completed | error)",
    "BR-06": "the pending state must keep the raw call arguments in its raw field",
    "BR-07": "the running state's time.start records when the tool started",
    "BR-08": "the completed and error states' time.end records when the tool ended",
    "BR-09": "the completed state's output must not be an empty string",
    "BR-10": "the error state's error field must describe the error",
    "BR-11": "a user message's summary is only produced when the context is compacted",
    "BR-12": "an assistant message's cost comes from the provider's response",
    "BR-13": "an assistant message's tokens hold input, output, reasoning and cache counts",
    "BR-14": "an assistant message's time.completed is set when the message completes",
}


class PartValidationError(ConvlogError):
    """An event breaks a business rule of the seed (BR-01..BR-14) or a field constraint.

    ``rule`` is the code (``BR-09``) or, for a constraint the seed does not number,
    the field it is about (``callID``, ``summary``).
    """

    def __init__(
        self, rule: str, message: str, *, event_id: str = "", event_type: str = ""
    ) -> None:
        self.rule = rule
        self.event_id = event_id
        self.event_type = event_type
        quoted = BUSINESS_RULES.get(rule)
        why = f" (rule {rule}: {quoted})" if quoted else ""
        super().__init__(f"{rule}: {message}{why}")


# A tool's table states as the seed's ToolState statuses: the approval states are all
# ``pending`` and a compacted output is ``completed`` (the tool table's own summary).
TOOL_STATUS: Final[dict[str, str]] = {
    "awaiting-approval": "pending", "approved": "pending", "compacted": "completed",
}


class IllegalTransition(ConvlogError):
    """An event that the transition tables do not allow from the entity's current state.

    The seed (part-abstraction-toolstate, section 6.2) names this error
    ``InvalidStateTransition`` (:attr:`name`, and the alias of that name) and gives its
    details as ``currentStatus``, ``attemptedStatus`` and ``validTransitions``
    (:attr:`details`).
    """

    name: Final = "InvalidStateTransition"

    def __init__(
        self,
        *,
        entity: str,
        session_id: str,
        message_id: str | None,
        part_id: str | None,
        current: str,
        attempted: str,
        event_type: str,
        valid: Sequence[str],
        valid_events: Sequence[str],
        reason: str = "",
        event_id: str = "",
    ) -> None:
        self.entity = entity
        self.session_id = session_id
        self.message_id = message_id
        self.part_id = part_id
        self.current = current
        self.attempted = attempted
        self.event_type = event_type
        self.valid = tuple(valid)
        self.valid_events = tuple(valid_events)
        self.reason = reason
        self.event_id = event_id
        super().__init__(self._render())

    def _render(self) -> str:
        ids = [f"message {self.message_id}"] if self.message_id else []
        if self.part_id:
            ids.append(f"part {self.part_id}")
        where = " ".join(ids) if ids else f"session {self.session_id}"
        who = where if where.startswith(self.entity) else f"{self.entity} {where}"
        valid = ", ".join(self.valid) if self.valid else "none (terminal)"
        events = f" via {', '.join(self.valid_events)}" if self.valid_events else ""
        why = f": {self.reason}" if self.reason else ""
        return (
            f"illegal {self.event_type} on {who}: state is '{self.current}', "
            f"attempted '{self.attempted}'; valid next states: {valid}{events}{why}"
        )

    @property
    def details(self) -> dict[str, object]:
        """The seed's ``InvalidStateTransitionError.details``. For a tool, the states are
        its ToolState statuses (``awaiting-approval`` is ``pending``), each valid status
        once; for any other entity, its table's states."""
        status = TOOL_STATUS if self.entity == "tool" else {}
        valid = [status.get(s, s) for s in self.valid]
        return {
            "currentStatus": status.get(self.current, self.current),
            "attemptedStatus": " | ".join(status.get(a, a) for a in self.attempted.split(" | ")),
            "validTransitions": list(dict.fromkeys(valid)),
        }

    def to_seed(self) -> dict[str, object]:
        """The error as the seed's ``InvalidStateTransitionError``: name, message, details."""
        return {"name": self.name, "message": str(self), "details": self.details}

    def as_dict(self) -> dict[str, object]:
        return {
            "entity": self.entity,
            "session_id": self.session_id,
            "message_id": self.message_id,
            "part_id": self.part_id,
            "current": self.current,
            "attempted": self.attempted,
            "event_type": self.event_type,
            "valid": list(self.valid),
            "valid_events": list(self.valid_events),
            "reason": self.reason,
            "event_id": self.event_id,
        }


InvalidStateTransition = IllegalTransition  # the seed's name (section 6.1)


class ConcurrencyError(ConvlogError):
    """Optimistic concurrency: the session's version is not the one the writer expected.

    ``expected`` is an exact version or a stream state name (``no_stream``,
    ``stream_exists``); ``actual`` is the version the log is at.
    """

    def __init__(self, session_id: str, expected: int | str, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {session_id}: expected version {expected}, but the log is at {actual} "
            "(another writer appended first; nothing of this batch was written, so it is "
            "safe to reread the session and retry)"
        )


class DuplicateEventId(ConvlogError):
    """An event id that already names a different event."""

    def __init__(self, event_id: str, where: str) -> None:
        self.event_id = event_id
        super().__init__(f"event id {event_id} is already used by {where}")


class UnknownSession(ConvlogError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r} in this store")


class SessionExists(ConvlogError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} already exists")


class SessionClosed(ConvlogError):
    """An integration's session object was closed (``ConvlogSession.close()``) and used again."""


class NotRecorded(ConvlogError):
    """An SDK call a recording client cannot record (it would pass unrecorded): refused
    before anything is sent, naming the call that records it."""


class StoreError(ConvlogError):
    """A store URL that cannot be opened, or a store in a state it cannot work with."""


class InvalidId(ConvlogError, ValueError):
    """A session or event id a store cannot take: empty, too long, or with characters
    outside ``[A-Za-z0-9._:@+=-]`` (path separators, ``..``, quotes, SQL metacharacters)."""

    def __init__(self, kind: str, value: str, reason: str) -> None:
        self.kind = kind
        self.value = value
        super().__init__(f"invalid {kind} id {value[:80]!r}: {reason}")


class InvalidArgument(ConvlogError, ValueError, TypeError):
    """A Python API call with an argument of the wrong type or out of range (a str
    where a ModelInfo belongs, None for a path, a fork point past the log). Nothing
    was written. Also a ValueError and a TypeError, for callers that catch those."""

    def __init__(self, call: str, reason: str) -> None:
        self.call = call
        self.reason = reason
        super().__init__(f"{call}: invalid argument: {reason}")


class BadBatch(ConvlogError, ValueError):
    """A batch a store refuses as a whole: seqs out of order, another session's event,
    an event over the size limit. Nothing was written."""


class EventTooLarge(BadBatch):
    def __init__(self, event_id: str, size: int, limit: int) -> None:
        self.event_id = event_id
        self.size = size
        self.limit = limit
        super().__init__(f"event {event_id} encodes to {size} bytes, over the limit of {limit}")


class PartialDuplicate(DuplicateEventId):
    """A retried batch of which only some events are stored: neither a retry nor new events."""

    def __init__(self, session_id: str, stored: Sequence[str], new: Sequence[str]) -> None:
        self.session_id = session_id
        self.stored = tuple(stored)
        self.new = tuple(new)
        ConvlogError.__init__(
            self,
            f"batch for session {session_id} overlaps the log: {len(self.stored)} event(s) "
            f"already stored (first {self.stored[0]}), {len(self.new)} new (first "
            f"{self.new[0]}); retry the exact batch or send only new events",
        )
        self.event_id = self.stored[0]


class UnknownSchemaVersion(ConvlogError):
    """An event written at a schema version this engine does not know (newer than it
    writes, or an old version without an upcaster)."""

    def __init__(self, event_type: str, version: int, current: int, event_id: str = "") -> None:
        self.event_type = event_type
        self.version = version
        self.current = current
        self.event_id = event_id
        why = ("newer than this engine" if version > current
               else "no upcaster is registered for it")
        super().__init__(
            f"{event_type} version {version} is not supported ({why}; this engine writes "
            f"and reads version {current})"
        )


class StoreBusy(StoreError):
    """Another writer held the store's write lock longer than this one would wait
    (a long batched window, a bulk import): nothing was written, try again."""


class CorruptLog(StoreError):
    """Stored bytes that fail verification: a broken hash chain, a gap, undecodable data."""

    def __init__(self, session_id: str, seq: int, reason: str) -> None:
        self.session_id = session_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"session {session_id} seq {seq}: {reason}")


class StoreNotFound(StoreError):
    """A read found no store at the URL (reads never create one)."""


class StoreUnreadable(StoreError):
    """A store whose files cannot be read at all (not a database, unreadable format file)."""


class ReadOnlyStore(StoreError):
    """A write to a store this process may only read (its files or directory are not
    writable): refused before anything is written."""


class KeyRequired(StoreError):
    """A keyed (HMAC) store checked without its key: its hashes cannot be recomputed, which
    says nothing about tampering."""


class EventIdConflict(DuplicateEventId):
    """An event id already stored in this session's history with different content.

    A retry must send the same event again (what the log stamps, ``seq`` and
    ``session_id``, and the envelope fields a writer left empty do not count); a
    changed event needs a new id. Nothing was written. A subclass of
    :class:`DuplicateEventId`, so handlers of that keep catching it.
    """

    def __init__(self, event_id: str, session_id: str, seq: int, field: str = "") -> None:
        self.event_id = event_id
        self.session_id = session_id
        self.seq = seq
        self.field = field
        differs = f" (first difference: {field})" if field else ""
        ConvlogError.__init__(
            self,
            f"event id {event_id} is already stored at session {session_id} seq {seq} "
            f"with different content{differs}; a retry must send the same event, a new "
            "event needs a new id",
        )


class InvalidEvent(BadBatch):
    """An event the door refuses before anything is written: a field of the wrong type,
    a value outside its vocabulary (a ``Literal``), an integer outside the signed 64-bit
    range, a non-finite float, a string with a lone surrogate, JSON nested deeper than
    the limit. ``path`` names the field (``$.kind``, ``$.input.a[3]``)."""

    def __init__(self, event_type: str, event_id: str, path: str, reason: str) -> None:
        self.event_type = event_type
        self.event_id = event_id
        self.path = path
        self.reason = reason
        # The id and path are the caller's data (a key may hold a newline, a path be
        # 400 levels deep): the message shows them as one short line; the attributes
        # keep them whole.
        ConvlogError.__init__(self, f"invalid {event_type} event "
                                    f"{_one_line(event_id, 80) or '(no id)'} "
                                    f"at {_one_line(path, 120)}: {reason}")


def _one_line(text: str, limit: int) -> str:
    """``text`` as it may stand in a one-line message: control characters escaped and
    the middle of a long text cut."""
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}...({len(text) - 2 * keep} characters)...{text[-keep:]}"
