"""The Python API refuses bad arguments with a typed error and loses nothing
(issue 27 item 10).

``select_model("claude")``, ``add_context_file(None)``, ``Session.append([dict])``,
``fork(at=-1)`` and ``at(store, id, 10**6)`` raised AttributeError or ValueError:
the log was unchanged, but callers could not tell a refusal from a bug. Here
hypothesis calls every public ``Session`` method (and ``convlog.at``) with
arguments drawn from every kind of Python value, mixed with valid ones so that
calls get past their first check: each call either succeeds or raises a
:class:`ConvlogError` with the log exactly as it was; the store verifies
(deep) at the end, so nothing illegal got in either.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import convlog
from engine import events as ev
from engine.errors import ConvlogError
from engine.session import PartRef, Session
from engine.store import MemoryStore, Store
from engine.store.verify import verify

METHODS = sorted(name for name, fn in vars(Session).items()
                 if not name.startswith("_") and inspect.isfunction(fn)
                 and name != "subscribe")
MODEL = ev.ModelInfo(model_id="m-1")


def _world() -> tuple[Store, Session, list[Any]]:
    store = MemoryStore()
    s = Session.create(store)
    s.create_conversation(model_info=MODEL)
    mid = s.start_message("assistant")
    text = s.add_text(mid)
    tool = s.add_tool(mid, "call-1", "bash")
    good = [mid, text, tool, MODEL, "assistant", "user", "text", "stop", "none", "error",
            {"k": "v"}, [], 1]
    return store, s, good


def _values(good: list[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(good), st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
        st.floats(), st.text(max_size=6), st.binary(max_size=3),
        st.lists(st.one_of(st.integers(), st.none(), st.text(max_size=2)), max_size=3),
        st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.binary(max_size=2),
                                                        st.none()), max_size=2),
        st.tuples(st.text(max_size=3), st.text(max_size=3)).map(lambda t: PartRef(*t)),
        st.builds(object), st.just({"type": "text.delta"}), st.just([None]),
    )


def _snapshot(store: Store, sid: str) -> tuple[int, list[str], int]:
    return (store.version(sid), [e.id for e in store.read(sid)], len(store.sessions()))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_refusal_is_typed_and_changes_nothing(data: st.DataObject) -> None:
    store, s, good = _world()
    values = _values(good)
    for _ in range(data.draw(st.integers(1, 6), label="calls")):
        name = data.draw(st.sampled_from([*METHODS, "convlog.at"]), label="method")
        if name == "convlog.at":
            fn: Any = convlog.at
            args: list[Any] = [store, data.draw(st.one_of(st.just(s.id), values)),
                               data.draw(values)]
            kwargs: dict[str, Any] = {}
        else:
            fn = getattr(s, name)
            args, kwargs = [], {}
            for p in inspect.signature(fn).parameters.values():
                if p.kind is p.VAR_KEYWORD or p.kind is p.VAR_POSITIONAL:
                    continue
                if p.default is not p.empty and not data.draw(st.booleans(), label="give"):
                    continue
                value = data.draw(values, label=p.name)
                if p.kind is p.KEYWORD_ONLY:
                    kwargs[p.name] = value
                else:
                    args.append(value)
        before = _snapshot(store, s.id)
        try:
            fn(*args, **kwargs)
        except ConvlogError:
            assert _snapshot(store, s.id) == before, (name, args, kwargs)
        except Exception as exc:
            raise AssertionError(f"{name}{tuple(args)!r} {kwargs!r} raised "
                                 f"{type(exc).__name__}: {exc}") from exc
    report = verify(store)
    assert report.ok, report.first


def test_the_calls_of_the_issue_are_typed_refusals() -> None:
    store, session, _ = _world()
    s: Any = session  # the wrong types are the point
    calls: list[Callable[[], object]] = [
        lambda: s.select_model("claude"), lambda: s.add_context_file(None),
        lambda: s.append([{"type": "text.delta"}]), lambda: s.append([None]),
        lambda: s.fork(at=-1), lambda: convlog.at(store, s.id, 10**6)]
    for call in calls:
        before = _snapshot(store, s.id)
        try:
            call()
        except ConvlogError:
            pass
        else:
            raise AssertionError("accepted")
        assert _snapshot(store, s.id) == before


def test_a_losing_concurrent_append_says_a_retry_is_safe() -> None:
    store, s, _ = _world()
    other = Session.open(store, s.id)
    other.note_transcript("first")
    with pytest.raises(convlog.ConcurrencyError, match="safe to reread the session and retry"):
        s.note_transcript("second")
