"""The WithParts fold's shortcuts do what the plain code they replace does: the
generated completion of a message info is ``attrs.evolve``, and a step, patch or
other fixed part made on first read is the view made at once."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from projections import views as v
from projections.withparts import (
    WithPartsProjection,
    _complete_assistant,
    _complete_user,
    _evolver,
)

_TEXT = st.one_of(st.none(), st.text(max_size=5))
_META = st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=60, deadline=None)
@given(agent=st.text(max_size=4), provider=_TEXT, model=_TEXT, system=_TEXT, variant=_TEXT,
       parent=_TEXT, cost=st.floats(allow_nan=False), finish=_TEXT, meta=_META,
       new_meta=_META, created=st.integers(0, 10**13), done=st.integers(0, 10**13))
def test_completing_an_info_is_evolving_it(  # noqa: PLR0917
        agent: str, provider: str | None, model: str | None, system: str | None,
        variant: str | None, parent: str | None, cost: float, finish: str | None,
        meta: dict[str, int] | None, new_meta: dict[str, int] | None, created: int,
        done: int) -> None:
    time = v.MessageTime(created, done)
    tokens = v.Tokens(input=3, output=4)
    assistant = v.AssistantInfo("m", "s", v.MessageTime(created), agent, provider, model, system,
                                variant, v.PathInfo("/a", "/b"), parent, 0.5, v.Tokens(), "x",
                                None, meta)
    assert _complete_assistant(assistant, time, cost, tokens, finish, None, new_meta) == \
        attrs.evolve(assistant, time=time, cost=cost, tokens=tokens, finish=finish, error=None,
                     metadata=new_meta)
    user = v.UserInfo("u", "s", v.MessageTime(created), agent, None, system, {"bash": True},
                      variant, None, meta)
    assert _complete_user(user, time, new_meta) == attrs.evolve(user, time=time,
                                                                 metadata=new_meta)


def test_an_evolver_of_a_field_the_class_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="no fields"):
        _evolver(v.UserInfo, ("time", "cost"))


def test_a_fixed_part_made_on_first_read_is_the_view_made_at_once() -> None:
    proj = WithPartsProjection("s")
    stamp = {"session_id": "s", "time": 5, "message_id": "m"}
    proj.apply(ev.MessageStarted(role="assistant", seq=1, **stamp))  # type: ignore[arg-type]
    proj.apply(ev.StepFinished(part_id="p1", reason="stop", cost=1.5,
                               tokens=ev.Tokens(input=1), seq=2, **stamp))  # type: ignore[arg-type]
    proj.apply(ev.PatchAdded(part_id="p2", hash="h", files=["a", "b"], seq=3,
                             **stamp))  # type: ignore[arg-type]
    parts = proj.message("m").parts
    assert parts[0] == v.StepFinishPart("p1", "s", "m", "stop", 1.5, ev.Tokens(input=1), None)
    assert parts[1] == v.PatchPart("p2", "s", "m", "h", ["a", "b"])
    assert proj.message("m").parts[0] is parts[0]  # made once, then kept
