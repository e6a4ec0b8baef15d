"""The seed's ``PartValidator`` (part-abstraction-toolstate, section 4.3) over the JSON form.

``validate_part(part)`` checks one part, as JSON (what a reader of WithParts gets) or as
a view, against the seed's field tables (section 3) and its part rules: BR-01 (ids
present), BR-03 (``type`` a known string literal), BR-04 (UUID session and message
ids), BR-06..BR-10 (the ToolState fields). ``validate_message`` adds BR-02 (part ids
unique within the message) and the message info's field tables (section 3.8/3.9):
a user's ``agent`` and ``model``, an assistant's ``cost`` (BR-12), ``tokens`` (BR-13:
input, output, reasoning and cache), ``agent`` and ``path``, and ``time.completed``
never before ``time.created`` (BR-14).

A model or a path the log never recorded is left out of the projection rather than
invented (``{"providerID": ""}`` would claim a provider), so such a message reports
``MissingRequiredField`` for it: the seed's own handling of a missing required field
is to log it and return undefined.

A problem is reported, never raised, and names the seed's error type (section 6.1):
``MissingRequiredField`` for a required field that is absent (the seed "returns
undefined" for it), ``PartValidationError`` for a field that is present but breaks a
rule. The write side raises ``engine.errors.PartValidationError`` before an event that
would produce such a part enters the log; this module is the independent check of
what the projection shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeGuard

import attrs

from engine.ids import is_uuid
from projections import views as v
from projections.json import to_json_obj

JSON = dict[str, Any]
ErrorType = Literal["MissingRequiredField", "PartValidationError"]

# The part types the seed names, and OpenCode's other part kinds the projection shows.
SEED_PART_TYPES: Final = frozenset({"text", "reasoning", "tool", "step-start", "step-finish",
                                    "file"})
PART_TYPES: Final = SEED_PART_TYPES | {"snapshot", "patch", "agent", "subtask", "retry",
                                       "compaction"}
TOOL_STATUSES: Final = ("pending", "running", "completed", "error")


@attrs.frozen
class Problem:
    error: ErrorType
    rule: str  # a BR code, or the field's name for a field table the rules do not number
    field: str  # a dotted path: "state.time.end"
    message: str


@attrs.frozen
class ValidationResult:
    problems: tuple[Problem, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------- type guards


def is_text_part(part: v.Part) -> TypeGuard[v.TextPart]:
    return isinstance(part, v.TextPart)


def is_reasoning_part(part: v.Part) -> TypeGuard[v.ReasoningPart]:
    return isinstance(part, v.ReasoningPart)


def is_tool_part(part: v.Part) -> TypeGuard[v.ToolPart]:
    return isinstance(part, v.ToolPart)


def is_step_start_part(part: v.Part) -> TypeGuard[v.StepStartPart]:
    return isinstance(part, v.StepStartPart)


def is_step_finish_part(part: v.Part) -> TypeGuard[v.StepFinishPart]:
    return isinstance(part, v.StepFinishPart)


# --------------------------------------------------------------------------- checks


class _Check:
    """Collects the problems of one object; each ``need``/``may`` checks one field."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def bad(self, rule: str, field: str, message: str) -> None:
        self.problems.append(Problem("PartValidationError", rule, field, message))

    def need(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], rule: str,
             where: str = "") -> Any:
        """A required field: absent is MissingRequiredField, mistyped is a validation error."""
        path = f"{where}{key}"
        if key not in obj or obj[key] is None:
            self.problems.append(Problem("MissingRequiredField", rule, path,
                                         f"{path} is required"))
            return None
        return self.may(obj, key, kind, rule, where)

    def may(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], rule: str,
            where: str = "") -> Any:
        """An optional field: absent is fine, present must have its type."""
        value = obj.get(key)
        if value is None:
            return None
        # A bool is an int in Python; no numeric field of the seed takes one.
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
            names = "/".join(k.__name__ for k in _kinds(kind))
            self.bad(rule, f"{where}{key}", f"{where}{key} must be {names}")
            return None
        return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


NUMBER: Final = (int, float)


def _as_json(obj: Any) -> JSON:
    return obj if isinstance(obj, dict) else to_json_obj(obj)


def validate_part(part: v.Part | Mapping[str, Any]) -> ValidationResult:
    """Check one part against the seed's PartBase and its type's interface."""
    p = _as_json(part)
    c = _Check()
    for key in ("id", "sessionID", "messageID"):  # BR-01
        value = c.need(p, key, str, "BR-01")
        if value == "":
            c.bad("BR-01", key, f"{key} must not be empty")
        elif value is not None and key != "id" and not is_uuid(value):  # BR-04
            c.bad("BR-04", key, f"{key} {value!r} is not a UUID")
    kind = c.need(p, "type", str, "BR-03")
    if kind is not None and kind not in PART_TYPES:
        c.bad("BR-03", "type", f"unknown part type {kind!r}")
    elif kind in _BY_TYPE:
        _BY_TYPE[kind](c, p)
    return ValidationResult(tuple(c.problems))


def _text(c: _Check, p: JSON) -> None:
    c.need(p, "text", str, "text")
    c.may(p, "synthetic", bool, "text")
    c.may(p, "ignored", bool, "text")
    time = c.may(p, "time", dict, "text")
    if time is not None:
        c.may(time, "start", NUMBER, "text", "time.")
        c.may(time, "end", NUMBER, "text", "time.")
    c.may(p, "metadata", dict, "text")


def _reasoning(c: _Check, p: JSON) -> None:
    c.need(p, "text", str, "reasoning")
    c.may(p, "metadata", dict, "reasoning")
    time = c.need(p, "time", dict, "reasoning")
    if time is not None:
        c.need(time, "start", NUMBER, "reasoning", "time.")
        c.may(time, "end", NUMBER, "reasoning", "time.")


def _tool(c: _Check, p: JSON) -> None:
    c.need(p, "callID", str, "BR-01")
    c.need(p, "tool", str, "BR-01")
    c.may(p, "metadata", dict, "tool")
    state = c.need(p, "state", dict, "BR-05")
    if state is None:
        return
    status = c.need(state, "status", str, "BR-05", "state.")
    if status is not None and status not in TOOL_STATUSES:
        c.bad("BR-05", "state.status", f"unknown ToolState status {status!r}")
        return
    c.need(state, "input", dict, "BR-05", "state.")
    if status == "pending":
        c.need(state, "raw", str, "BR-06", "state.")
        return
    time = c.need(state, "time", dict, "BR-07", "state.")
    start = None if time is None else c.need(time, "start", NUMBER, "BR-07", "state.time.")
    if status == "running":
        c.may(state, "title", str, "running", "state.")
        c.may(state, "metadata", dict, "running", "state.")
        return
    end = None if time is None else c.need(time, "end", NUMBER, "BR-08", "state.time.")
    if start is not None and end is not None and end < start:
        c.bad("BR-08", "state.time.end", "time.end is before time.start")
    if status == "completed":
        output = c.need(state, "output", str, "BR-09", "state.")
        if output == "":
            c.bad("BR-09", "state.output", "a completed tool's output must not be empty")
        c.need(state, "title", str, "completed", "state.")
        c.need(state, "metadata", dict, "completed", "state.")
        if time is not None:
            c.may(time, "compacted", NUMBER, "completed", "state.time.")
        attachments = c.may(state, "attachments", list, "completed", "state.")
        for i, att in enumerate(attachments or ()):
            for problem in validate_part(att).problems:
                c.problems.append(attrs.evolve(
                    problem, field=f"state.attachments[{i}].{problem.field}"))
        return
    error = c.need(state, "error", str, "BR-10", "state.")
    if error is not None and not error.strip():
        c.bad("BR-10", "state.error", "a tool error must describe the error")
    c.may(state, "metadata", dict, "error", "state.")


def _step_start(c: _Check, p: JSON) -> None:
    c.may(p, "snapshot", str, "step-start")


def _tokens(c: _Check, obj: JSON, rule: str, where: str = "") -> None:
    tokens = c.need(obj, "tokens", dict, rule, where)
    if tokens is None:
        return
    for key in ("input", "output", "reasoning"):
        c.need(tokens, key, NUMBER, rule, f"{where}tokens.")
    cache = c.need(tokens, "cache", dict, rule, f"{where}tokens.")
    if cache is not None:
        for key in ("read", "write"):
            c.need(cache, key, NUMBER, rule, f"{where}tokens.cache.")


def _step_finish(c: _Check, p: JSON) -> None:
    c.need(p, "reason", str, "step-finish")
    c.may(p, "snapshot", str, "step-finish")
    c.need(p, "cost", NUMBER, "step-finish")
    _tokens(c, p, "BR-13")


def _file(c: _Check, p: JSON) -> None:
    c.need(p, "mime", str, "file")
    c.need(p, "url", str, "file")
    c.may(p, "filename", str, "file")
    c.may(p, "source", dict, "file")


_BY_TYPE: Final = {"text": _text, "reasoning": _reasoning, "tool": _tool,
                   "step-start": _step_start, "step-finish": _step_finish, "file": _file}


def validate_message(message: v.WithParts | Mapping[str, Any]) -> ValidationResult:
    """Every part, BR-02 across them, and the assistant rules BR-13 and BR-14."""
    m = _as_json(message)
    c = _Check()
    info = c.need(m, "info", dict, "info") or {}
    parts = c.need(m, "parts", list, "parts") or []
    seen: set[str] = set()
    for i, part in enumerate(parts):
        for problem in validate_part(part).problems:
            c.problems.append(attrs.evolve(problem, field=f"parts[{i}].{problem.field}"))
        pid = part.get("id") if isinstance(part, dict) else None
        if isinstance(pid, str):
            if pid in seen:  # BR-02
                c.bad("BR-02", f"parts[{i}].id", f"part id {pid} is used twice in the message")
            seen.add(pid)
        if isinstance(part, dict) and part.get("messageID") not in (None, info.get("id")):
            c.bad("BR-01", f"parts[{i}].messageID", "the part names another message")
    mid = c.need(info, "id", str, "BR-04", "info.")
    if mid is not None and not is_uuid(mid):
        c.bad("BR-04", "info.id", f"message id {mid!r} is not a UUID")
    role = c.need(info, "role", str, "info", "info.")
    time = c.need(info, "time", dict, "info", "info.") or {}
    c.need(time, "created", NUMBER, "info", "info.time.")
    completed = c.may(time, "completed", NUMBER, "BR-14", "info.time.")
    if role == "user":  # UserMessageExtension
        c.need(info, "agent", str, "user", "info.")
        model = c.need(info, "model", dict, "user", "info.")
        if model is not None:
            c.need(model, "providerID", str, "user", "info.model.")
            c.need(model, "modelID", str, "user", "info.model.")
        summary = c.may(info, "summary", dict, "BR-11", "info.")
        if summary is not None:
            c.may(summary, "title", str, "BR-11", "info.summary.")
            c.may(summary, "body", str, "BR-11", "info.summary.")
            c.may(summary, "diffs", list, "BR-11", "info.summary.")
        c.may(info, "system", str, "user", "info.")
        c.may(info, "tools", dict, "user", "info.")
        c.may(info, "variant", str, "user", "info.")
    elif role == "assistant":  # AssistantMessageExtension
        c.need(info, "cost", NUMBER, "BR-12", "info.")
        _tokens(c, info, "BR-13", "info.")
        c.need(info, "agent", str, "assistant", "info.")
        path = c.need(info, "path", dict, "assistant", "info.")
        if path is not None:
            c.need(path, "cwd", str, "assistant", "info.path.")
            c.need(path, "root", str, "assistant", "info.path.")
        if completed is not None and completed < time.get("created", completed):
            c.bad("BR-14", "info.time.completed", "completed before it was created")
    elif role is not None:
        c.bad("info", "info.role", f"a message's role is user or assistant, not {role!r}")
    return ValidationResult(tuple(c.problems))
