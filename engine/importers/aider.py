"""aider's ``.aider.chat.history.md``, best effort: no ids, no per-message times, no tool calls.

Each ``# aider chat started at <ts>`` starts a run, imported as its own
session. ``#### `` lines are the user's input (consecutive ones are one
message); unquoted lines are the assistant's markdown reply (edits stay as the
SEARCH/REPLACE text aider printed); ``> `` lines are aider's own output and
confirmations, kept as synthetic text parts. The quoted block before the first
input holds the launch command line, which can carry API keys: every quoted
line is redacted for common key patterns before it is stored, and the report
counts the redactions. A reply cut by ``^C`` ends with an ``aborted`` error.

What is lost, and why: exact times (aider logs one per run; events are spaced
by one millisecond from it), the split between a reply's prose and its edits,
and which quoted lines belong to which command (aider does not say).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from engine import events as ev
from engine.events import Event
from engine.importers.base import (
    MAX_LINE,
    ImportInputError,
    ImportReport,
    Plan,
    PlannedSession,
    check_text,
    open_binary,
    seal,
    stable_part_id,
    stable_uuid,
)

FORMAT: Final = "aider"
_VERSION: Final = re.compile(r"Aider v(\d[\w.+-]*)")
_RUN: Final = "# aider chat started at "
_SECRETS: Final = (
    # aider's own complaint about a malformed --api-key or --set-env echoes the whole
    # setting, key included: "Invalid --api-key format: <value>" (aider/main.py).
    re.compile(r"(Invalid --(?:api-key|set-env) format:\s*)(.+)"),
    # A flag that names a key or token, then its value: --api-key X, --openai-api-key=X, ...
    # (not a count of tokens: --thinking-tokens 32k, --map-tokens 1024 are no secrets).
    re.compile(r"(--[\w-]*(?:api[-_]?key|token(?!s)|secret|password)[\w-]*(?:=|\s+))"
               r"(?!format:)(\S+)", re.I),
    # NAME_API_KEY=value, token: value; not aider's "- OPENAI_API_KEY: Not set".
    re.compile(r"((?:api[-_]?key|token(?!s)|secret|password)\s*[=:]\s*)(?!Not set)(\S+)",
               re.I),
    re.compile(r"()(sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,})"),  # OpenAI / Anthropic
    re.compile(r"()(nvapi-[A-Za-z0-9_-]{20,})"),  # NVIDIA
    re.compile(r"()(gsk_[A-Za-z0-9]{20,})"),  # Groq
    re.compile(r"()(AIza[0-9A-Za-z_-]{30,})"),  # Google
    re.compile(r"()(gh[pousr]_[A-Za-z0-9]{30,})"),  # GitHub
    re.compile(r"()(xox[abprs]-[A-Za-z0-9-]{10,})"),  # Slack
    re.compile(r"()(AKIA[0-9A-Z]{16})"),  # AWS access key id
    re.compile(r"(Bearer\s+)([A-Za-z0-9._~+/-]{16,}=*)"),
)
REDACTED: Final = "[REDACTED]"
NOT_UTF8: Final = ("a line that is not UTF-8 (aider wrote it in another --encoding): its "
                   "undecodable bytes read as U+FFFD")
# aider's own reasoning tag (thinking-content-<32 hex>), or a model's (<think>, <thinking>,
# <reasoning>): a closed pair, or an open tag that runs to the end.
_REASONING: Final = re.compile(
    r"<(thinking-content-[0-9a-f]{32}|think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.S)


def redact(text: str) -> tuple[str, int]:
    """``text`` with secrets replaced by ``[REDACTED]``, and how many were replaced."""
    count = 0

    def hide(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(2) == REDACTED:  # an earlier pattern already hid it
            return match.group(0)
        count += 1
        return match.group(1) + REDACTED

    for pattern in _SECRETS:
        text = pattern.sub(hide, text)
    return text, count


def _lines(path: Path, report: ImportReport, max_line: int) -> Iterator[tuple[int, str]]:
    with open_binary(path) as f:
        check_text(path, f.peek(4096)[:4096])
        number = 0
        while raw := f.readline(max_line + 1):
            number += 1
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise ImportInputError(str(path), f"a line over {max_line} bytes", number)
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                # aider writes the history in its --encoding (UTF-8 unless the user chose
                # another): one such line must not refuse the whole history.
                report.note(NOT_UTF8, number)
                text = raw.decode(errors="replace")
            # aider writes in text mode: CRLF line ends on Windows.
            yield number, text.removesuffix("\n").removesuffix("\r")


class _Run:
    def __init__(self, path: Path, started: str, line: int, report: ImportReport,
                 salt: str = "") -> None:
        self.report = report
        self.time = _ms(started) or 1
        self.sid = stable_uuid(self.time, FORMAT, "session", path.name, started, str(line),
                               *([salt] if salt else []))
        self.session = PlannedSession(self.sid, "main", created=self.time, source=path.name)
        self.block: list[str] = []
        self.kind = ""  # "user", "reply" or "quote": what self.block holds
        self.assistant: str | None = None
        self.last_user: str | None = None
        self.line = line
        self.start = line  # the run's "# aider chat started" line
        self.model: ev.ModelRef | None = None  # from the header's "Main model: ..." line
        self.tokens: ev.Tokens | None = None  # the reply's "Tokens: ... Cost: ..." line
        self.cost = 0.0
        self.error: ev.MessageError | None = None  # an API error aider printed
        # "Restored previous conversation history." in the header (--restore-chat-history):
        # the run goes on with the conversation before it, not a new one.
        self.restored = False

    def add(self, e: Event) -> None:
        self.time += 1  # no per-message times: keep the order, one millisecond apart
        eid = stable_uuid(self.time, FORMAT, self.sid, str(len(self.session.events)))
        self.session.events.append(msgspec.structs.replace(e, id=eid, time=self.time))

    def feed(self, number: int, line: str) -> None:
        # aider ends input and output lines with two spaces (markdown hard breaks): not content.
        if line.startswith("#### ") or line == "####":
            kind, text = "user", line[5:].rstrip()
        elif line.startswith("> ") or line == ">":
            kind, text = "quote", line[2:].rstrip()
            version = _VERSION.match(text)
            if version and not self.session.tool_version:  # aider's startup banner
                self.session.tool_version = version.group(1)
        elif self.kind == "quote" and line.strip():
            # aider quotes only the first line of a multi-line tool_output: the lines right
            # after a quote, before a blank line, are the rest of it (a reply starts after one).
            kind, text = "quote", line.rstrip()
        else:
            kind, text = "reply", line
        if kind != self.kind:
            self.flush()
            self.kind, self.line = kind, number
        self.block.append(text)

    def flush(self) -> None:
        lines, kind = self.block, self.kind
        self.block, self.kind = [], ""
        text = "\n".join(lines).strip("\n")
        if not text.strip():
            return
        if kind == "user":
            self.close()
            mid = stable_uuid(self.time, FORMAT, self.sid, "message", str(self.line))
            self.add(ev.MessageStarted(message_id=mid, role="user"))
            self._text(mid, text, synthetic=False)
            self.add(ev.MessageCompleted(message_id=mid))
            self.last_user = mid
            return
        if kind == "quote":
            text, n = redact(text)
            self.report.redactions += n
            self._quoted(text)
        if kind == "quote" and self.assistant is None and self.last_user is None:
            # The run's header (the launch command line, versions, the repo): aider's notes.
            mid = stable_uuid(self.time, FORMAT, self.sid, "message", str(self.line))
            self.add(ev.MessageStarted(message_id=mid, role="user", agent="aider"))
            self._text(mid, text, synthetic=True)
            self.add(ev.MessageCompleted(message_id=mid))
            return
        if self.assistant is None:
            self.assistant = stable_uuid(self.time, FORMAT, self.sid, "message", str(self.line))
            self.add(ev.MessageStarted(message_id=self.assistant, role="assistant",
                                       parent_id=self.last_user, model=self.model))
        if kind == "reply":
            self._reply(self.assistant, text)
        else:
            self._text(self.assistant, text, synthetic=True)
        if kind == "quote" and "^C" in text:
            self.close(aborted=True)

    def _reply(self, mid: str, text: str) -> None:
        """A reply's text, its reasoning (aider 0.76+ logs it between ``<thinking-content-…>``
        tags, or the model's own ``<think>`` tags) as reasoning parts; an unclosed tag (a
        ``^C`` while the model was thinking) runs to the end of the block."""
        at, n = 0, 0
        for found in _REASONING.finditer(text):
            before = text[at:found.start()].strip("\n")
            if before.strip():
                self._text(mid, before, synthetic=False, index=n)
                n += 1
            pid = stable_part_id(self.sid, str(self.line), "reasoning", str(n))
            self.add(ev.ReasoningAdded(message_id=mid, part_id=pid,
                                       text=found.group(2).strip("\n"),
                                       metadata={"aider": {"tag": found.group(1)}}))
            self.add(ev.PartEnded(message_id=mid, part_id=pid))
            n += 1
            at = found.end()
        rest = text[at:].strip("\n")
        if rest.strip():
            self._text(mid, rest, synthetic=False, index=n)

    def _text(self, mid: str, text: str, *, synthetic: bool, index: int = 0) -> None:
        pid = stable_part_id(self.sid, str(self.line), *([str(index)] if index else []))
        self.add(ev.TextAdded(message_id=mid, part_id=pid, text=text, synthetic=synthetic))
        self.add(ev.PartEnded(message_id=mid, part_id=pid))

    def _quoted(self, text: str) -> None:
        """What aider's own lines say about the model, the reply's usage and errors."""
        for line in text.splitlines():
            if (found := _MODEL.match(line)) and self.model is None:
                provider, _, model = found.group(1).rpartition("/")
                self.model = ev.ModelRef(provider_id=provider, model_id=model)
            elif found := _TOKENS.match(line):
                counts = {k: _count(v) for v, k in _TOKEN_PART.findall(found.group(1))}
                self.tokens = ev.Tokens(
                    input=counts.get("sent", 0), output=counts.get("received", 0),
                    cache=ev.CacheTokens(read=counts.get("cache hit", 0),
                                         write=counts.get("cache write", 0)))
                cost = _COST.search(line)
                self.cost = float(cost.group(1)) if cost else 0.0
            elif line.strip() == _RESTORED and self.last_user is None:
                self.restored = True
            elif _API_ERROR.match(line) and self.error is None:
                self.error = ev.MessageError(kind="api", message=line.strip())

    def close(self, *, aborted: bool = False) -> None:
        if self.assistant is None:
            return
        error = ev.MessageError(kind="aborted", message="^C") if aborted else self.error
        self.add(ev.MessageCompleted(message_id=self.assistant, error=error,
                                     tokens=self.tokens, cost=self.cost))
        self.assistant, self.tokens, self.cost, self.error = None, None, 0.0, None


_RESTORED: Final = "Restored previous conversation history."
# "Main model: anthropic/claude-3-7-sonnet-20250219 with diff edit format" (older: "Model:")
_MODEL: Final = re.compile(r"^(?:Main )?[Mm]odel: (\S+)")
# "Tokens: 4.1k sent, 1.2k cache write, 8.0k cache hit, 120 received. Cost: $0.01 message, ..."
_TOKENS: Final = re.compile(r"^Tokens: (.*?received)")
_TOKEN_PART: Final = re.compile(r"([\d.]+[kKmM]?) (sent|received|cache write|cache hit)")
_COST: Final = re.compile(r"Cost: \$([\d.]+) message")
# litellm's exceptions as aider prints them ("litellm.RateLimitError: ...", "APIError: ...")
_API_ERROR: Final = re.compile(
    r"^(?:litellm\.)?(?:API|APIConnection|RateLimit|Authentication|ServiceUnavailable|"
    r"InternalServer|BadRequest|Timeout|NotFound|PermissionDenied|ContextWindowExceeded)"
    r"(?:Error|Exception)\b")


def _count(text: str) -> int:
    """aider's rounded counts: "120", "4.1k", "1.2M"."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    try:
        return int(float(text.rstrip("kKmM")) * scale)
    except ValueError:
        return 0


def _ms(stamp: str) -> int:
    try:
        when = datetime.fromisoformat(stamp.strip())
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # aider logs local time without a zone
    return int(when.timestamp() * 1000)


def plan_aider(path: Path, *, max_line: int = MAX_LINE) -> Plan:
    """One history, or every ``*.aider.chat.history.md`` under a directory (a folder of
    several projects' histories: each is read; one that is no aider history is
    reported, never the reason the others are not imported)."""
    report = ImportReport(str(path), FORMAT)
    if not path.is_dir():
        return seal(Plan(report, _sessions(path, report, max_line)))
    files = sorted(path.rglob("*.aider.chat.history.md")) or [path / ".aider.chat.history.md"]
    sessions: list[PlannedSession] = []
    for f in files:
        try:
            found = _sessions(f, report, max_line)
            if {s.id for s in found} & {s.id for s in sessions}:
                # Another project's history of the same runs (same name, same start
                # times): told apart by where it is.
                found = _sessions(f, report, max_line, str(f.parent.relative_to(path)))
                report.note("a history whose runs start as another's does: its sessions "
                            "are told apart by its folder", str(f.relative_to(path)))
            sessions.extend(found)
        except ImportInputError as exc:
            if len(files) == 1:
                raise
            report.note(f"not imported: {exc.reason}", str(f.relative_to(path)))
    return seal(Plan(report, sessions))


def _sessions(path: Path, report: ImportReport, max_line: int,
              salt: str = "") -> list[PlannedSession]:
    runs: list[_Run] = []
    for number, line in _lines(path, report, max_line):
        if line.startswith(_RUN):
            if runs:
                runs[-1].flush()
                runs[-1].close()
            runs.append(_Run(path, line[len(_RUN):], number, report, salt))
        elif runs:
            runs[-1].feed(number, line)
        elif line.strip():
            report.note("text before the first '# aider chat started': not imported", number)
    if not runs:
        raise ImportInputError(str(path), "no '# aider chat started' line: not an aider history")
    runs[-1].flush()
    runs[-1].close()
    report.note("aider logs no tool calls, ids or per-message times: replies are text, "
                "'> ' output is synthetic text, times are the run's start + 1 ms per event")
    return _continued([r for r in runs if r.session.events], report)


def _continued(runs: list[_Run], report: ImportReport) -> list[PlannedSession]:
    """A run that restored the chat history goes on in the session before it: its
    events (header notes included) follow that session's, not a session of their own.
    aider restores the whole file's history; convlog continues the latest session."""
    out: list[PlannedSession] = []
    for run in runs:
        if run.restored and out:
            report.note("a run with --restore-chat-history ('Restored previous conversation "
                        "history.'): continues the session before it", run.start)
            out[-1].events.extend(run.session.events)
            out[-1].tool_version = out[-1].tool_version or run.session.tool_version
            continue
        out.append(run.session)
    return out
