"""The recorder: one thread that writes what the forwarder saw as convlog events.

The forwarder never waits for it: it queues a copy of each request, response
start, body chunk and end (:meth:`Recorder.put` is a non-blocking queue put)
and goes on forwarding. The thread owns the store and every session object.

**Commits are grouped.** Each provider event is parsed, checked and recorded as
it arrives, but a streamed answer's events are committed together: the events
of the chunks that arrive in one burst (whatever the queue holds when the
recorder looks; in :mod:`engine.proxy.process`, what one commit window brought)
make one store append, by :meth:`Recorder.commit`. One store transaction per
chunk cost more CPU than everything else the recorder does with the chunk, on
the cores the traffic runs on. The order is the order of arrival: at most one
call holds uncommitted events at a time (any job of another call, and every
job that is not a chunk, commits them first), and :meth:`Recorder.commit` runs
before a sync is answered, before stopping and when the store closes. What a
``kill -9`` of the recorder can lose is the uncommitted group (at most one
window) and what it had not yet read; everything committed stays, the log
verifies, and the client's traffic never waits on any of it.

Nothing here can break the client's traffic: any failure while recording a
call is logged (structlog, ``proxy.record_failed``), kept in
:attr:`Recorder.failures`, recorded in the session as far as the store lets
(the ingest settles the message aborted, or an error message says recording
failed), and the call's later chunks are ignored.
"""

from __future__ import annotations

import bisect
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs

from engine import events as ev
from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.gemini import GeminiIngest
from engine.adapters.ingest import ProviderStreamError, StreamError, StreamIngest
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.errors import UnknownSession
from engine.ids import part_id, uuid7
from engine.importers.base import stable_uuid
from engine.logging import get_logger
from engine.proxy import context as ctx
from engine.proxy.conversation import Entry, conversation, entries, system_text
from engine.proxy.decode import decoder
from engine.proxy.errors import message_error
from engine.proxy.grouping import GroupedSession, open_grouped
from engine.proxy.routes import ANTHROPIC, CHAT, GEMINI, RESPONSES, Route
from engine.proxy.sse import SSEParser
from engine.proxy.whole import stream_events, tool_results
from engine.session import PartRef
from engine.store import Store, open_store

JSON = dict[str, Any]
INGESTS: dict[str, Callable[..., StreamIngest]] = {
    ANTHROPIC: AnthropicIngest, RESPONSES: OpenAIResponsesIngest, CHAT: OpenAIChatIngest,
    GEMINI: GeminiIngest,
}
PROVIDER_IDS = {ANTHROPIC: "anthropic", RESPONSES: "openai", CHAT: "openai", GEMINI: "google"}
# The most events one streamed answer keeps uncommitted (memory, not latency:
# a group is normally committed long before, at the end of its burst).
GROUP_LIMIT = 4096

# Queue operations (tuples: (op, call id, ...)). GAP: (GAP, 0, account) -- what
# went unrecorded while no recorder ran (engine.proxy.process restarts a dead one).
REQUEST, BODY, RESPONSE, CHUNK, END, SYNC, STOP, GAP = range(8)
# The session holding one note per recording gap, and its title.
GAPS_KEY = "convlog-proxy:recording-gaps"
GAPS_TITLE = "convlog proxy: recording gaps"

# Client headers that name a session, and the one naming its parent (subagents).
_SESSION_HEADERS = (
    # (session header, child header that makes a child of the session, parent header)
    ("x-claude-code-session-id", "x-claude-code-agent-id", None),
    ("thread-id", None, "x-codex-parent-thread-id"),
    ("session-id", None, "x-codex-parent-thread-id"),
    ("x-session-id", None, "x-parent-session-id"),
)

log = get_logger("convlog.proxy")


def session_keys(headers: dict[str, str]) -> tuple[str | None, str | None]:
    """(the call's session key, its parent's key) from the client's headers."""
    for header, child, parent in _SESSION_HEADERS:
        value = headers.get(header)
        if not value:
            continue
        key = f"{header}={value}"
        if child and headers.get(child):
            return f"{key}/{child}={headers[child]}", key
        parent_value = headers.get(parent) if parent else None
        return key, (f"{header}={parent_value}" if parent_value else None)
    return None, None


@attrs.define
class Pending:
    """An answer whose tool calls wait for the results the next request carries."""

    message_id: str
    calls: dict[str, PartRef]
    finish: str | None
    tokens: ev.Tokens
    metadata: JSON | None


@attrs.define
class CallRecord:
    """What grouping needs of a recorded call. Memory stays small in a long-running
    proxy: the conversation as one hash per entry, and the request body (the base of
    the next call's delta) only while the call is its branch's latest."""

    context_id: str
    request: JSON | None
    items: int  # the request's conversation items
    entries: tuple[int, ...]  # hash of each normalized entry
    start_seq: int  # the version before the call's context
    end_seq: int
    pending: Pending | None = None


@attrs.define
class Branch:
    """One convlog session the proxy writes calls into."""

    session: GroupedSession
    calls: list[CallRecord] = attrs.Factory(list)
    order: int = 0  # its place among its group's branches
    group: Group | None = None  # the group it is in


@attrs.define
class Group:
    """The branches of one session key (a client's session header, or every call of a
    provider without one), and their calls indexed by conversation: the call a
    request continues is found by looking its conversation's prefixes up, not by
    comparing it with every call recorded (a benchmark or an agent that retries the
    same request forks a branch per call, and the group grows with the run)."""

    branches: list[Branch] = attrs.Factory(list)
    # a call's entry hashes -> (branch order, call index, branch), in that order
    calls: dict[tuple[int, ...], list[tuple[int, int, Branch]]] = attrs.Factory(dict)
    lengths: set[int] = attrs.Factory(set)  # the lengths of those keys

    def add_branch(self, branch: Branch) -> Branch:
        branch.order, branch.group = len(self.branches), self
        self.branches.append(branch)
        for i, call in enumerate(branch.calls):
            self.index(branch, i, call)
        return branch

    def add_call(self, branch: Branch, call: CallRecord) -> None:
        branch.calls.append(call)
        self.index(branch, len(branch.calls) - 1, call)

    def index(self, branch: Branch, i: int, call: CallRecord) -> None:
        if not call.entries:  # continues nothing: never a base
            return
        bisect.insort(self.calls.setdefault(call.entries, []), (branch.order, i, branch),
                      key=_position)
        self.lengths.add(len(call.entries))

    def continued(self, new: tuple[int, ...]) -> tuple[Branch, int] | None:
        """The recorded call whose conversation ``new`` extends: the longest; among
        calls as long, the first (in branch, then call order) that is its branch's
        latest, else the first."""
        for length in sorted((n for n in self.lengths if n <= len(new)), reverse=True):
            found = self.calls.get(new[:length])
            if not found:
                continue
            for _, i, branch in found:
                if i == len(branch.calls) - 1:
                    return branch, i
            return found[0][2], found[0][1]
        return None


def _position(item: tuple[int, int, Branch]) -> tuple[int, int]:
    return item[0], item[1]


@attrs.define
class Live:
    """A call in flight."""

    id: int
    route: Route
    method: str
    path: str
    query: str
    headers: JSON
    body: bytes = b""
    status: int = 0
    response_headers: JSON = attrs.Factory(dict)
    decode: Callable[[bytes], bytes] | None = None
    sse: SSEParser | None = None
    ingest: StreamIngest | None = None
    buffer: bytearray = attrs.Factory(bytearray)
    branch: Branch | None = None
    record: CallRecord | None = None
    request: JSON | None = None
    broken: bool = False


class Recorder:
    """Records proxied calls into the store at ``store_url`` from its own thread."""

    def __init__(self, store_url: str, *, key_file: str | None = None,
                 store: Store | None = None) -> None:
        self.store_url = store_url
        self.key_file = key_file
        self._given_store = store
        self.store: Store | None = None
        self.failures: list[str] = []
        self.calls = 0
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="convlog-proxy-recorder",
                                        daemon=True)
        self._live: dict[int, Live] = {}
        self._uncommitted: Live | None = None  # the one call whose events wait for commit()
        self._groups: dict[str, Group] = {}
        self._started = threading.Event()
        self._open_error: BaseException | None = None

    # ------------------------------------------------------------------ the forwarder's side

    def start(self) -> None:
        self._thread.start()
        self._started.wait()
        if self._open_error is not None:
            raise self._open_error

    def put(self, job: tuple[Any, ...]) -> None:
        self._queue.put_nowait(job)

    def sync(self, timeout: float = 30.0) -> bool:
        """Wait until everything queued so far is recorded (tests, shutdown)."""
        done = threading.Event()
        self._queue.put_nowait((SYNC, 0, done))
        return done.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread.is_alive():
            self._queue.put_nowait((STOP, 0))
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the thread

    def open(self) -> None:
        """Open the store (in the thread or process that will record)."""
        self.store = self._given_store or open_store(self.store_url, key_file=self.key_file)

    def close(self) -> None:
        if self.store is not None:
            self.commit()
        if self._given_store is None and self.store is not None:
            self.store.close()
            self.store = None

    def in_flight(self) -> list[int]:
        return list(self._live)

    def handle(self, job: tuple[Any, ...]) -> None:
        """Record one job (never raises: a failure is logged and recorded as such).
        A chunk's events may wait for :meth:`commit`."""
        self._handle(job)

    @property
    def uncommitted(self) -> bool:
        """Whether recorded events wait for :meth:`commit`."""
        return self._uncommitted is not None

    def commit(self) -> None:
        """Commit the events recorded but not yet committed, as one append (never
        raises: a failure is recorded as the call's, as any other)."""
        live, self._uncommitted = self._uncommitted, None
        if live is None:
            return
        try:
            if not live.broken and live.ingest is not None:
                live.ingest.flush()  # into the session's group
            if live.branch is not None:
                live.branch.session.commit()
        except Exception as exc:
            if live.broken:  # its failure was recorded already: the log line is all
                log.error("proxy.record_failed", call=live.id, error=repr(exc)[:500])
            else:
                self._failed(live, exc)

    def _run(self) -> None:
        try:
            self.open()
        except BaseException as exc:  # reported by start()
            self._open_error = exc
            self._started.set()
            return
        self._started.set()
        get, get_now = self._queue.get, self._queue.get_nowait
        try:
            while True:
                try:
                    job = get_now()
                except queue.Empty:  # the burst is over: commit it, then wait
                    self.commit()
                    job = get()
                op = job[0]
                if op == STOP:
                    break
                if op == SYNC:
                    self.commit()
                    job[2].set()
                    continue
                self._handle(job)
        finally:
            self.close()

    def _handle(self, job: tuple[Any, ...]) -> None:
        op, call_id = job[0], job[1]
        waiting = self._uncommitted
        if waiting is not None and (waiting.id != call_id or op not in (CHUNK, END)):
            self.commit()  # what came first is committed first
        if op == GAP:
            self._note_gap(job[2])
            return
        if op == REQUEST:
            self._live[call_id] = Live(call_id, *job[2:])
            return
        live = self._live.get(call_id)
        if live is None:
            return
        if op == END:
            del self._live[call_id]
        if live.broken:
            return
        try:
            if op == CHUNK:
                self._chunk(live, job[2])
            elif op == BODY:
                live.body = job[2]
            elif op == RESPONSE:
                self._response(live, job[2], job[3])
            elif op == END:
                self._end(live, job[2])
        except ProviderStreamError:
            # The provider's own error event: the ingest recorded the answer as ended
            # by it. Not a recording failure; the rest of the stream has nothing more.
            live.broken = True
            self._end_call(live)
        except Exception as exc:
            self._failed(live, exc)
        if live.branch is not None and (live.branch.session.waiting
                                        or self._uncommitted is live):
            self._uncommitted = live  # its events wait for the group's commit

    def _note_gap(self, account: JSON) -> None:
        """One ``transcript.noted`` line in the recording-gaps session: the calls the
        proxy forwarded while no recorder ran are not in the log, and it says so."""
        if account.get("reason") == "behind":
            text = (f"recording gap: the recorder fell behind at {account.get('since')} "
                    f"(more than {account.get('limit_bytes')} bytes waited for it) and "
                    f"caught up at {account.get('until')}; "
                    f"{account.get('unrecorded_calls', 0)} call(s) that started in "
                    "between were forwarded but not recorded; "
                    f"{account.get('cut_calls', 0)} call(s) in flight are recorded only "
                    "up to the gap (their answers ended with its error)")
        else:
            text = (f"recording gap: the recorder stopped at {account.get('since')} and "
                    f"a new one took over at {account.get('until')}; "
                    f"{account.get('unrecorded_calls', 0)} call(s) that started in "
                    "between were forwarded but not recorded; "
                    f"{account.get('cut_calls', 0)} call(s) in flight when it stopped are "
                    "recorded only up to its last commit (their answers left open)")
        try:
            session = self._new_session(GAPS_KEY, None)
            if session.version == 0:
                session.record([ev.ConversationCreated(conversation_id=session.id),
                                ev.SessionTitled(title=GAPS_TITLE, source="convlog proxy")])
            session.record([ev.TranscriptNoted(text=text)])
            session.commit()
        except Exception as exc:  # the store is down: the log line is all there is
            self.failures.append(f"recording gap not noted: {exc!r}"[:1000])
            log.error("proxy.record_failed", gap=account, error=repr(exc)[:500])

    def _failed(self, live: Live, exc: Exception) -> None:
        live.broken = True
        reason = f"recording failed: {type(exc).__name__}: {exc}"[:1000]
        self.failures.append(reason)
        log.warning("proxy.record_failed", call=live.id, path=live.path, error=reason)
        if self._uncommitted is live:
            self._uncommitted = None
        try:
            if live.branch is not None:
                live.branch.session.commit()  # what waits first, as it came
        except Exception as again:
            log.warning("proxy.record_failed", call=live.id, error=repr(again)[:500])
        try:
            ingest = live.ingest
            if ingest is not None:
                if ingest.failed is None and not ingest.stopped:
                    ingest.fail(reason)
            elif live.branch is not None:
                self._error_message(live, live.status or 0, reason, kind="unknown")
            if live.branch is not None:
                live.branch.session.commit()  # the failure's record, now
        except Exception as again:  # the store is down: the log line is all there is
            log.warning("proxy.record_failed", call=live.id, error=repr(again)[:500])
        finally:
            self._end_call(live)

    # ------------------------------------------------------------------ one call

    def _response(self, live: Live, status: int, headers: JSON) -> None:
        live.status = status
        live.response_headers = headers
        provider = live.route.provider
        try:
            body = json.loads(live.body) if live.body else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {"raw": live.body.decode("utf-8", errors="replace")}
        live.request = body
        self.calls += 1
        # The request's conversation, normalized once for grouping and the context.
        items = conversation(provider, body)
        normalized = entries(provider, items)
        hashes = _hashes(normalized)
        branch, base = self._branch_for(live, body, hashes)
        live.branch = branch
        if base is not None and base.pending is not None:
            keep = base.items
            self._settle(branch.session, base.pending,
                         tool_results(provider, items[keep:]))
            base.pending = None
        live.record = self._context(live, branch, base, body, items=items,
                                    normalized=normalized, hashes=hashes)
        encoding = headers.get("content-encoding", "")
        if encoding:
            live.decode = decoder(encoding)
        streaming = headers.get("content-type", "").startswith("text/event-stream")
        if status < 400 and streaming:
            live.sse = SSEParser()
            live.ingest = INGESTS[provider](branch.session, parent_id=live.record.context_id,
                                            batch=GROUP_LIMIT)

    def _chunk(self, live: Live, data: bytes) -> None:
        if live.decode is not None:
            data = live.decode(data)
        if live.sse is None:
            live.buffer += data
            return
        assert live.ingest is not None
        for _name, payload in live.sse.feed(data):
            self._event(live.ingest, payload)
        self._uncommitted = live

    @staticmethod
    def _event(ingest: StreamIngest, payload: str) -> None:
        if not payload or payload == "[DONE]":
            return
        ingest.feed(json.loads(payload))

    def _end(self, live: Live, error: str | None) -> None:
        ingest = live.ingest
        if live.sse is not None and ingest is not None:
            if error is None:
                for _name, payload in live.sse.close():
                    self._event(ingest, payload)
            if ingest.failed is None:
                if error is not None and not ingest.stopped:
                    ingest.fail(error)
                else:
                    self._finish(live, ingest)
        elif error is not None and live.status == 0:
            self._error_message(live, 502, error, kind="api")
        elif live.status >= 400 or error is not None:
            self._error_message(live, live.status, bytes(live.buffer).decode(
                "utf-8", errors="replace") if error is None else error)
        else:
            answer = json.loads(bytes(live.buffer)) if live.buffer else {}
            ingest = INGESTS[live.route.provider](live.branch.session,  # type: ignore[union-attr]
                                                  parent_id=live.record.context_id,  # type: ignore[union-attr]
                                                  batch=GROUP_LIMIT)
            live.ingest = ingest
            for event in stream_events(live.route.provider, answer):
                ingest.feed(event)
            self._finish(live, ingest)
        self._end_call(live)

    def _finish(self, live: Live, ingest: StreamIngest) -> None:
        try:
            result = ingest.finish()
        except StreamError:
            return  # settled by the ingest and recorded as such
        if not result.completed and result.tool_calls:
            pending = Pending(result.message_id,
                              {c.call_id: c.ref for c in result.tool_calls},
                              ingest.stop_reason, ingest.tokens, ingest.metadata)
            if live.record is not None:
                live.record.pending = pending

    def _end_call(self, live: Live) -> None:
        if live.record is not None and live.branch is not None:
            live.record.end_seq = live.branch.session.version

    # ------------------------------------------------------------------ what the call is

    def _context(self, live: Live, branch: Branch, base: CallRecord | None,
                 body: JSON, *, items: list[Any], normalized: list[Entry],
                 hashes: tuple[int, ...]) -> CallRecord:
        provider = live.route.provider
        delta_base = base if base is not None and base.request is not None else None
        keep = delta_base.items if delta_base is not None else 0
        record: JSON = {
            "provider": provider, "method": live.method, "path": live.path,
            "query": live.query, "headers": live.headers, "status": live.status,
            **ctx.delta_request(provider, body, delta_base.request if delta_base else None,
                                keep),
        }
        if delta_base is not None:
            record["base"] = delta_base.context_id
        if live.route.model:
            record["model"] = live.route.model
        session = branch.session
        model_id = live.route.model or body.get("model")
        model = (ev.ModelRef(PROVIDER_IDS[provider], model_id)
                 if isinstance(model_id, str) and model_id else None)
        message_id = uuid7()
        batch: list[ev.Event] = [ev.MessageStarted(
            message_id=message_id, role="user", model=model,
            system=system_text(provider, body), metadata={ctx.KEY: record})]
        newest = normalized[-1] if normalized else None
        text = "\n\n".join(k[1] for k in newest.keys if k[0] == "text") if newest else ""
        if newest is not None and not newest.assistant and text:
            pid = part_id()
            batch.append(ev.TextAdded(message_id=message_id, part_id=pid, text=text))
            batch.append(ev.PartEnded(message_id=message_id, part_id=pid))
        batch.append(ev.MessageCompleted(message_id=message_id))
        start = session.version  # counting what waits for the group's commit
        session.record(batch)
        call = CallRecord(message_id, body, len(items), hashes, start, session.version)
        if branch.calls:
            branch.calls[-1].request = None  # no longer a base: the new call is
        assert branch.group is not None
        branch.group.add_call(branch, call)
        return call

    def _branch_for(self, live: Live, body: JSON, new: tuple[int, ...]
                    ) -> tuple[Branch, CallRecord | None]:
        provider = live.route.provider
        key, parent_key = session_keys(live.headers)
        # A call without tools in a named session is a side call (OpenCode's title,
        # a summary): it goes to a child session, so the named session stays the
        # agent's loop whichever call comes first.
        main = None
        if key is not None and not body.get("tools"):
            main = self._named(key, parent_key)
            key = f"{key}#side"
        group_key = key or f"anonymous:{provider}"
        group = self._groups.get(group_key)
        if group is None:
            group = self._groups[group_key] = Group()
        branches = group.branches
        assert self.store is not None
        best = group.continued(new)
        if best is not None:
            origin, i = best
            call = origin.calls[i]
            if len(new) > len(call.entries):  # carries the conversation on
                if i == len(origin.calls) - 1:
                    return origin, call
                return self._fork(group, origin, call.end_seq, i + 1), call
            # The same conversation again (a retry, a regeneration): a sibling answer.
            forked = self._fork(group, origin, call.start_seq, i)
            return forked, forked.calls[-1] if forked.calls else None
        if main is not None:
            session = self._new_session(None, main.session.id)
        elif branches and not branches[0].calls:  # opened by a side call
            return branches[0], None
        elif branches and key is not None:  # extends none of the named session's calls
            session = self._new_session(None, branches[0].session.id)
        elif key is not None:
            parents = self._groups.get(parent_key) if parent_key else None
            session = self._new_session(
                key, parents.branches[0].session.id if parents else None)
        else:  # no header, a conversation nothing recorded holds: a new session
            session = self._new_session(None, None)
        return group.add_branch(Branch(session)), None

    def _named(self, key: str, parent_key: str | None) -> Branch:
        """The named session's main branch, opened (with no call yet) if needed."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = Group()
        if not group.branches:
            parents = self._groups.get(parent_key) if parent_key else None
            group.add_branch(Branch(self._new_session(
                key, parents.branches[0].session.id if parents else None)))
        return group.branches[0]

    def _fork(self, group: Group, origin: Branch, at: int, keep: int) -> Branch:
        """A new branch: ``origin``'s session forked at seq ``at``, holding its first
        ``keep`` calls."""
        session = origin.session.fork(at)
        assert isinstance(session, GroupedSession)
        return group.add_branch(Branch(session, [attrs.evolve(c)
                                                 for c in origin.calls[:keep]]))

    def _new_session(self, key: str | None, parent: str | None) -> GroupedSession:
        assert self.store is not None
        sid = stable_uuid(0, "convlog-proxy", key) if key is not None else uuid7()
        if key is not None:
            try:  # one lookup, not a listing of every session
                self.store.session_info(sid)
            except UnknownSession:
                pass
            else:
                return open_grouped(self.store, sid)  # the proxy restarted
        self.store.create_session(sid, created=_now(), parent=parent)
        return open_grouped(self.store, sid)

    # ------------------------------------------------------------------ settling

    def _settle(self, session: GroupedSession, pending: Pending,
                results: dict[str, tuple[str, bool]]) -> None:
        """The next request carries the results of the previous answer's tool calls:
        recorded with the call's context, in the same group."""
        batch: list[ev.Event] = []
        for call_id, (mid, pid) in pending.calls.items():
            found = results.get(call_id)
            if found is None:
                batch.append(ev.ToolFailed(message_id=mid, part_id=pid, kind="cancelled",
                                           error="the client sent no result for this call"))
                continue
            output, is_error = found
            batch.append(ev.ToolStarted(message_id=mid, part_id=pid))
            if is_error:
                batch.append(ev.ToolFailed(message_id=mid, part_id=pid,
                                           error=output or "error"))
            else:
                batch.append(ev.ToolCompleted(message_id=mid, part_id=pid,
                                              output=output or "(no output)",
                                              metadata=None if output else {"empty": True}))
        # As StreamIngest.complete records it (cost included), so both read the same.
        batch.append(ev.MessageCompleted(message_id=pending.message_id, cost=0.0,
                                         tokens=pending.tokens, finish=pending.finish,
                                         metadata=pending.metadata))
        session.record(batch)

    def _error_message(self, live: Live, status: int, body: str, *,
                       kind: str | None = None) -> None:
        if live.branch is None or live.record is None:
            return
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = body
        error = message_error(status, parsed, kind=kind)
        mid = uuid7()
        live.branch.session.record([
            ev.MessageStarted(message_id=mid, role="assistant",
                              parent_id=live.record.context_id,
                              metadata={ctx.KEY: {"status": status, "body": parsed}}),
            ev.MessageCompleted(message_id=mid, error=error),
        ])


def _hashes(normalized: list[Entry]) -> tuple[int, ...]:
    return tuple(hash(e) for e in normalized)


def _now() -> int:
    return int(time.time() * 1000)
