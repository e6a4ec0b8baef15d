"""What the session list says about a session: its title, where and with what it ran.

Read from the log's edges, never from a whole fold, so that listing a store of long
sessions stays fast: the first ``EDGE`` events (the import's label, the first prompt,
the first messages' model and working directory) and the last ``EDGE`` (a late title).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from engine import events as ev
from engine.store.base import Store
from projections import views as v
from projections.withparts import WithPartsProjection

EDGE = 400  # events read at each end of a session
TITLED_TAG = "session.titled"  # the importers' title event (read by its tag string)
TITLE_CHARS = 120


def session_title(events: Sequence[Any], session_id: str) -> str | None:
    """A session's title: its latest ``session.titled`` event's ``title``, else the text
    of its first user prompt (first line, cut at ``TITLE_CHARS``); None without either.

    ``events`` are the session's events in seq order (or its edges: see EDGE). The
    title event is found by its tag string, so this works before and after the event
    type exists in ``engine.events``.
    """
    for e in reversed(events):
        if ev.tag_of(type(e)) == TITLED_TAG:
            title = getattr(e, "title", None)
            if isinstance(title, str) and title.strip():
                return _one_line(title)
    proj = WithPartsProjection(session_id)
    last = 0
    for e in events:
        if e.seq != last + 1:
            break  # the head ends here; the tail does not follow on from it
        last = e.seq
        if type(e) in WithPartsProjection.IGNORES or ev.tag_of(type(e)) == TITLED_TAG:
            continue
        proj.apply(e)
    for m in proj.messages():
        if isinstance(m.info, v.UserInfo):
            for p in m.parts:
                if isinstance(p, v.TextPart) and not p.synthetic and not p.ignored:
                    text = _prompt(p.text)
                    if text:
                        return _one_line(text)
    return None


# A tool's own wrapping around a prompt: Claude Code's <command-name>/init</command-name>,
# Codex's <environment_context> block sent as the first user message.
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_CONTEXT = re.compile(r"\s*<(environment_context|user_instructions|system-reminder)>")


def _prompt(text: str) -> str:
    """What a person typed: a context block the tool sent is no prompt, and tags go."""
    if _CONTEXT.match(text):
        return ""
    return " ".join(_TAG.sub(" ", text).split(" ")).strip()


def _one_line(text: str) -> str:
    line = next((" ".join(x.split()) for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1] + "…"


def edges(store: Store, sid: str, version: int) -> list[ev.AnyEvent]:
    """The first and last ``EDGE`` events of the session, in seq order."""
    head = list(store.read(sid, 1, min(version, EDGE)))
    tail = list(store.read(sid, max(EDGE + 1, version - EDGE + 1), version)) \
        if version > EDGE else []
    return head + tail


def describe(store: Store, sid: str, version: int) -> dict[str, Any]:
    """Title, working directory and model from the session's edges."""
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
    return {"title": session_title(events, sid), "cwd": cwd, "model": model}


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
