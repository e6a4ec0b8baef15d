"""The shapes of an OpenCode message's info and parts, declared as msgspec Structs, each
read once.

OpenCode's messages (``packages/opencode/src/session/message-v2.ts``: ``User`` and
``Assistant`` infos; ``TextPart``, ``ToolPart`` with its ``ToolState``,
``StepFinishPart``, …) arrive from an export, the ``storage/`` tree, the ``message`` and
``part`` tables, or built from a newer ``session_message`` row or a first-format
message. Each kind is its own Struct, found by the ``type`` (a part) or ``role`` (an
info) as saved: :func:`part` and :func:`info`. A tagged union would refuse a kind the
importer does not map, which it reports instead, and msgspec has no fallback member; so
the key is looked up in a table first, and a kind it does not know reads as the fields
every kind has.

Lenient where the importer always was: a leaf value is read as before (``str()`` of a
text, a time or count that is not a positive integer read as 0, a flag read as truthy),
so it is declared ``Any``. What is declared is the structure a kind reads: its ``time``,
``tokens`` (and their ``cache``), a tool's ``state`` and its ``time`` are objects, a
patch's ``files`` and a tool's ``attachments`` are lists. A value of another shape there
(a string where an object belongs) is refused naming its JSON path; before, it was read
as empty (or a string's characters taken as file names). OpenCode itself always writes
them as declared. A field of a kind that does not read it is not checked.
``gc=False``: what JSON decodes holds no cycles.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec


class Times(msgspec.Struct, gc=False):
    start: Any = None
    end: Any = None
    created: Any = None
    completed: Any = None
    compacted: Any = None


class CacheTokens(msgspec.Struct, gc=False):
    read: Any = None
    write: Any = None


class Tokens(msgspec.Struct, gc=False):
    input: Any = None
    output: Any = None
    reasoning: Any = None
    cache: CacheTokens | None = None


class ToolState(msgspec.Struct, gc=False):
    status: Any = None
    time: Times | None = None
    input: Any = None  # an object is the tool's input; anything else reads as {}
    raw: Any = None
    metadata: Any = None  # kept verbatim
    title: Any = None
    output: Any = None
    error: Any = None
    attachments: list[Any] | None = None  # each an object (others are skipped)


class Part(msgspec.Struct, gc=False):
    """The fields every part has (a kind the importer does not map reads as this)."""

    type: Any = None
    id: Any = None


class Timed(Part, gc=False):
    time: Times | None = None


class Text(Timed, gc=False):
    """``text`` and ``reasoning`` (a missing text reads as "", a null one as "None")."""

    text: Any = ""
    metadata: Any = None  # kept verbatim
    synthetic: Any = None
    ignored: Any = None


class File(Part, gc=False):
    mime: Any = ""
    url: Any = ""
    filename: Any = None
    source: Any = None  # read by the event's own declared type


class Tool(Part, gc=False):
    callID: Any = None  # noqa: N815 - OpenCode's spelling
    tool: Any = None
    state: ToolState | None = None
    metadata: Any = None  # kept verbatim


class StepStart(Timed, gc=False):
    snapshot: Any = None


class StepFinish(Timed, gc=False):
    snapshot: Any = None
    reason: Any = None
    cost: Any = None
    tokens: Tokens | None = None


class Snapshot(Timed, gc=False):
    snapshot: Any = None


class Patch(Timed, gc=False):
    hash: Any = None
    files: list[Any] | None = None


class Agent(Timed, gc=False):
    name: Any = None
    source: Any = None  # read by the event's own declared type


class Subtask(Timed, gc=False):
    prompt: Any = None
    description: Any = None
    agent: Any = None
    command: Any = None
    model: Any = None  # an object {providerID, modelID}; anything else reads as none


class Retry(Timed, gc=False):
    attempt: Any = None
    error: Any = None  # read as a MessageError where it is an object


class Compaction(Timed, gc=False):
    auto: Any = None
    overflow: Any = None


Simple = StepStart | StepFinish | Snapshot | Patch | Agent | Subtask | Retry | Compaction
_PARTS: Final[dict[Any, type[Part]]] = {
    "text": Text, "reasoning": Text, "file": File, "tool": Tool, "step-start": StepStart,
    "step-finish": StepFinish, "snapshot": Snapshot, "patch": Patch, "agent": Agent,
    "subtask": Subtask, "retry": Retry, "compaction": Compaction}


def part(saved: dict[str, Any]) -> Part:
    """``saved`` read as the Struct of its ``type``; a field of the wrong shape raises
    ``msgspec.ValidationError`` naming its path."""
    kind = saved.get("type")
    return msgspec.convert(saved, _PARTS.get(kind, Part) if isinstance(kind, str) else Part)


class Info(msgspec.Struct, gc=False):
    """The fields every message info has (a role the importer does not map reads as
    this); the fields no event carries are kept from the info as saved."""

    id: Any = None
    role: Any = None
    time: Times | None = None
    agent: Any = None
    system: Any = None
    variant: Any = None
    cost: Any = None
    finish: Any = None
    error: Any = None  # kept verbatim beside its reading (a false one is no error)


class UserInfo(Info, gc=False):
    model: Any = None  # an object {providerID, modelID}; anything else reads as none
    tools: Any = None
    summary: Any = None  # read by the event's own declared type


class AssistantInfo(Info, gc=False):
    parentID: Any = None  # noqa: N815 - OpenCode's spelling
    providerID: Any = None  # noqa: N815
    modelID: Any = None  # noqa: N815
    path: Any = None  # read by the event's own declared type
    tokens: Tokens | None = None


_INFOS: Final[dict[Any, type[Info]]] = {"user": UserInfo, "assistant": AssistantInfo}


def info(saved: dict[str, Any]) -> Info:
    """``saved`` read as the Struct of its ``role`` (see :func:`part`)."""
    role = saved.get("role")
    return msgspec.convert(saved, _INFOS.get(role, Info) if isinstance(role, str) else Info)
