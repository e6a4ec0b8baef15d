"""``ConvlogSaver``: LangGraph's checkpointer on a convlog store.

``graph.compile(checkpointer=ConvlogSaver(store))`` keeps a graph's
checkpoints in convlog logs instead of LangGraph's tables: a LangGraph thread is
a convlog session (its id derived from the thread id), a checkpoint is a
``graph.checkpoint_saved`` event and a task's pending writes a
``graph.writes_saved`` event. LangGraph's time travel (``get_state_history``,
invoking from an earlier checkpoint) and ``update_state`` (a new checkpoint
whose parent is the one it forks from) read and append those events, so the
whole history of a thread stays in the log and verifies like any session.

A channel value is stored once per version, in the checkpoint that made that
version (as LangGraph's PostgreSQL saver stores blobs): a checkpoint that keeps
a value names its version, it does not repeat it. Values are serialized by the
saver's ``serde`` (LangGraph's ``JsonPlusSerializer`` by default) and kept in
base64, since a convlog event holds JSON only. ``delete_thread`` appends
``session.items_cleared`` (memory ``langgraph``): the thread reads as empty
from then on, and the log keeps what it held.

Any number of savers, threads and processes may use one store: each operation
catches up with the thread's log first and is planned again after a version
conflict (:func:`engine.integrations.writers.retrying`). The async methods run
the store I/O in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import copy
import json
import random
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from engine import events as ev
from engine.errors import UnknownSession
from engine.ids import uuid7
from engine.integrations.writers import open_shared, retrying
from engine.session import Session
from engine.store import Store

T = TypeVar("T")
MEMORY: Final = "langgraph"  # the memory a thread deletion clears
# Names a LangGraph thread's convlog session (uuid5: the same thread, the same session).
NAMESPACE: Final = uuid.UUID("0b6f2b7e-2c55-4c8e-9a0c-6b1f4d7e9c21")
SERIALIZED: Final = "serialized"  # the key of a value kept serialized rather than as JSON


def thread_session_id(thread_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, thread_id))


def _json_copy(value: Any) -> Any:
    """``value`` read back from JSON when it reads back as itself, else None.

    A copy, not the caller's object: LangGraph goes on changing the dicts of a
    checkpoint it has handed over (its channel versions), and the event that
    records it is kept in the fold.
    """
    try:
        copy = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return None
    return copy if copy == value else None


class ThreadFold:
    """A LangGraph thread's checkpoints, channel values and pending writes, folded
    from its log (pure). Values stay serialized; the saver decodes what it returns."""

    def __init__(self) -> None:
        self.checkpoints: dict[str, dict[str, ev.GraphCheckpointSaved]] = {}  # ns -> id -> e
        self.values: dict[tuple[str, str, Any], tuple[str, str]] = {}  # (ns, ch, ver) -> typed
        # (ns, checkpoint id) -> (task id, idx) -> (channel, type, data, task path)
        self.writes: dict[tuple[str, str], dict[tuple[str, int], tuple[str, str, str, str]]] = {}

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.GraphCheckpointSaved):
            self.checkpoints.setdefault(e.ns, {})[e.checkpoint_id] = e
            for channel, value in (e.values or {}).items():
                self.values[(e.ns, channel, value["version"])] = (value["type"], value["data"])
        elif isinstance(e, ev.GraphWritesSaved):
            saved = self.writes.setdefault((e.ns, e.checkpoint_id), {})
            for w in e.writes:
                key = (e.task_id, int(w["idx"]))
                if key[1] >= 0 and key in saved:
                    continue  # a regular write is saved once; a special one replaces
                saved[key] = (w["channel"], w["type"], w["data"], e.task_path)
        elif isinstance(e, ev.ItemsCleared) and e.memory == MEMORY:
            self.checkpoints, self.values, self.writes = {}, {}, {}

    def latest(self, ns: str) -> ev.GraphCheckpointSaved | None:
        saved = self.checkpoints.get(ns)
        return saved[max(saved)] if saved else None


class ConvlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph ``BaseCheckpointSaver`` (sync and async) whose threads are convlog logs."""

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.store = store
        self._lock = threading.RLock()
        self._threads: dict[str, tuple[Session, ThreadFold]] = {}

    # ------------------------------------------------------------------ threads

    def _thread(self, thread_id: str, *, create: bool) -> tuple[Session, ThreadFold] | None:
        known = self._threads.get(thread_id)
        if known is not None:
            return known
        sid = thread_session_id(thread_id)
        try:
            session = open_shared(self.store, sid) if create else Session.open(self.store, sid)
        except UnknownSession:
            return None
        fold = ThreadFold()
        for e in self.store.read(sid, 1, session.version):  # what the session folded
            fold(e)
        session.subscribe(fold)
        self._threads[thread_id] = (session, fold)
        return session, fold

    def _run(self, thread_id: str, operation: Callable[[Session, ThreadFold], T], *,
             create: bool = False) -> T | None:
        """``operation`` on the caught-up thread, again after a version conflict."""
        with self._lock:
            found = self._thread(thread_id, create=create)
            if found is None:
                return None
            session, fold = found
            return retrying(session, lambda: operation(session, fold), seen=fold)

    def _typed(self, value: Any) -> dict[str, str]:
        kind, data = self.serde.dumps_typed(value)
        return {"type": kind, "data": base64.b64encode(data).decode("ascii")}

    def _load(self, kind: str, data: str) -> Any:
        return self.serde.loads_typed((kind, base64.b64decode(data)))

    def _to_json(self, value: Any) -> Any:
        copy = _json_copy(value)
        return copy if copy is not None else {SERIALIZED: self._typed(value)}

    def _from_json(self, value: Any) -> Any:
        if isinstance(value, dict) and list(value) == [SERIALIZED]:
            return self._load(value[SERIALIZED]["type"], value[SERIALIZED]["data"])
        return value

    # ------------------------------------------------------------------ writing

    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        channel_values = checkpoint["channel_values"]
        values = {channel: {"version": version, **(
            self._typed(channel_values[channel]) if channel in channel_values
            else {"type": "empty", "data": ""})} for channel, version in new_versions.items()}
        saved = ev.GraphCheckpointSaved(
            checkpoint_id=checkpoint["id"], thread=thread_id, ns=ns,
            parent_id=str(conf.get("checkpoint_id") or ""), checkpoint=self._to_json(rest),
            metadata=self._to_json(dict(get_checkpoint_metadata(config, metadata))),
            values=values or None)

        self._run(thread_id, _recorder(saved), create=True)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        saved = ev.GraphWritesSaved(
            checkpoint_id=str(conf["checkpoint_id"]), task_id=task_id, thread=thread_id, ns=ns,
            task_path=task_path,
            writes=[{"idx": WRITES_IDX_MAP.get(channel, i), "channel": channel,
                     **self._typed(value)} for i, (channel, value) in enumerate(writes)])

        self._run(thread_id, _recorder(saved), create=True)

    def delete_thread(self, thread_id: str) -> None:
        def clear(session: Session, fold: ThreadFold) -> None:
            if fold.checkpoints or fold.writes:
                session.record([ev.ItemsCleared(memory=MEMORY)])

        self._run(str(thread_id), clear)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint and pending write of one thread, saved again on another
        (appended to what the target holds); nothing to copy leaves the target as it is."""
        target = str(target_thread_id)

        def copies(session: Session, fold: ThreadFold) -> builtins.list[ev.Event]:
            out: builtins.list[ev.Event] = []
            for saved in fold.checkpoints.values():
                for cid in sorted(saved):
                    e = saved[cid]
                    # Every value a checkpoint needs, named by the version it names.
                    versions = self._from_json(e.checkpoint).get("channel_versions", {})
                    values = {ch: {"version": v, "type": typed[0], "data": typed[1]}
                              for ch, v in versions.items()
                              if (typed := fold.values.get((e.ns, ch, v))) is not None}
                    out.append(ev.GraphCheckpointSaved(
                        checkpoint_id=cid, thread=target, ns=e.ns, parent_id=e.parent_id,
                        checkpoint=e.checkpoint, metadata=e.metadata, values=values or None))
            for (ns, cid), writes in fold.writes.items():
                by_task: dict[tuple[str, str], builtins.list[dict[str, Any]]] = {}
                for (task, idx), (channel, kind, data, path) in writes.items():
                    by_task.setdefault((task, path), []).append(
                        {"idx": idx, "channel": channel, "type": kind, "data": data})
                out += [ev.GraphWritesSaved(checkpoint_id=cid, task_id=task, thread=target,
                                            ns=ns, task_path=path, writes=ws)
                        for (task, path), ws in by_task.items()]
            return out

        events = self._run(str(source_thread_id), copies) or []
        if not events:
            return

        def record(session: Session, fold: ThreadFold) -> None:
            head: builtins.list[ev.Event] = []
            if session.lifecycle.conversation.state == "absent":
                head.append(ev.ConversationCreated(conversation_id=uuid7()))
            session.record([*head, *events])

        self._run(target, record, create=True)

    def get_next_version(self, current: str | None, channel: None) -> str:
        # A counter and a random tail, as LangGraph's own savers do: a fork from an
        # earlier checkpoint counts up from there, and must not reuse the version (and
        # so the stored value) of a later checkpoint on the other path.
        n = 0 if current is None else int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    # ------------------------------------------------------------------ reading

    def _tuple(self, thread_id: str, fold: ThreadFold,
               saved: ev.GraphCheckpointSaved) -> CheckpointTuple:
        ns = saved.ns
        # Copies: LangGraph changes the checkpoint it continues from (its versions).
        rest = copy.deepcopy(self._from_json(saved.checkpoint))
        channel_values: dict[str, Any] = {}
        for channel, version in rest.get("channel_versions", {}).items():
            typed = fold.values.get((ns, channel, version))
            if typed is not None and typed[0] != "empty":
                channel_values[channel] = self._load(*typed)
        stored = fold.writes.get((ns, saved.checkpoint_id), {})
        ordered = sorted(stored.items(), key=lambda kv: (kv[1][3], kv[0][0], kv[0][1]))
        parent = ({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                    "checkpoint_id": saved.parent_id}}
                  if saved.parent_id else None)
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": saved.checkpoint_id}},
            checkpoint={**rest, "channel_values": channel_values},  # type: ignore[typeddict-item]
            metadata=copy.deepcopy(self._from_json(saved.metadata or {})),
            parent_config=parent,  # type: ignore[arg-type]
            pending_writes=[(task, channel, self._load(kind, data))
                            for (task, _), (channel, kind, data, _) in ordered])

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        wanted = get_checkpoint_id(config)

        def read(session: Session, fold: ThreadFold) -> CheckpointTuple | None:
            saved = (fold.checkpoints.get(ns, {}).get(wanted) if wanted
                     else fold.latest(ns))
            return None if saved is None else self._tuple(thread_id, fold, saved)

        return self._run(thread_id, read)

    def list(
            self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Newest first; every thread of the store when ``config`` is None."""
        threads = [str(config["configurable"]["thread_id"])] if config else self._thread_ids()
        conf = config["configurable"] if config else {}
        only_ns = conf.get("checkpoint_ns")
        only_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        found: builtins.list[CheckpointTuple] = []
        for thread_id in threads:
            def read(session: Session, fold: ThreadFold,
                     thread_id: str = thread_id) -> builtins.list[CheckpointTuple]:
                out: builtins.list[CheckpointTuple] = []
                for ns, saved in fold.checkpoints.items():
                    if only_ns is not None and ns != only_ns:
                        continue
                    for cid in sorted(saved, reverse=True):
                        if (only_id and cid != only_id) or (before_id and cid >= before_id):
                            continue
                        meta = self._from_json(saved[cid].metadata or {})
                        if filter and not all(meta.get(k) == v for k, v in filter.items()):
                            continue
                        out.append(self._tuple(thread_id, fold, saved[cid]))
                return out

            found += self._run(thread_id, read) or []
        yield from found[:limit] if limit is not None else found

    def _thread_ids(self) -> builtins.list[str]:
        """The LangGraph threads of the store: sessions whose checkpoints name a thread
        that derives their id."""
        out: builtins.list[str] = []
        for info in self.store.sessions():
            for e in self.store.read(info.id):
                if isinstance(e, ev.GraphCheckpointSaved | ev.GraphWritesSaved):
                    if thread_session_id(e.thread) == info.id:
                        out.append(e.thread)
                    break
        return out

    # ------------------------------------------------------------------ async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)


def _recorder(saved: ev.Event) -> Callable[[Session, ThreadFold], None]:
    """A write of ``saved``, opening the thread's conversation on its first write."""

    def record(session: Session, fold: ThreadFold) -> None:
        events: list[ev.Event] = []
        if session.lifecycle.conversation.state == "absent":
            events.append(ev.ConversationCreated(conversation_id=uuid7()))
        session.record([*events, saved])

    return record
