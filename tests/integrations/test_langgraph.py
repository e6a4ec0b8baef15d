"""ConvlogSaver: LangGraph's checkpointer on convlog stores, against LangGraph itself.

LangGraph's own checkpointer conformance suite runs against it; a real
``StateGraph`` runs the same story (turns, time travel, ``update_state`` and a
fork, an interrupt resumed by a fresh saver) with ``ConvlogSaver`` and with
LangGraph's ``InMemorySaver``, and every answer is compared.
"""

from __future__ import annotations

import asyncio
import operator
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from engine import events as ev
from engine.store import MemoryStore, SQLiteStore
from engine.store.verify import verify
from projections.integrations.langgraph import ConvlogSaver, thread_session_id


def test_langgraphs_checkpointer_conformance_suite_passes(tmp_path: Path) -> None:
    made = iter(range(100))

    @checkpointer_test(name="ConvlogSaver")
    async def saver() -> Any:
        yield ConvlogSaver(SQLiteStore(str(tmp_path / f"c{next(made)}.db")))

    report = asyncio.run(validate(saver))
    failures = {cap: r.failures for cap, r in report.results.items() if r.tests_failed}
    assert failures == {}
    assert report.passed_all_base()
    ran = {cap: r.tests_passed for cap, r in report.results.items() if r.detected}
    assert set(ran) == {"put", "put_writes", "get_tuple", "list", "delete_thread",
                        "copy_thread"}
    assert sum(ran.values()) >= 60


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def answer(state: State) -> dict[str, list[str]]:
    return {"log": [f"answer {len(state['log'])}"]}


def review(state: State) -> dict[str, list[str]]:
    if state["log"][-1].startswith("approve"):
        verdict = interrupt({"asking": state["log"][-1]})
        return {"log": [f"reviewed: {verdict}"]}
    return {}


def app(saver: BaseCheckpointSaver[Any]) -> Any:
    g = StateGraph(State)
    g.add_node("answer", answer)
    g.add_node("review", review)
    g.add_edge(START, "review")
    g.add_edge("review", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def shape(snapshot: Any) -> tuple[Any, ...]:
    """What a state snapshot says, without its ids and times (they differ per run)."""
    meta = snapshot.metadata or {}
    return (snapshot.values, snapshot.next, meta.get("source"), meta.get("step"),
            [[i.value for i in t.interrupts] for t in snapshot.tasks])


def story(saver: BaseCheckpointSaver[Any], again: BaseCheckpointSaver[Any]) -> list[Any]:
    """Turns, the state history, a fork from turn 1 by update_state, an interrupt
    answered through ``again`` (a second saver on the same store: another request)."""
    graph, cfg = app(saver), {"configurable": {"thread_id": "t-1"}}
    seen: list[Any] = []
    for q in ("q1", "q2", "q3"):
        seen.append(graph.invoke({"log": [q]}, cfg))
    history = list(graph.get_state_history(cfg))
    seen.append([shape(s) for s in history])
    after_first = next(s for s in history if s.values.get("log") == ["q1", "answer 1"])
    forked = graph.update_state(after_first.config, {"log": ["edited"]})
    seen.append(shape(graph.get_state(forked)))
    seen.append(graph.invoke({"log": ["q2 again"]}, forked))
    seen.append(shape(graph.get_state(cfg)))
    seen.append([shape(s) for s in graph.get_state_history(cfg)])
    # Time travel: replay from an earlier checkpoint.
    seen.append(graph.invoke(None, after_first.config))
    # Human in the loop: the run stops at an interrupt; a fresh saver resumes it.
    stopped = graph.invoke({"log": ["approve the plan"]}, cfg)
    seen.append(stopped.get("__interrupt__", [None])[0].value)
    resumed = app(again).invoke(Command(resume="yes"), cfg)
    seen.append(resumed)
    seen.append([shape(s) for s in app(again).get_state_history(cfg, limit=3)])
    return seen


def test_a_graph_runs_on_the_log_as_on_langgraphs_own_saver(tmp_path: Path) -> None:
    memory = InMemorySaver()
    theirs = story(memory, memory)
    store = SQLiteStore(str(tmp_path / "g.db"))
    ours = story(ConvlogSaver(store), ConvlogSaver(store))
    assert ours == theirs
    assert ours[-2]["log"][-2:] == ["reviewed: yes", ours[-2]["log"][-1]]
    # The checkpoints are events of a convlog session that verifies.
    sid = thread_session_id("t-1")
    kinds = {type(e) for e in store.read(sid)}
    assert {ev.GraphCheckpointSaved, ev.GraphWritesSaved} <= kinds
    assert verify(store, sid).ok


def test_the_async_graph_runs_on_the_log_as_on_langgraphs_own_saver() -> None:
    async def run(saver: BaseCheckpointSaver[Any]) -> list[Any]:
        graph, cfg = app(saver), {"configurable": {"thread_id": "a"}}
        out = [await graph.ainvoke({"log": [q]}, cfg) for q in ("x", "y")]
        out.append([shape(s) async for s in graph.aget_state_history(cfg)])
        await saver.adelete_thread("a")
        out.append(shape(await graph.aget_state(cfg)))
        return out

    assert asyncio.run(run(ConvlogSaver(MemoryStore()))) == asyncio.run(run(InMemorySaver()))


def test_a_value_is_stored_once_per_version() -> None:
    """A checkpoint that keeps a channel value names its version; it does not repeat it."""
    store = MemoryStore()
    graph, cfg = app(ConvlogSaver(store)), {"configurable": {"thread_id": "v"}}
    for q in ("a", "b", "c"):
        graph.invoke({"log": [q]}, cfg)
    saved = [e for e in store.read(thread_session_id("v"))
             if isinstance(e, ev.GraphCheckpointSaved)]
    versions = [(c, v["version"]) for e in saved for c, v in (e.values or {}).items()]
    assert len(versions) == len(set(versions))
    assert len(saved) > sum(1 for e in saved if "log" in (e.values or {}))


def test_savers_in_threads_on_one_store_lose_no_checkpoint(tmp_path: Path) -> None:
    """Three savers (three threads, one SQLite file) write checkpoints and writes to
    one LangGraph thread at once: a fresh saver sees every one, each with its value."""
    path = str(tmp_path / "many.db")
    start = threading.Barrier(3)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            saver = ConvlogSaver(SQLiteStore(path))
            start.wait()
            for i in range(8):
                cp = generate_checkpoint(channel_values={"who": f"{k}-{i}"})
                cp["channel_versions"] = {"who": saver.get_next_version(None, None)}
                stored = saver.put(generate_config("shared"), cp, generate_metadata(step=i),
                                   dict(cp["channel_versions"]))
                saver.put_writes(stored, [("note", f"{k}-{i}")], task_id=f"t{k}")
        except BaseException as exc:  # a dying thread must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = list(ConvlogSaver(SQLiteStore(path)).list(generate_config("shared")))
    got = sorted(t.checkpoint["channel_values"]["who"] for t in listed)
    assert got == sorted(f"{k}-{i}" for k in range(3) for i in range(8))
    assert all([w[2] for w in t.pending_writes or []] == [t.checkpoint["channel_values"]["who"]]
               for t in listed)
