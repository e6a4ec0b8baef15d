"""What every importer shares: the report, the typed input error, stable ids, line reading.

An importer reads a file into a :class:`Plan` (sessions and their events,
nothing written), so that bad input fails before anything reaches the store;
:func:`engine.importers.write.write_plan` then appends it. Ids are derived from
the source's own ids, so importing the same file twice writes nothing new.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.errors import ConvlogError
from engine.events import Event, JSONObject

# A line longer than this is refused (or skipped with --lenient) without being held
# in memory: Claude Code's progress lines reach megabytes, never this.
MAX_LINE: Final = 64 * 1024 * 1024
_LOW48: Final = (1 << 48) - 1
_KEEP_LINES: Final = 20  # line numbers kept per unmapped item (the count is exact)


def decode(raw: bytes) -> Any:
    """msgspec's JSON decode. JSON nested deeper than the interpreter can follow is
    invalid input (a DecodeError naming the line), not a crash."""
    try:
        return msgspec.json.decode(raw)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None


PROGRESS_EVERY: Final = 1 << 14  # lines between two progress reports

# Set by the CLI to show progress on large files: called with (path, bytes read, size).
PROGRESS: ContextVar[Callable[[str, int, int], None] | None] = ContextVar(
    "convlog_import_progress", default=None)


class ImportInputError(ConvlogError):
    """The input cannot be imported: names the file and, where it applies, the line."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


def stable_uuid(time_ms: int, *key: str) -> str:
    """A UUIDv7-shaped id whose time is ``time_ms`` and whose other bits hash ``key``.

    Deterministic (the same source ids give the same id on every import) and still
    time-sortable like the ids the engine makes.
    """
    return stable_uuid_joined(time_ms, "\x1f".join(key))


def stable_uuid_joined(time_ms: int, joined: str) -> str:
    """:func:`stable_uuid` of a key already joined with ``"\\x1f"`` (an importer that
    derives many ids from one prefix joins it once)."""
    return uuid_text(time_head(time_ms), _blake2b(joined.encode(), digest_size=10).digest())


def time_head(time_ms: int) -> str:
    """The first 15 characters of every :func:`stable_uuid` of ``time_ms``: 48 bits of
    time and the version nibble (the same for every event of a line: made once)."""
    head = _TIME_HEADS.get(time_ms)
    if head is None:
        t = time_ms & _LOW48 if time_ms > 0 else 0
        head = f"{t >> 16:08x}-{t & 0xFFFF:04x}-7"
        if len(_TIME_HEADS) < _TIME_HEADS_KEPT:
            _TIME_HEADS[time_ms] = head
    return head


def uuid_text(head: str, d: bytes) -> str:
    """The id whose first characters are ``head`` (:func:`time_head`) and whose other
    bits are the 10-byte digest ``d``'s: 12 bits of it, the variant 0b10 and 62 more
    bits (its first 80 bits as one number: its top 12 and its low 62). Each byte's hex
    from a table, not the digest's hex cut into slices (each slice a new string)."""
    return f"{head}{_HEX2[d[0]]}{_HEX1[d[1] >> 4]}-{_VARIANT[d[2]]}{_HEX2[d[3]]}-{d[4:].hex()}"


_blake2b = hashlib.blake2b
_TIME_HEADS: dict[int, str] = {}  # time_ms -> the id's first 15 characters
_TIME_HEADS_KEPT: Final = 100_000
# The variant bits over a digest byte's low six, as text (formatted once, not per id).
_VARIANT: Final = tuple(f"{0x80 | b & 0x3F:02x}" for b in range(256))
_HEX2: Final = tuple(f"{b:02x}" for b in range(256))
_HEX1: Final = tuple(f"{b:x}" for b in range(16))


def stable_part_id(*key: str) -> str:
    return "prt_" + hashlib.blake2b("\x1f".join(key).encode(), digest_size=13).hexdigest()


@attrs.define
class Unmapped:
    count: int = 0
    lines: list[int | str] = attrs.field(factory=list)  # "file:line" when several files


@attrs.define
class SessionSummary:
    id: str
    kind: str  # "main", "fork" or "child"
    events: int = 0
    messages: int = 0
    tools: int = 0
    parent: str | None = None
    fork_seq: int | None = None
    title: str = ""


@attrs.define
class ImportReport:
    """What an import did and everything it could not map (nothing is dropped silently)."""

    source: str
    format: str
    sessions: list[SessionSummary] = attrs.field(factory=list)
    unmapped: dict[str, Unmapped] = attrs.field(factory=dict)
    skipped: list[tuple[int, str]] = attrs.field(factory=list)  # --lenient: (line, reason)
    redactions: int = 0
    written: int = 0  # events appended by this import
    existing: int = 0  # events already in the store (a re-import)

    def note(self, what: str, line: int | str | None = None) -> None:
        item = self.unmapped.get(what)
        if item is None:
            item = self.unmapped[what] = Unmapped()
        item.count += 1
        if line is not None and len(item.lines) < _KEEP_LINES:
            item.lines.append(line)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source, "format": self.format,
            "sessions": [attrs.asdict(s) for s in self.sessions],
            "unmapped": {k: attrs.asdict(v) for k, v in sorted(self.unmapped.items())},
            "skipped": [{"line": n, "reason": r} for n, r in self.skipped],
            "redactions": self.redactions, "written": self.written, "existing": self.existing,
        }

    def render(self) -> str:
        """The one-screen summary ``convlog import`` prints."""
        kinds = {k: sum(s.kind == k for s in self.sessions) for k in ("main", "fork", "child")}
        out = [f"imported {self.source} ({self.format}): {kinds['main']} session(s), "
               f"{kinds['fork']} fork(s), {kinds['child']} child session(s); "
               f"{self.written} event(s) written, {self.existing} already there"]
        for s in self.sessions[:12]:
            link = "" if not s.parent else f" <- {s.parent}" + (
                f" at {s.fork_seq}" if s.kind == "fork" else "")
            out.append(f"  {s.kind:5} {s.id}  {s.messages} messages, {s.tools} tools{link}")
        if len(self.sessions) > 12:
            out.append(f"  ... and {len(self.sessions) - 12} more sessions (--json lists all)")
        if self.redactions:
            out.append(f"redacted {self.redactions} secret(s) from the logged command lines")
        if self.unmapped:
            out.append("not mapped (count, first lines):")
            ranked = sorted(self.unmapped.items(), key=lambda kv: -kv[1].count)
            for what, item in ranked[:10]:
                lines = ",".join(map(str, item.lines[:5]))
                out.append(f"  {item.count:6}  {what}" + (f"  (lines {lines})" if lines else ""))
            if len(ranked) > 10:
                out.append(f"  ... {len(ranked) - 10} more (--json lists all)")
        if self.skipped:
            out.append(f"skipped {len(self.skipped)} bad line(s) (--lenient): "
                       + ", ".join(f"{n}" for n, _ in self.skipped[:10]))
        return "\n".join(out)


@attrs.define
class PlannedSession:
    """One session to write: a main session, a fork of an earlier one, or a child."""

    id: str
    kind: str
    events: list[Event] = attrs.field(factory=list)
    parent: str | None = None
    fork_seq: int | None = None  # for a fork: how many of the parent's events it shares
    created: int = 1
    title: str = ""
    # Where the title came from, when the tool recorded it (a /rename, a thread name):
    # such a title is written as session.titled. "" for a label that names nothing.
    title_source: str = ""
    # What its session.imported says (a fork shares its parent's).
    original_id: str = ""  # the tool's own session id
    tool_version: str = ""
    source: str = ""  # the source file's name when it is not the report's (a directory)
    metadata: JSONObject | None = None
    # For a tool that forks by copying messages under new ids (OpenCode's --fork): after
    # each message, the digest of the content so far, the events so far and the message's
    # id (engine.importers.copies links such a copy to its original as a fork).
    copies: list[tuple[str, int, str]] = attrs.field(factory=list)


@attrs.define
class Plan:
    report: ImportReport
    sessions: list[PlannedSession] = attrs.field(factory=list)
    sealed: bool = False


def seal(plan: Plan) -> Plan:
    """Open every session the plan creates with ``session.imported`` (once).

    A main or child session gets the event as its first; a fork shares its
    parent's, so its fork point moves one event on. Every importer's plan
    function returns a sealed plan.
    """
    if plan.sealed:
        return plan
    plan.sealed = True
    fmt = plan.report.format
    for s in plan.sessions:
        if s.title.strip() and s.title_source:
            # The name the tool recorded, after what the session holds (so no fork's
            # shared prefix moves). Its id names the title: a rename read on a later
            # import of a grown file is a new event (the latest wins), the same name
            # again a no-op.
            s.events.append(ev.SessionTitled(
                id=stable_uuid(s.created, fmt, "session.titled", s.id, s.title),
                time=max((e.time for e in s.events[-1:]), default=s.created) or s.created,
                title=s.title, source=s.title_source))
        if s.kind == "fork":
            s.fork_seq = (s.fork_seq or 0) + 1
            continue
        meta = s.metadata
        if s.kind == "child" and s.parent is not None:  # `convlog sessions` nests it
            meta = {**(meta or {}), "parent_session": s.parent}
        s.events.insert(0, ev.SessionImported(
            id=stable_uuid(s.created, fmt, "session.imported", s.id), time=s.created,
            format=fmt, source=printable(s.source or Path(plan.report.source).name or fmt),
            original_id=s.original_id, tool_version=s.tool_version, metadata=meta))
    by_id = {s.id: s for s in plan.sessions}
    for s in plan.sessions:  # a fork within its parent's own shared prefix forks its owner
        parent = by_id.get(s.parent or "")
        while (s.kind == "fork" and parent is not None and parent.kind == "fork"
               and (parent.fork_seq or 0) >= (s.fork_seq or 0)):
            s.parent = parent.parent
            parent = by_id.get(s.parent or "")
    return plan


def drop_empty(plan: Plan) -> None:
    """A ``--lenient`` import that skipped lines never writes a session that holds
    nothing but where it came from (a file whose every line was skipped made one):
    such sessions leave the plan, reported."""
    if not plan.report.skipped:
        return
    parents = {s.parent for s in plan.sessions}
    empty = [s for s in plan.sessions if all(isinstance(e, ev.SessionImported | ev.SessionTitled)
                                             for e in s.events) and s.id not in parents]
    for s in empty:
        plan.sessions.remove(s)
        plan.report.note("a session left empty by the skipped lines: not written", s.source
                         or None)


def open_binary(path: Path) -> io.BufferedReader:
    try:
        return path.open("rb")
    except OSError as exc:
        raise ImportInputError(str(path), f"cannot read: {exc.strerror}") from exc


def check_text(path: Path, head: bytes) -> None:
    """Refuse a binary file up front (a NUL byte in its first block)."""
    if b"\x00" in head:
        raise ImportInputError(str(path), "a binary file, not a transcript", 1)


def json_lines(path: Path, report: ImportReport, *, lenient: bool = False,
               max_line: int = MAX_LINE,
               decoder: Callable[[bytes], Any] = decode) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSONL file, parsed, with its number; one line in memory.

    Invalid JSON, a truncated last line or a line over ``max_line`` bytes is an
    :class:`ImportInputError` naming the line, or with ``lenient`` a skipped line
    listed in ``report.skipped``. ``decoder`` (an importer's line Struct decoder,
    falling back to :func:`decode` for other shapes) gives a dict or a
    ``msgspec.Struct`` per object line; a line it cannot decode is read as
    :func:`decode` reads it (a lone surrogate mended into a dict). Each line is
    judged by :func:`read_line` (an importer with a loop of its own calls it for
    every line its own fast path does not take).
    """
    name = str(path)
    progress = PROGRESS.get()
    with open_binary(path) as f:
        check_text(path, f.peek(4096)[:4096])
        size = path.stat().st_size if progress else 0
        number = 0
        while True:
            raw = f.readline(max_line + 1)
            if not raw:
                if progress:
                    progress(name, size, size)
                return
            number += 1
            if progress and not number % PROGRESS_EVERY:
                progress(name, f.tell(), size)
            if raw[-1] == 10 and raw[0] not in _BLANK:  # a whole line, not blank: decode it
                try:
                    value = decoder(raw)
                except msgspec.DecodeError:
                    value = None  # read_line decodes it again and says why
                if value.__class__ is dict or isinstance(value, msgspec.Struct):
                    yield number, value
                    continue
            value = read_line(f, raw, number, name=name, report=report, lenient=lenient,
                              max_line=max_line, decoder=decoder)
            if value is not SKIPPED:
                yield number, value


SKIPPED: Final = object()  # read_line's answer for a blank line or one skipped (--lenient)


def read_line(f: io.BufferedReader, raw: bytes, number: int, *, name: str,
              report: ImportReport, lenient: bool, max_line: int,
              decoder: Callable[[bytes], Any]) -> Any:
    """What :func:`json_lines` makes of line ``number``, ``raw`` as
    ``f.readline(max_line + 1)`` read it: its value, or :data:`SKIPPED` (a blank
    line, or a bad one under ``lenient``); a bad line otherwise raises
    ImportInputError. The rest of a line over ``max_line`` bytes is read from ``f``
    without being kept; ``f`` tells whether a line that ends without a newline is
    the last."""
    if len(raw) > max_line and not raw.endswith(b"\n"):
        while chunk := f.readline(1 << 20):  # skip the rest without keeping it
            if chunk.endswith(b"\n"):
                break
        _bad(report, name, number, f"a line over {max_line} bytes", lenient)
        return SKIPPED
    if raw[0] in _BLANK and not raw.strip():  # (strip copies: only when it may be blank)
        return SKIPPED
    try:
        value = decoder(raw)
    except msgspec.DecodeError as exc:
        # msgspec's message varies ("truncated" when the lone half ends a string)
        if (value := mended_line(raw)) is not None:
            report.note(LONE_SURROGATE, number)
            return value
        last = not raw.endswith(b"\n") and not f.peek(1)[:1]
        why = ("a truncated final line" if last else f"invalid JSON ({exc})")
        _bad(report, name, number, why, lenient)
        return SKIPPED
    if not isinstance(value, dict | msgspec.Struct):
        _bad(report, name, number, "a line that is not a JSON object", lenient)
        return SKIPPED
    return value


_BLANK: Final = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() strips

# What a record of an unexpected shape raises while it is mapped (parsed JSON can be anything).
SHAPE_ERRORS: Final = (TypeError, ValueError, KeyError, AttributeError, IndexError)


def shape_error(path: str, exc: Exception, line: int | None) -> ImportInputError:
    return ImportInputError(path, f"a record of an unexpected shape ({type(exc).__name__}: "
                            f"{str(exc)[:200]})", line)


def _bad(report: ImportReport, name: str, number: int, why: str, lenient: bool) -> None:
    if not lenient:
        # Real files hold such lines (a write torn by a crash or a race, mid-file too):
        # say how to import the rest rather than leave the user with a refusal.
        raise ImportInputError(name, f"{why}; --lenient skips such lines and lists them",
                               number)
    report.skipped.append((number, f"{name}: {why}"))


LONE_SURROGATE: Final = ("a lone UTF-16 surrogate (half a character, as a Node.js tool writes a "
                         "string it cut): read as U+FFFD")
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE: Final = re.compile("[\ud800-\udfff]")


def loads(data: str | bytes) -> Any:
    """``json.loads``, with every lone surrogate escape read as U+FFFD.

    JavaScript strings are UTF-16: a tool written in Node.js (Claude Code, Gemini
    CLI, OpenCode) that cuts a string mid-character writes ``"\\ud83d"`` alone, which
    no convlog event may hold (the store's door refuses it). Valid pairs are joined
    by the parser, so a surrogate left in a string is a lone one."""
    return _loads(data)[0]


def _loads(data: str | bytes) -> tuple[Any, bool]:
    """``loads`` and whether a lone surrogate was replaced."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if isinstance(data, str):
        if "\\u" not in data:  # no escape at all (most values): nothing to mend
            return value, False
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = data
    if not _SURROGATE_ESCAPE.search(raw):
        return value, False
    mended = mend(value)
    return mended, mended != value


def printable(name: str) -> str:
    """A file name as text an event may hold: bytes that are not UTF-8 (kept by Python
    as lone surrogates) read as U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def mend(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {mend(k): mend(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mend(x) for x in value]
    return value


def mended_line(raw: bytes) -> Any:
    """A JSON line msgspec refused for a lone surrogate, read by the stdlib (None when
    it is invalid anyway)."""
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    try:
        value = loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def json_document(path: Path, report: ImportReport | None = None) -> Any:
    """A whole-file JSON document (formats that are one document); stdlib errors name the
    line. A lone surrogate reads as U+FFFD, noted in ``report``."""
    with open_binary(path) as f:
        data = f.read()
    check_text(path, data[:4096])
    try:
        value, mended = _loads(data)
        if mended and report is not None:
            report.note(LONE_SURROGATE)
        return value
    except UnicodeDecodeError as exc:
        raise ImportInputError(str(path), f"not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise ImportInputError(str(path), f"invalid JSON ({exc.msg})", exc.lineno) from exc
    except ValueError as exc:  # nested too deeply
        raise ImportInputError(str(path), f"invalid JSON ({exc})") from exc


_HOURS: dict[str, int | None] = {}  # "YYYY-MM-DDTHH" -> its epoch seconds
_SECONDS: dict[str, int | None] = {}  # "YYYY-MM-DDTHH:MM:SS" -> its epoch seconds
_CACHED: Final = 100_000  # entries per cache (a long file's distinct hours, seconds)


def ms_of(stamp: Any) -> int:
    """Milliseconds since the epoch of an ISO-8601 string (0 when absent or unreadable)."""
    if not isinstance(stamp, str) or not stamp:
        return 0
    if len(stamp) == 24 and stamp[23] == "Z" and stamp[19] == "." and stamp.isascii():
        # The shape every JavaScript and Rust tool writes (2025-08-01T10:00:00.000Z), on
        # every line of a transcript (lines of one second share a lookup): the
        # second's epoch once, the milliseconds by arithmetic. The float steps are
        # datetime.timestamp()'s, so the result (and every id derived from it) is the
        # one the general path below gives.
        head = stamp[:19]
        seconds = _SECONDS.get(head, -1)
        if seconds == -1:
            seconds = _second_of(head)
            if len(_SECONDS) < _CACHED:
                _SECONDS[head] = seconds
        millis = stamp[20:23]
        if seconds is not None and millis.isdigit():
            return int((seconds * 10**6 + int(millis) * 1000) / 10**6 * 1000)
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _second_of(head: str) -> int | None:
    """Epoch seconds of an ASCII ``YYYY-MM-DDTHH:MM:SS`` (None: not that shape, or not a
    time the general path reads the same way): the hour parsed once, minutes and seconds
    added."""
    if not (head[13] == ":" and head[16] == ":" and head[14:16].isdigit()
            and head[17:19].isdigit() and head[14] < "6" and head[17] < "6"):
        return None
    hour_key = head[:13]
    if hour_key in _HOURS:
        hour = _HOURS[hour_key]
    else:
        try:
            hour = int(datetime.fromisoformat(hour_key + ":00:00+00:00").timestamp())
        except ValueError:
            hour = None
        if len(_HOURS) < _CACHED:
            _HOURS[hour_key] = hour
    return None if hour is None else hour + int(head[14:16]) * 60 + int(head[17:19])
