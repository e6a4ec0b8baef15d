"""LangGraph checkpointer benchmark: ``ConvlogSaver`` against LangGraph's ``SqliteSaver``.

Usage (from the repository root; needs ``pip install -e '.[bench,langgraph]'``)::

    .venv/bin/python benchmarks/langgraph_saver.py              # 500 turns
    .venv/bin/python benchmarks/langgraph_saver.py --turns 100 --json

The 500-turn conversation of ``benchmarks/stores.py`` (a prompt of ~180 bytes
and an answer of ~1,150 per turn) runs through the same ``StateGraph``
(``MessagesState``, one reply node) twice in one run: checkpointed by
``SqliteSaver`` into a SQLite file, and by ``ConvlogSaver`` into a convlog
SQLite store file. Measured: the bytes on disk at 50, 200 and 500 turns (the
ratio convlog / SqliteSaver is the figure), the time per turn (mean over the
last tenth), and that both threads end in the same state. Message ids are fixed
so the two runs checkpoint the same values.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stores import _sqlite_size, _turn_texts
from engine.store import open_store

INSTALLED = True
try:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver  # type: ignore[import-not-found, unused-ignore]
    from langgraph.graph import START, MessagesState, StateGraph

    from projections.integrations.langgraph import ConvlogSaver
except ImportError:  # told in main()
    INSTALLED = False


def run(saver: Any, texts: list[tuple[str, str]], points: list[int],
        size: Any, flush: Any) -> dict[str, Any]:
    answers = iter(texts)
    counter = iter(range(1 << 30))

    def reply(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(content=next(answers)[1], id=f"a{next(counter)}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    app = g.compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    out: dict[str, Any] = {"bytes": [], "ms_per_turn": []}
    times: list[float] = []
    for turn, (prompt, _) in enumerate(texts, start=1):
        t = time.perf_counter()
        app.invoke({"messages": [HumanMessage(content=prompt, id=f"h{turn}")]}, cfg)
        times.append((time.perf_counter() - t) * 1000)
        if turn in points:
            flush()
            out["bytes"].append(size())
    tail = times[-max(1, len(times) // 10):]
    out["ms_per_turn_last_tenth"] = sum(tail) / len(tail)
    out["final"] = [m.content for m in app.get_state(cfg).values["messages"]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not INSTALLED:
        print("langgraph is not installed (pip install -e '.[bench,langgraph]')")
        return 2
    points = [p for p in (50, 200, args.turns) if p <= args.turns]
    points = sorted(set(points))
    texts = _turn_texts(args.turns)
    with tempfile.TemporaryDirectory() as tmp:
        lg_path = Path(tmp) / "langgraph.db"
        conn = sqlite3.connect(lg_path, check_same_thread=False)
        theirs = run(SqliteSaver(conn), texts, points, lambda: _sqlite_size(lg_path),
                     conn.commit)
        conn.close()
        cl_path = Path(tmp) / "convlog.db"
        store = open_store(f"sqlite:///{cl_path}")
        ours = run(ConvlogSaver(store), texts, points, lambda: _sqlite_size(cl_path),
                   lambda: None)
        store.close()
    if ours.pop("final") != theirs.pop("final"):
        print("the two threads ended in different states")
        return 1
    result = {"turns": points, "sqlite_saver": theirs, "convlog_saver": ours,
              "bytes_ratio": [o / t for o, t in zip(ours["bytes"], theirs["bytes"],
                                                     strict=True)]}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'turns':>6} {'SqliteSaver':>14} {'ConvlogSaver':>14} {'convlog/sqlite':>15}")
    for n, t, o, r in zip(points, theirs["bytes"], ours["bytes"], result["bytes_ratio"],
                          strict=True):
        print(f"{n:>6} {t:>14,} {o:>14,} {r:>15.3f}")
    print(f"ms per turn, last tenth: SqliteSaver {theirs['ms_per_turn_last_tenth']:.2f}, "
          f"ConvlogSaver {ours['ms_per_turn_last_tenth']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
