"""ConvlogSession with many writers (objects, threads, processes), async I/O, close, limits."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import SessionSettings
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import SessionClosed
from engine.integrations.openai_agents import SDK_TOOL_ERROR
from engine.store import MemoryStore, SQLiteStore
from projections.integrations.openai_agents import ConvlogSession
from tests.support.agents_fake import ScriptedModel, text

set_tracing_disabled(True)
ROOT = Path(__file__).resolve().parents[2]


def user(n: int | str) -> Any:  # an item (the SDK types items as a TypedDict union)
    return {"role": "user", "content": f"Message {n}"}


def test_a_second_object_writes_after_the_first_and_each_sees_the_other() -> None:
    store = MemoryStore()
    a, b = ConvlogSession(store, "shared"), ConvlogSession(store, "shared")
    asyncio.run(a.add_items([user(1)]))
    asyncio.run(b.add_items([user(2)]))  # b's view was stale: it catches up, then writes
    asyncio.run(a.add_items([user(3)]))
    expected = [user(1), user(2), user(3)]
    assert asyncio.run(a.get_items()) == asyncio.run(b.get_items()) == expected
    assert asyncio.run(b.pop_item()) == user(3)
    assert asyncio.run(a.get_items()) == expected[:2]
    asyncio.run(a.clear_session())
    assert asyncio.run(b.get_items()) == []


def test_one_object_from_five_threads_loses_nothing(tmp_path: Path) -> None:
    """The SDK's own concurrent-access check: ten adds from a pool of five threads."""
    store = SQLiteStore(str(tmp_path / "c.db"))
    session = ConvlogSession(store, "concurrent_test")

    def add(item: Any) -> None:
        asyncio.run(session.add_items([item]))

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(add, [user(i) for i in range(10)]))
    got: list[Any] = asyncio.run(session.get_items())
    contents = {i["content"] for i in got}
    assert contents == {f"Message {i}" for i in range(10)}
    fresh = ConvlogSession(store, "concurrent_test")
    assert asyncio.run(fresh.get_items()) == asyncio.run(session.get_items())


def test_many_objects_in_threads_keep_each_writers_order(tmp_path: Path) -> None:
    path = str(tmp_path / "t.db")

    def writer(name: str) -> None:
        session = ConvlogSession(SQLiteStore(path), "threads")
        for i in range(15):
            asyncio.run(session.add_items([user(f"{name}-{i}")]))

    threads = [threading.Thread(target=writer, args=(n,)) for n in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items: list[Any] = asyncio.run(ConvlogSession(SQLiteStore(path), "threads").get_items())
    assert len(items) == 45
    for name in "abc":
        mine = [i["content"] for i in items if i["content"].startswith(f"Message {name}-")]
        assert mine == [f"Message {name}-{i}" for i in range(15)]


class RacingStore(MemoryStore):
    """A real MemoryStore that runs ``race`` once, right after it answers a version:
    another writer appending between a reader's version and its read."""

    def __init__(self) -> None:
        super().__init__()
        self.race: Any = None

    def version(self, *args: Any, **kwargs: Any) -> Any:
        answer = super().version(*args, **kwargs)
        race, self.race = self.race, None
        if race is not None:
            race()
        return answer


def test_a_writer_appending_between_the_catch_ups_version_and_read_is_folded_once() -> None:
    """The regression of the three-threads test: the catch-up folded events past the
    version it had read, set its version back, and folded them again on the retry
    (``KeyError('completed', MessageStarted)``; the writer's items were lost)."""
    store = RacingStore()
    a, b = ConvlogSession(store, "race"), ConvlogSession(store, "race")
    asyncio.run(a.add_items([user(1)]))
    asyncio.run(b.add_items([user(2)]))
    store.race = lambda: asyncio.run(b.add_items([user(3)]))
    asyncio.run(a.add_items([user(4)]))
    expected = [user(i) for i in (1, 2, 3, 4)]
    assert asyncio.run(a.get_items()) == asyncio.run(b.get_items()) == expected
    assert asyncio.run(ConvlogSession(store, "race").get_items()) == expected


def test_a_writer_appending_while_a_session_opens_is_not_skipped() -> None:
    """Opening read the events, then the version: an append in between left the
    version ahead of the fold, so the new object never saw that item."""
    store = RacingStore()
    first = ConvlogSession(store, "open-race")
    asyncio.run(first.add_items([user(1)]))
    store.race = lambda: asyncio.run(first.add_items([user(2)]))
    late = ConvlogSession(store, "open-race")
    asyncio.run(late.add_items([user(3)]))
    expected = [user(1), user(2), user(3)]
    assert asyncio.run(late.get_items()) == asyncio.run(first.get_items()) == expected


WRITER = """
import asyncio, pathlib, sys, time
from engine.store import SQLiteStore
from projections.integrations.openai_agents import ConvlogSession
path, name, barrier = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
(barrier / name).touch()  # imported: ready
while len(list(barrier.iterdir())) < 2:  # both processes start writing at once
    time.sleep(0.001)
session = ConvlogSession(SQLiteStore(path), "two-processes")  # both create it: idempotent
for i in range(20):
    asyncio.run(session.add_items([{"role": "user", "content": f"{name}-{i}"}]))
"""


def test_two_processes_times_twenty_adds_keep_forty_in_order(tmp_path: Path) -> None:
    path = str(tmp_path / "p.db")
    barrier = tmp_path / "ready"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, path, name, str(barrier)],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    items: list[Any] = asyncio.run(
        ConvlogSession(SQLiteStore(path), "two-processes").get_items())
    assert len(items) == 40
    for name in ("a", "b"):
        assert [i["content"] for i in items if i["content"].startswith(name)] == [
            f"{name}-{i}" for i in range(20)]


class ThreadNotingStore(MemoryStore):
    """A real MemoryStore that notes which threads read and append."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.get_ident())
        return super().append(*args, **kwargs)

    def version(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.get_ident())
        return super().version(*args, **kwargs)


def test_the_async_methods_do_their_store_io_off_the_event_loop() -> None:
    store = ThreadNotingStore()
    session = ConvlogSession(store, "async")
    store.threads.clear()

    async def use() -> int:
        await session.add_items([user(1)])
        await session.get_items()
        await session.pop_item()
        await session.clear_session()
        return threading.get_ident()

    loop_thread = asyncio.run(use())
    assert store.threads
    assert loop_thread not in store.threads


def test_close_refuses_later_use_and_settings_are_coerced_and_honoured() -> None:
    store = MemoryStore()
    session = ConvlogSession(store, "settings", session_settings={"limit": 3})
    assert isinstance(session.session_settings, SessionSettings)
    asyncio.run(session.add_items([user(i) for i in range(5)]))
    assert asyncio.run(session.get_items()) == [user(i) for i in range(2, 5)]
    assert asyncio.run(session.get_items(limit=2)) == [user(3), user(4)]
    assert asyncio.run(session.get_items(limit=0)) == []
    assert asyncio.run(session.get_items(limit=-1)) == [user(i) for i in range(5)]
    with pytest.raises(TypeError, match="limitt"):
        ConvlogSession(store, "settings", session_settings={"limitt": 1})
    session.close()
    with pytest.raises(SessionClosed):
        asyncio.run(session.get_items())
    with pytest.raises(SessionClosed):
        asyncio.run(session.add_items([user(9)]))
    assert len(asyncio.run(ConvlogSession(store, "settings").get_items(limit=-1))) == 5


@pytest.fixture
def sqlite_session() -> Iterator[SQLiteSession]:
    session = SQLiteSession("limits", session_settings=SessionSettings(limit=100))
    yield session
    session.close()


def test_a_run_config_limit_reaches_the_model_as_with_sqlite(
        sqlite_session: SQLiteSession) -> None:
    async def run(session: Any) -> list[Any]:
        await session.add_items([user(i) for i in range(10)])
        model = ScriptedModel([[text("Got it")]])
        await Runner.run(Agent(name="t", model=model), "New question", session=session,
                         run_config=RunConfig(session_settings=SessionSettings(limit=2)))
        return list(model.inputs[-1])

    ours = asyncio.run(run(ConvlogSession(MemoryStore(), "limits",
                                          session_settings=SessionSettings(limit=100))))
    assert ours == asyncio.run(run(sqlite_session))
    assert [i["content"] for i in ours] == ["Message 8", "Message 9", "New question"]


ITEMS = st.sampled_from([
    {"role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
     "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
    {"type": "function_call_output", "call_id": "c1", "output": "1"},
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c2", "output": SDK_TOOL_ERROR},
    {"type": "function_call_output", "call_id": "c1", "output": '{"assistant": "expert"}'},
])
WRITERS = st.lists(st.tuples(
    st.integers(0, 2),  # which object
    st.one_of(st.tuples(st.just("add"), st.lists(ITEMS, min_size=1, max_size=3)),
              st.tuples(st.just("pop"), st.none()), st.tuples(st.just("clear"), st.none()),
              st.tuples(st.just("get"), st.integers(-1, 4)))), max_size=16)


@settings(max_examples=60, deadline=None)
@given(WRITERS)
def test_any_interleaving_of_objects_is_one_sqlite_session(ops: list[Any]) -> None:
    """Three objects on one session id take turns: together they are one SDK session."""
    store = MemoryStore()
    ours = [ConvlogSession(store, "many") for _ in range(3)]
    theirs = SQLiteSession("many")

    async def apply() -> None:
        for who, (op, arg) in ops:
            results: list[Any] = []
            pair: tuple[Any, Any] = (ours[who], theirs)
            for session in pair:
                if op == "add":
                    results.append(await session.add_items([dict(i) for i in arg]))
                elif op == "pop":
                    results.append(await session.pop_item())
                elif op == "clear":
                    results.append(await session.clear_session())
                else:
                    results.append(await session.get_items(None if arg == 0 else arg))
            assert results[0] == results[1]
        want = await theirs.get_items()
        for session in ours:
            assert await session.get_items() == want

    try:
        asyncio.run(apply())
    finally:
        theirs.close()
    # The log reads as a conversation whatever the interleaving: nothing left open
    # but the one assistant message whose calls may still be answered.
    life = ConvlogSession(store, "many").session.lifecycle
    open_messages = [m for m in life.messages.values() if m.state == "open"]
    assert len(open_messages) <= 1
