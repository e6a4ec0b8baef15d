"""Generate the reference docs from the code: ``docs/events.md``, ``docs/transitions.md``
and the reference block of ``docs/cli.md`` (from the CLI's parsers and exit codes).

``python -m engine.docgen`` rewrites both files; ``python -m engine.docgen --check``
exits 1 when either differs from what the code would generate (CI and
``tests/test_docs.py`` run the check). The event reference is built from the
catalog itself (:data:`engine.events.EVENT_TYPES` through ``msgspec.inspect``),
the transition tables from :func:`engine.tables.render_markdown`, so neither can
drift from what the engine accepts. Only the prose below is written by hand.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import msgspec
import msgspec.inspect as mi

from engine import events as ev
from engine import tables as tb
from engine.cli import reference as cli_reference
from engine.codec import decode_json
from engine.events import DEFAULT_ACTOR, EVENT_TYPES, tag_of
from engine.session import Session
from engine.store.memory import MemoryStore

ENVELOPE: Final = tuple(f.name for f in msgspec.structs.fields(ev.Event))
ADDRESS: Final = ("message_id", "part_id")

# What a writer of raw events should know about each envelope field.
ENVELOPE_NOTES: Final[dict[str, str]] = {
    "id": "Event id, unique across the store. Omit it and the log assigns a time-sortable "
    "UUIDv7. Give one to make the write idempotent: appending an id that is already in "
    "this session's history is a no-op that reports the original `seq`; an id used by "
    "another session is rejected.",
    "session_id": "Omit it: the log fills in the session being appended to. If given, it "
    "must be that session.",
    "seq": "Position in the session's log, gapless from 1. Always assigned by the log; "
    "a value given by the writer is ignored.",
    "time": "Milliseconds since the Unix epoch. Omit it and the writer's clock fills it "
    "in; a given time is kept (importers replaying old sessions keep their timestamps).",
    "actor": "Who caused the event: `user`, `assistant`, `tool`, `system` or an agent id. "
    "Omitted: the `role` for `message.started`, otherwise the per-type default listed "
    "with each event below.",
    "v": "Schema version of this event's type. The default is 1 and stays 1 forever, so "
    "bytes without `v` are version 1; encoders omit it when it is 1. A type whose schema "
    "changes will write its new version explicitly. Every type is at version 1 today.",
}

INTRO: Final = """\
# Event format

Generated from `engine/events.py` by `python -m engine.docgen` (`make docs`); a test
fails when this file is stale. Only this introduction is written by hand.

Every change to a session is one immutable event. The event log is the only truth:
the WithParts messages, the state at any past point and the CLI's output are all
folds of it. This page is the contract for programs that write events, for example
an adapter that turns a provider's stream into `convlog append` input.

## The JSON format

- **One JSON object per line.** `convlog append STORE --session ID` reads JSON Lines
  (UTF-8) on stdin; blank lines are skipped. The whole input is one batch: it is
  appended entirely or not at all.
- **`type` is the tag.** It selects the event type (`"text.delta"`, `"tool.started"`,
  ...). An unknown `type`, a missing required field, a field of the wrong type or a
  field the type does not declare is rejected, and the error names the field
  (`` Expected `str`, got `int` - at `$.output` ``).
- **snake_case field names**, the same in JSON and in the msgpack the stores keep
  (`message_id`, `call_id`, `provider_id`). The WithParts *views* printed by
  `convlog show --json` use the seed's camelCase (`messageID`, `callID`); that is a
  different, read-only format.
- **Fields at their default may be omitted**, and convlog's own encoder omits them.
  For a field whose type allows `null`, `null` and leaving it out mean the same.
- **Legality is checked, not assumed.** Each event is checked against the
  [transition tables](transitions.md) in order; the first illegal one rejects the
  whole batch and the log stays as it was.

## The envelope

Every event carries these fields. A writer normally omits all of them except
perhaps `id` (for idempotent retries) and `time` (when replaying history); the log
fills in the rest when it appends.
"""

EXAMPLE_INTRO: Final = """\
## A worked example

A user asks a question; the assistant reads a file through a tool whose arguments
stream in as JSON fragments, then streams its answer. The lines in `LINES` below
are what an adapter would write to `chat.jsonl` and pipe into
`convlog append sqlite:///chat.db --session <uuid> < chat.jsonl` (which prints
`appended {count} event(s); ...` and exits 0; see [the CLI](cli.md)). Only `type`,
the addressing ids and the payload are given; the log fills in the envelope.

From Python, `Session.append` is what `convlog append` calls, with the same checks.
This block runs in the test suite.
"""

M_USER: Final = "0194d1e0-0000-7000-8000-00000000a001"
M_ASSISTANT: Final = "0194d1e0-0000-7000-8000-00000000a002"

# The worked example: validated (decoded and appended) every time the doc is generated.
EXAMPLE: Final[tuple[dict[str, object], ...]] = (
    {"type": "message.started", "message_id": M_USER, "role": "user", "agent": "build"},
    {"type": "text.added", "message_id": M_USER, "part_id": "prt_question",
     "text": "What does README.md say?"},
    {"type": "part.ended", "message_id": M_USER, "part_id": "prt_question"},
    {"type": "message.completed", "message_id": M_USER},
    {"type": "message.started", "message_id": M_ASSISTANT, "role": "assistant",
     "agent": "build", "parent_id": M_USER,
     "model": {"provider_id": "anthropic", "model_id": "claude-sonnet-4-5"}},
    {"type": "step.started", "message_id": M_ASSISTANT, "part_id": "prt_start1"},
    {"type": "tool.added", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "call_id": "toolu_01", "tool": "read_file"},
    {"type": "tool.input_delta", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "fragment": '{"path": "READ'},
    {"type": "tool.input_delta", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "fragment": 'ME.md"}'},
    {"type": "tool.input_ready", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "input": {"path": "README.md"}},
    {"type": "tool.started", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "title": "README.md"},
    {"type": "tool.completed", "message_id": M_ASSISTANT, "part_id": "prt_read",
     "output": "# convlog\nAn event-sourced message log.\n", "title": "README.md"},
    {"type": "step.finished", "message_id": M_ASSISTANT, "part_id": "prt_finish1",
     "reason": "tool-calls", "tokens": {"input": 812, "output": 41}},
    {"type": "step.started", "message_id": M_ASSISTANT, "part_id": "prt_start2"},
    {"type": "text.added", "message_id": M_ASSISTANT, "part_id": "prt_answer"},
    {"type": "text.delta", "message_id": M_ASSISTANT, "part_id": "prt_answer",
     "delta": "It calls convlog "},
    {"type": "text.delta", "message_id": M_ASSISTANT, "part_id": "prt_answer",
     "delta": "an event-sourced message log."},
    {"type": "part.ended", "message_id": M_ASSISTANT, "part_id": "prt_answer"},
    {"type": "step.finished", "message_id": M_ASSISTANT, "part_id": "prt_finish2",
     "reason": "stop", "cost": 0.0021, "tokens": {"input": 870, "output": 12}},
    {"type": "message.completed", "message_id": M_ASSISTANT, "finish": "stop",
     "cost": 0.0021, "tokens": {"input": 1682, "output": 53}},
)

EXAMPLE_PYTHON: Final = '''\
```python
LINES = r"""
{lines}
"""

from engine import IllegalTransition, MemoryStore, Session
from engine.codec import decode_json
from projections import WithPartsProjection

store = MemoryStore()
session = Session.create(store)
seqs = session.append(decode_json(line) for line in LINES.strip().splitlines())
assert seqs == list(range(1, {count} + 1))

view = WithPartsProjection(session.id).apply_all(store.read(session.id))
question, answer = view.messages()
tool = answer.parts[1]
assert (tool.tool, tool.state.TAG, tool.state.input) == ("read_file", "completed",
                                                         {{"path": "README.md"}})
assert answer.parts[4].text == "It calls convlog an event-sourced message log."

# A delta for a part that has ended is illegal: typed error, log unchanged.
late = {late}
try:
    session.append([decode_json(late)])
except IllegalTransition as exc:
    assert (exc.current, exc.attempted, exc.valid) == ("message completed", "streaming", ())
else:
    raise AssertionError("a delta after completion must be rejected")
assert session.version == {count}
```
'''

# Notes for fields whose meaning the type does not tell; checked against the catalog.
FIELD_NOTES: Final[dict[tuple[str, str], str]] = {
    ("message.started", "tools"): "tool name -> enabled",
    ("message.started", "summary"): "user messages only; set when the context is compacted",
    ("message.started", "path"): "assistant messages only",
    ("message.started", "parent_id"): "the user message this assistant message answers",
    ("message.completed", "error"): "with an error, a step may still be open; an abort "
    "must first settle tools (`tool.failed` kind `aborted`) and end streaming parts "
    "(`Session.abort` writes those events)",
    ("tool.added", "raw"): "raw argument text, grown by `tool.input_delta`",
    ("tool.added", "call_id"): "the provider's tool-call id, unique in the session",
    ("tool.started", "deadline"): "ms since the epoch; `Session.expire` fails the tool after it",
    ("tool.started", "input"): "replaces the pending input when given",
    ("tool.failed", "kind"): "not `error` or `timeout` unless the tool is running",
    ("tool.completed", "output"): "must not be empty (BR-09)",
    ("tool.completed", "attachments"): "each becomes a file part of the completed state",
    ("tool.failed", "error"): "must not be blank (BR-10)",
    ("part.ended", "metadata"): "merged into the part's metadata (e.g. a signature)",
    ("tool.progress", "metadata"): "merged into the running state's metadata",
}


# One-line descriptions for value types and bases without a docstring (a docstring
# wins). Event types carry their own docstring (the catalog refuses one without).
SUMMARIES: Final[dict[str, str]] = {
    "ModelRef": "Which model: provider and model id (`providerID`/`modelID` in WithParts).",
    "PathInfo": "The assistant's working directory and project root.",
    "Tokens": "Token usage.",
    "CacheTokens": "Prompt-cache token counts.",
    "SourceText": "A span of source text and its offsets.",
    "MessageEvent": "Events about a whole message. They carry `message_id`, a UUID (BR-04).",
    "PartEvent": "Events about one part of a message. They carry `message_id` and "
    "`part_id`: any non-empty string, unique within its message (BR-01, BR-02). The part's "
    "kind is fixed by the event that creates it.",
}


# --------------------------------------------------------------------------- type names


def _struct_name(t: mi.StructType) -> str:
    return t.cls.__name__


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def type_name(t: mi.Type) -> str:
    """A JSON-flavoured name for a msgspec type, linking nested value types."""
    if isinstance(t, mi.StrType):
        return "string"
    if isinstance(t, mi.IntType):
        return "integer"
    if isinstance(t, mi.FloatType):
        return "number"
    if isinstance(t, mi.BoolType):
        return "boolean"
    if isinstance(t, mi.NoneType):
        return "null"
    if isinstance(t, mi.AnyType):
        return "any"
    if isinstance(t, mi.LiteralType):
        return " or ".join(f'`"{x}"`' for x in t.values)
    if isinstance(t, mi.StructType):
        name = _struct_name(t)
        return f"[{name}](#{_slug(name)})"
    if isinstance(t, mi.ListType):
        return f"array of {type_name(t.item_type)}"
    if isinstance(t, mi.DictType):
        if isinstance(t.value_type, mi.AnyType):
            return "object"
        return f"object of {type_name(t.value_type)}"
    if isinstance(t, mi.UnionType):
        return " or ".join(type_name(x) for x in t.types)
    raise TypeError(f"docgen cannot name the type {t!r}; teach engine/docgen.py about it")


def _nested(t: mi.Type) -> Iterator[mi.StructType]:
    if isinstance(t, mi.StructType):
        yield t
        for f in t.fields:
            yield from _nested(f.type)
    elif isinstance(t, mi.ListType):
        yield from _nested(t.item_type)
    elif isinstance(t, mi.DictType):
        yield from _nested(t.value_type)
    elif isinstance(t, mi.UnionType):
        for x in t.types:
            yield from _nested(x)


def _default(f: mi.Field) -> str:
    if f.required:
        return ""
    if f.default is not msgspec.NODEFAULT:
        value = f.default
    else:
        factory = f.default_factory
        assert callable(factory)
        value = factory()
        if isinstance(value, msgspec.Struct):
            return "all fields at their defaults"
    return f"`{msgspec.json.encode(value).decode()}`"


def _doc(cls: type) -> str:
    raw = cls.__dict__.get("__doc__")
    if isinstance(raw, str):
        return inspect.cleandoc(raw).replace("``", "`")
    return SUMMARIES.get(cls.__name__, "")


def _field_table(fields: Sequence[mi.Field], notes: dict[str, str]) -> list[str]:
    out = ["| field | type | required | default | note |", "|---|---|---|---|---|"]
    for f in fields:
        out.append(
            f"| `{f.encode_name}` | {type_name(f.type)} | {'yes' if f.required else 'no'} "
            f"| {_default(f)} | {notes.get(f.name, '')} |"
        )
    return out


# --------------------------------------------------------------------------- sections


def _transitions(cls: type[ev.Event]) -> list[str]:
    out = []
    for table in (*tb.TABLES,):
        moves = []
        for row in table.rows:
            if row.event is cls:
                only = f" (kinds {', '.join(sorted(row.kinds))} only)" if row.kinds else ""
                moves.append(f"{row.source} → {row.target}{only}")
        if moves:
            out.append(f"{table.entity}: {', '.join(moves)}")
    return out


def _event_section(cls: type[ev.Event], info: mi.StructType) -> list[str]:
    tag = tag_of(cls)
    out = [f"### {tag}", ""]
    doc = _doc(cls)
    if not doc:
        raise KeyError(f"{cls.__name__} has no docstring; give it one (or a SUMMARIES entry)")
    out += [doc, ""]
    facts = [f"Class `{cls.__name__}`", f"entity {cls.entity}",
             f"default actor `{DEFAULT_ACTOR[cls]}`"]
    if cls is ev.MessageStarted:
        facts[-1] = "default actor: the `role`"
    if cls in tb.NEEDS_OPEN_MESSAGE:
        facts.append("needs its message open")
    out += ["; ".join(facts) + ".", ""]
    moves = _transitions(cls)
    if moves:
        out += ["Transitions: " + "; ".join(moves) + ".", ""]
    by_name = {f.name: f for f in info.fields}
    fields = [by_name[n] for n in ADDRESS if n in by_name]
    fields += [f for f in info.fields if f.name not in ENVELOPE and f.name not in ADDRESS]
    notes = {name: note for (t, name), note in FIELD_NOTES.items() if t == tag}
    out += [*_field_table(fields, notes), ""]
    return out


def _first_line(cls: type) -> str:
    doc = _doc(cls)
    return doc.split("\n\n")[0].replace("\n", " ") if doc else ""


def render_events() -> str:
    """docs/events.md, generated from the event catalog."""
    infos = {cls: mi.type_info(cls) for cls in EVENT_TYPES}
    for tag, name in FIELD_NOTES:
        known = ev.EVENT_BY_TAG.get(tag)
        if known is None or name not in {f.name for f in msgspec.structs.fields(known)}:
            raise KeyError(f"FIELD_NOTES names {tag}.{name}, which the catalog does not have")

    out = [INTRO]
    envelope = mi.type_info(ev.Event)
    assert isinstance(envelope, mi.StructType)
    out += [*_field_table(envelope.fields, ENVELOPE_NOTES), ""]

    out += ["## Event types", "",
            f"{len(EVENT_TYPES)} types. Each section below lists the payload fields; every "
            "event also carries the envelope above.", "",
            "| type | what it records |", "|---|---|"]
    for cls in EVENT_TYPES:
        tag = tag_of(cls)
        out.append(f"| [`{tag}`](#{_slug(tag)}) | {_first_line(cls)} |")
    out.append("")

    used_in: dict[type, list[str]] = {}
    group: type | None = None
    for cls in EVENT_TYPES:
        info = infos[cls]
        assert isinstance(info, mi.StructType)
        base = cls.__mro__[1]  # events are grouped by the base that says what they address
        if base is not group:
            group = base
            title = re.sub(r"Event$", " events", base.__name__)
            out += [f"## {title}", ""]
            if base is not ev.Event and _doc(base):
                out += [_doc(base), ""]
        out += _event_section(cls, info)
        for f in info.fields:
            for nested in _nested(f.type):
                where = used_in.setdefault(nested.cls, [])
                label = f"`{tag_of(cls)}`"
                if label not in where:
                    where.append(label)

    out += ["## Value types", "",
            "Structs nested inside events. They reject unknown fields too.", ""]
    for vcls, where in used_in.items():
        vinfo = mi.type_info(vcls)
        assert isinstance(vinfo, mi.StructType)
        out += [f"### {vcls.__name__}", ""]
        doc = _doc(vcls)
        if doc:
            out += [doc, ""]
        if vinfo.tag is not None:
            out += [f'Tagged: `"{vinfo.tag_field}": "{vinfo.tag}"`.', ""]
        out += ["Used in " + ", ".join(where) + ".", ""]
        out += [*_field_table(vinfo.fields, {}), ""]

    lines = [json.dumps(e, ensure_ascii=False) for e in EXAMPLE]
    _validate_example(lines)
    late = json.dumps({"type": "text.delta", "message_id": M_ASSISTANT,
                       "part_id": "prt_answer", "delta": "!"})
    out += [EXAMPLE_INTRO.format(count=len(lines)),
            EXAMPLE_PYTHON.format(count=len(lines), late=repr(late), lines="\n".join(lines))]
    return "\n".join(out)


def _validate_example(lines: Sequence[str]) -> None:
    """The worked example must decode and be accepted by the tables, or docgen fails."""
    store = MemoryStore()
    session = Session.create(store, clock=lambda: 1_700_000_000_000)
    session.append([decode_json(line) for line in lines])


def render_transitions() -> str:
    return tb.render_markdown()


GENERATED: Final[dict[str, Callable[[], str]]] = {
    "events.md": render_events,
    "transitions.md": render_transitions,
}


# Pages of which only a marked block is generated (the rest is prose written by hand):
# each function takes the page's current text and returns it with the block renewed.
SPLICED: Final[dict[str, Callable[[str], str]]] = {
    "cli.md": cli_reference.splice,
}


# Code generated from the code: the CLI's catalog of commands (read at every start).
CODE: Final[dict[str, Callable[[], str]]] = {
    "cli/catalog.py": cli_reference.render_catalog,
}


def code_path(name: str) -> Path:
    return Path(__file__).resolve().parent / name


def default_docs_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "docs"


def stale(docs: Path) -> list[Path]:
    """The generated files whose content on disk differs from what the code generates."""
    out = []
    for name, render in GENERATED.items():
        path = docs / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != render():
            out.append(path)
    for name, splice in SPLICED.items():
        path = docs / name
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != splice(current):
            out.append(path)
    for name, render in CODE.items():
        path = code_path(name)
        if not path.exists() or path.read_text(encoding="utf-8") != render():
            out.append(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.docgen", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a generated doc is stale, write nothing")
    parser.add_argument("--docs", type=Path, default=default_docs_dir(),
                        help="the docs directory (default: the repository's docs/)")
    args = parser.parse_args(argv)
    docs: Path = args.docs
    if args.check:
        old = stale(docs)
        for path in old:
            print(f"{path} is stale: run `python -m engine.docgen` (make docs)", file=sys.stderr)
        return 1 if old else 0
    docs.mkdir(parents=True, exist_ok=True)
    for name, render in GENERATED.items():
        (docs / name).write_text(render(), encoding="utf-8")
        print(f"wrote {docs / name}")
    for name, splice in SPLICED.items():
        path = docs / name
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(splice(current), encoding="utf-8")
        print(f"wrote the generated block of {path}")
    for name, render in CODE.items():
        code_path(name).write_text(render(), encoding="utf-8")
        print(f"wrote {code_path(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
