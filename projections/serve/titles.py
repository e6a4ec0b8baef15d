"""What the session list says about a session: its title, where and with what it ran.

The title is :class:`projections.titles.TitleFold` over the whole log, as ``convlog
sessions`` folds it, so the two never disagree (a ``/rename`` in the middle of a long
session counts). The fold is kept per session and only the events after the version it
reached are read on the next listing; the read is the store's bulk one, where a run of
deltas (most of a session, and no part of a title) is one slice, not an event each.
The working directory and model come from the log's edges: the first ``EDGE`` events
and the last ``EDGE``.
"""

from __future__ import annotations

import copy
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from engine import events as ev
from engine.store.base import Store
from engine.store.runs import Run
from projections import views as v
from projections.bulk import read_bulk
from projections.titles import TitleFold

EDGE = 400  # events read at each end of a session
TITLE_CHARS = 120
GIVE_WAY = 64  # events or runs folded between two offers of the interpreter to others


def session_title(events: Iterable[Any], session_id: str) -> str | None:
    """A session's title as the list shows it (:class:`projections.titles.TitleFold`,
    the one rule ``convlog sessions`` follows too): the latest ``session.titled``,
    else the first prompt a person typed; None without either. ``events`` are the
    session's events in seq order, or its edges (see EDGE)."""
    title, _ = TitleFold().apply_all(events).shown(TITLE_CHARS)
    return title or None


# Per store, per session: the version folded to and the fold. Weak on the store, so a
# closed store's folds go with it and a new store at the same address starts afresh.
_FOLDS: weakref.WeakKeyDictionary[Store, dict[str, tuple[int, TitleFold]]] = \
    weakref.WeakKeyDictionary()
_FOLDS_LOCK = threading.Lock()


def folded_title(store: Store, sid: str, version: int) -> str | None:
    """The session's title as of ``version`` from its whole log (lineage included), as
    ``convlog sessions`` shows it but ``TITLE_CHARS`` wide; folds only the events after
    the version the last call reached."""
    with _FOLDS_LOCK:
        known = _FOLDS.setdefault(store, {}).get(sid)
    done, fold = known if known is not None and known[0] <= version else (0, TitleFold())
    if done < version:
        fold = copy.deepcopy(fold)  # another thread may be reading the kept one
        for i, e in enumerate(read_bulk(store, sid, done + 1, version, ids=False)):
            if not isinstance(e, Run):
                fold.apply(e)
            if i % GIVE_WAY == 0:
                time.sleep(0)  # the page's other requests (its first state) go first
        with _FOLDS_LOCK:
            folds = _FOLDS.setdefault(store, {})
            kept = folds.get(sid)
            if kept is None or kept[0] < version:
                folds[sid] = (version, fold)
    title, _ = fold.shown(TITLE_CHARS)
    return title or None


def edges(store: Store, sid: str, version: int) -> list[ev.AnyEvent]:
    """The first and last ``EDGE`` events of the session, in seq order."""
    head = list(store.read(sid, 1, min(version, EDGE)))
    tail = list(store.read(sid, max(EDGE + 1, version - EDGE + 1), version)) \
        if version > EDGE else []
    return head + tail


def describe(store: Store, sid: str, version: int) -> dict[str, Any]:
    """Title (the whole log's, :func:`folded_title`), working directory and model (from
    the session's edges)."""
    events = edges(store, sid, version)
    cwd = model = None
    for e in events:
        if isinstance(e, ev.MessageStarted):
            if cwd is None and e.path is not None and e.path.cwd:
                cwd = e.path.cwd
            if model is None and e.model is not None and e.model.model_id:
                model = e.model.model_id
        if cwd is not None and model is not None:
            break
    return {"title": folded_title(store, sid, version), "cwd": cwd, "model": model}


def usage(messages: list[v.WithParts]) -> dict[str, Any]:
    """Messages, tokens and cost of a state, summed over its assistant messages."""
    tokens = {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    cost = 0.0
    for m in messages:
        info = m.info
        if not isinstance(info, v.AssistantInfo):
            continue
        # The message's own totals when its source gave them, else its steps' sums.
        steps = [p for p in m.parts if isinstance(p, v.StepFinishPart)]
        own = info.cost or info.tokens.input or info.tokens.output
        for cost_of, t in ([(info.cost, info.tokens)] if own or not steps
                           else [(p.cost, p.tokens) for p in steps]):
            cost += cost_of
            tokens["input"] += t.input
            tokens["output"] += t.output
            tokens["reasoning"] += t.reasoning
            tokens["cache_read"] += t.cache.read
            tokens["cache_write"] += t.cache.write
    return {"messages": len(messages), "tokens": tokens, "cost": round(cost, 6)}
